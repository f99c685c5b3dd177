/**
 * The streamed `/v1/completions` of the OpenAI-style engines (vLLM, SGLang,
 * trtllm-serve), read as untrusted input: each choice must carry
 * `token_ids` (an engine too old to return them is a 502 that says which
 * version is needed), each id and index is checked, usage is checked, and
 * each choice is cut at the limit the request asked (./read.ts).
 */
import { isObj } from "../core/json.js";
import {
  STOP,
  UpstreamError,
  type EventAnswer,
  type OnChunk,
  type CompletionRequest,
  type TokenLogprob,
  type UpstreamChoice,
  type UpstreamConfig,
  type UpstreamUsage,
} from "./engine.js";
import { checkIds, checkIndex, checkUsage, ChoiceLimits, vocabSize } from "./read.js";
import type { EngineRequest, EngineRules } from "./request.js";
import { streamSse } from "./sse.js";
import { ChunkTemplate, type Filled } from "./chunk-template.js";

export interface StreamReading {
  /** The engine's finish reason in the ones generate.ts knows (stop, length, repetition; anything else ends cut short). */
  finish(f: unknown): string | null;
  /** Each id's log probability, when the engine gives them (vLLM). */
  logprobs?(v: unknown, n: number): (TokenLogprob | null)[] | undefined;
}

/** Stream `er` from the engine at `cfg`, read by `rules` and `reading`, each chunk to `onChunk` as it is read. */
export function streamCompletions(
  rules: EngineRules,
  cfg: UpstreamConfig,
  request: CompletionRequest,
  er: EngineRequest,
  signal: AbortSignal,
  reading: StreamReading,
  onChunk: OnChunk,
  /** See streamSse's onDrained. */
  onDrained?: () => EventAnswer,
): Promise<void> {
  const size = vocabSize(cfg);
  const limits = new ChoiceLimits(request.n, er.limit);
  /** A choice read, cut at its limit, and what the chunk gave on: the consumer's answer. */
  const give = (choices: UpstreamChoice[], usage: UpstreamUsage | null): EventAnswer => {
    const answer = choices.length > 0 || usage !== null ? onChunk({ choices, usage }) : undefined;
    // every choice cut at its limit: the engine is not waited for
    if (limits.overrun && answer !== STOP) return answer === undefined ? STOP : answer.then(() => STOP);
    return answer;
  };
  /** A choice as read from its chunk (its ids checked already). */
  const choiceOf = (c: Record<string, unknown>, ids: number[]): UpstreamChoice => {
    const choice: UpstreamChoice = {
      index: checkIndex(c.index, request.n),
      token_ids: ids,
      finish_reason: reading.finish(c.finish_reason),
    };
    const lps = reading.logprobs?.(c.logprobs, ids.length);
    if (lps !== undefined) choice.logprobs = lps;
    return choice;
  };
  const opts = {
    baseUrl: cfg.url,
    idleTimeoutMs: cfg.idleTimeoutMs,
    deadlineMs: cfg.deadlineMs,
    apiKey: cfg.apiKey,
    signal,
    done: rules.doneMarker,
    // a step's chunk read where its bytes lie once one like it was parsed
    template: new ChunkTemplate(),
    // what a template read: its ids checked, the rest read from its template's chunk and choice (which it equals but
    // for its text and ids): no chunk made, no text decoded
    onFilled: (f: Filled): EventAnswer => {
      const ids = checkIds(f.ids, size);
      const taken = limits.take(choiceOf(f.shape.choice, ids));
      return give(taken === null ? [] : [taken], checkUsage(f.shape.chunk.usage));
    },
  };
  return streamSse(
    er.path,
    er.body,
    opts,
    (chunk) => {
      const raw = chunk.choices ?? [];
      if (!Array.isArray(raw)) throw new UpstreamError(502, "upstream_bad_response", "the upstream sent choices that are not an array");
      const choices: UpstreamChoice[] = [];
      for (const c of raw as unknown[]) {
        // an engine too old for ids ignores the field it does not know and streams text only
        if (!isObj(c) || !Array.isArray(c.token_ids)) throw new UpstreamError(502, "upstream_bad_response", rules.noIds);
        const taken = limits.take(choiceOf(c, checkIds(c.token_ids, size)));
        if (taken !== null) choices.push(taken);
      }
      return give(choices, checkUsage(chunk.usage));
    },
    onDrained,
  );
}
