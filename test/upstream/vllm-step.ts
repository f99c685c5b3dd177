/**
 * vLLM's streamed `/v1/completions` step chunk with `return_token_ids`
 * (vllm-project/vllm, entrypoints/openai/completion/serving.py
 * `completion_stream_generator`, as test/e2e/stand-ins/vllm.ts builds it at
 * the commits it cites): `id`, `object`, `created`, `model`, one choice of
 * `index`, `text`, `logprobs`, `finish_reason`, `stop_reason`,
 * `prompt_token_ids` (the prompt's on a choice's first chunk, null after),
 * `token_ids`. For the chunk template's tests and the completions reader's.
 */

export const HEAD = { id: "cmpl-8f2c1e0b9a7d4c3e", object: "text_completion", created: 1765100000, model: "openai/gpt-oss-20b" };

/** A step chunk of choice `index` (default 0); the first of a choice carries the prompt's ids. */
export function step(
  text: string,
  ids: number[],
  o: { index?: number; prompt?: number[]; finish?: string | null; usage?: boolean } = {},
): Record<string, unknown> {
  const chunk: Record<string, unknown> = {
    ...HEAD,
    choices: [
      {
        index: o.index ?? 0,
        text,
        logprobs: null,
        finish_reason: o.finish ?? null,
        stop_reason: null,
        prompt_token_ids: o.prompt ?? null,
        token_ids: ids,
      },
    ],
  };
  if (o.usage) chunk.usage = null; // exclude_unset=False (v0.10.x)
  return chunk;
}
