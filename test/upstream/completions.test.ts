/**
 * The streamed completions' reader (src/upstream/completions.ts) gives the
 * same chunks whether an event was read in place by its template (its ids
 * taken as they lie, the rest from the template's chunk, no chunk made:
 * src/upstream/chunk-template.ts `Filled`) or parsed as text, and fails the
 * same way on the same event. The events are vLLM's step chunks
 * (./vllm-step.ts names the source), over a real HTTP server on 127.0.0.1; the same stream with a
 * few spaces after each event's JSON, one more each time (which JSON reads
 * past, and no template learnt from one event fits the next), is the one read
 * as text.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ChunkTemplate } from "../../src/upstream/chunk-template.js";
import { streamCompletions } from "../../src/upstream/completions.js";
import { UpstreamError, type CompletionRequest, type UpstreamChunk } from "../../src/upstream/engine.js";
import { ENGINE_RULES } from "../../src/upstream/request.js";
import { readLogprobs } from "../../src/upstream/vllm.js";
import { HEAD, step } from "./vllm-step.js";

/** A vLLM step chunk of choice `index`, as its event's text. */
function event(index: number, text: string, ids: number[], o: { prompt?: number[]; finish?: string } = {}): string {
  return JSON.stringify(step(text, ids, { ...o, index }));
}

const USAGE = JSON.stringify({ ...HEAD, choices: [], usage: { prompt_tokens: 7, completion_tokens: 9, total_tokens: 16 } });

/** Two choices' steps, interleaved as vLLM sends them for n=2: texts with escapes, an empty step, each choice's finish. */
const STREAM = [
  event(0, "", [200005], { prompt: [200006, 17360, 200008] }),
  event(1, "", [200005], { prompt: [200006, 17360, 200008] }),
  event(0, "We", [2167]),
  event(1, "Say", [25634]),
  event(0, " need", [1309]),
  event(1, ' "hi" \\ é', [392, 3686, 1, 2]),
  event(0, "", []),
  event(1, "\n", [198]),
  event(0, ".", [13], { finish: "stop" }),
  event(1, "!", [0], { finish: "length" }),
  USAGE,
];

/** The events served, as SSE; `space`: each event's JSON followed by spaces, as many as its place (JSON reads past them; no template learnt from one fits another: all read as text). */
let events: string[] = [];
let space = false;
let server: http.Server;
let url = "";

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "text/event-stream" });
    // in one write: the pieces come as one, and every event after the first is read in place (or as text) from it
    res.end(`${events.map((e, i) => `data: ${e}${space ? " ".repeat(i + 1) : ""}\n\n`).join("")}data: [DONE]\n\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

const REQUEST: CompletionRequest = { client: { model: HEAD.model }, prompt: [200006, 17360, 200008], n: 2, maxTokens: 5 };

/** What the reader gave for `stream` (and how many events a template read), or how it failed. */
async function read(stream: string[], asText: boolean): Promise<{ chunks: UpstreamChunk[]; inPlace: number; error: unknown }> {
  events = stream;
  space = asText;
  const reads = vi.spyOn(ChunkTemplate.prototype, "read");
  const chunks: UpstreamChunk[] = [];
  let error: unknown = null;
  try {
    await streamCompletions(
      ENGINE_RULES.vllm,
      { url, idleTimeoutMs: 10_000, reasoningField: "reasoning" },
      REQUEST,
      { path: "/v1/completions", body: { prompt: REQUEST.prompt }, limit: 5 },
      new AbortController().signal,
      { finish: (f) => (typeof f === "string" ? f : null), logprobs: readLogprobs },
      (chunk) => {
        chunks.push(structuredClone(chunk));
      },
    );
  } catch (e) {
    error = e;
  }
  const inPlace = reads.mock.results.filter((r) => r.value !== null).length;
  reads.mockRestore();
  return { chunks, inPlace, error };
}

describe("streamCompletions: events read in place give what parsed ones give", () => {
  it("gives the same chunks, each choice cut at its limit, with a template or without", async () => {
    const filled = await read(STREAM, false);
    const parsed = await read(STREAM, true);
    expect(filled.error).toBeNull();
    expect(parsed.error).toBeNull();
    // parsed: each choice's first event (its prompt ids: no template) and second (each choice's template is learnt
    // from it), the finishes and the usage; the template read the other four (one with escapes in its text)
    expect(filled.inPlace).toBe(4);
    expect(parsed.inPlace).toBe(0);
    expect(filled.chunks).toStrictEqual(parsed.chunks);
    // what they are: choice 1 cut at its limit of 5 ids (its finish `length`), and nothing of it after that; once
    // choice 0 finished too, the reading stops there (a choice was cut here: the engine is not waited for), and the
    // usage chunk is not read
    expect(filled.chunks.map((c) => c.choices.map((x) => [x.index, x.token_ids, x.finish_reason]))).toStrictEqual([
      [[0, [200005], null]],
      [[1, [200005], null]],
      [[0, [2167], null]],
      [[1, [25634], null]],
      [[0, [1309], null]],
      [[1, [392, 3686, 1], "length"]],
      [[0, [], null]],
      [[0, [13], "stop"]],
    ]);
  });

  it("refuses an id past the vocabulary read in place as it refuses a parsed one", async () => {
    const bad = [event(0, "", [1], { prompt: [1] }), event(0, "a", [2]), event(0, "b", [999999999])];
    const filled = await read(bad, false);
    const parsed = await read(bad, true);
    // (the first parsed, the second learnt from, the third read in place)
    expect(filled.inPlace).toBe(1);
    expect(filled.error).toBeInstanceOf(UpstreamError);
    expect(filled.error).toStrictEqual(parsed.error);
    expect((filled.error as UpstreamError).code).toBe("upstream_bad_response");
    expect(filled.chunks).toStrictEqual(parsed.chunks);
  });
});
