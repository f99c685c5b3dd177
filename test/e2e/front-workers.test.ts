/**
 * The OpenAI front with its streams on parser worker threads: the events
 * come back from the workers as structured-clone objects (src/pool/host.ts's
 * `objects`), not made on the main thread. The same scripted answers through
 * the vLLM stand-in (test/e2e/stand-ins/vllm.ts), streamed as Chat and as
 * Responses, must read the same as the main-thread path's.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";
import { joinedDeltas } from "./coalesced.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc } = harmony();
const ids = (text: string) => enc.encode(text);

const TOOLS = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
];
const ANSWER =
  "<|channel|>analysis<|message|>The user asks about Oslo. I should answer in one sentence.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Oslo is mild and clear today, with a light breeze.<|return|>";
const CALL =
  "<|channel|>analysis<|message|>I need the weather tool.<|end|>" +
  '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';

/** Fields that differ between two runs of one answer (ids, clocks), blanked. */
const VARYING = new Set(["id", "created", "created_at", "response_id", "item_id", "call_id", "completed_at"]);
function steady(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(steady);
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = VARYING.has(k) ? typeof x : steady(x);
  return out;
}

/** A streamed answer's events (SSE `data:` lines, JSON), in order, up to `[DONE]`; each line exactly JSON.stringify's text. */
async function streamed(url: string, body: object): Promise<unknown[]> {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(r.status).toBe(200);
  const text = await r.text();
  return text
    .split("\n\n")
    .map((e) => e.split("\n").find((l) => l.startsWith("data: ")))
    .filter((l): l is string => l !== undefined && l !== "data: [DONE]")
    .map((l) => {
      const data = l.slice("data: ".length);
      const value = JSON.parse(data) as unknown;
      // each event's text is JSON.stringify's of its value (text deltas are written from a fixed template)
      expect(data).toBe(JSON.stringify(value));
      return value;
    });
}

describe("the OpenAI front with its streams on worker threads", () => {
  let vllm: VllmStandIn;
  let main: Server;
  let workers: Server;
  let mainUrl: string;
  let workersUrl: string;

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 4096 });
    const upstream = { url: vllm.url, idleTimeoutMs: 2000, reasoningField: "reasoning" as const };
    const a = await startTestServer({ grpcPort: -1, upstream, workers: 0 });
    main = a.server;
    mainUrl = a.http;
    // inline 0: no stream is parsed on the main thread, every one goes to the worker
    const b = await startTestServer({ grpcPort: -1, upstream, workers: 1, inline: 0 });
    workers = b.server;
    workersUrl = b.http;
  });

  afterAll(async () => {
    await main.stop();
    await workers.stop();
    await vllm.close();
  });

  /** The same script answered by both servers: each one's events. */
  async function both(path: string, body: object, answer: string): Promise<[unknown[], unknown[]]> {
    vllm.script({ tokens: ids(answer) });
    // engine chunks read together make one delta: compared with consecutive deltas joined (./coalesced.ts)
    const onMain = joinedDeltas((await streamed(`${mainUrl}${path}`, body)) as Record<string, unknown>[]);
    vllm.script({ tokens: ids(answer) });
    const onWorkers = joinedDeltas((await streamed(`${workersUrl}${path}`, body)) as Record<string, unknown>[]);
    return [onMain, onWorkers];
  }

  it("a streamed chat answer (reasoning, then the answer, usage) is the main thread's", async () => {
    const body = {
      model: "gpt-oss",
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      stream: true,
      stream_options: { include_usage: true },
    };
    const [onMain, onWorkers] = await both("/v1/chat/completions", body, ANSWER);
    const text = (chunks: unknown[], field: "content" | "reasoning") =>
      chunks
        .flatMap((c) => (c as { choices: { delta: Record<string, string | undefined> }[] }).choices)
        .map((c) => c.delta[field] ?? "")
        .join("");
    expect(text(onWorkers, "content")).toBe("Oslo is mild and clear today, with a light breeze.");
    expect(text(onWorkers, "reasoning")).toBe("The user asks about Oslo. I should answer in one sentence.");
    expect(steady(onWorkers)).toEqual(steady(onMain));
  });

  it("a streamed chat tool call is the main thread's", async () => {
    const body = { model: "gpt-oss", messages: [{ role: "user", content: "Weather in Oslo?" }], tools: TOOLS, stream: true };
    const [onMain, onWorkers] = await both("/v1/chat/completions", body, CALL);
    const args = onWorkers
      .flatMap((c) => (c as { choices: { delta: { tool_calls?: { function?: { arguments?: string } }[] } }[] }).choices)
      .flatMap((c) => c.delta.tool_calls ?? [])
      .map((t) => t.function?.arguments ?? "")
      .join("");
    expect(args).toBe('{"city":"Oslo"}');
    expect(steady(onWorkers)).toEqual(steady(onMain));
  });

  it("a streamed responses answer is the main thread's", async () => {
    const body = { model: "gpt-oss", input: "Weather in Oslo?", stream: true, store: false };
    const [onMain, onWorkers] = await both("/v1/responses", body, ANSWER);
    const last = onWorkers.at(-1) as { type: string; response: { output_text?: string; output: { type: string }[] } };
    expect(last.type).toBe("response.completed");
    expect(last.response.output.map((o) => o.type)).toEqual(["reasoning", "message"]);
    expect(steady(onWorkers)).toEqual(steady(onMain));
  });

  it("a streamed responses tool call is the main thread's", async () => {
    const body = {
      model: "gpt-oss",
      input: "Weather in Oslo?",
      tools: [{ type: "function", name: "get_weather" }],
      stream: true,
      store: false,
    };
    const [onMain, onWorkers] = await both("/v1/responses", body, CALL);
    const last = onWorkers.at(-1) as { response: { output: { type: string; arguments?: string }[] } };
    expect(last.response.output.find((o) => o.type === "function_call")?.arguments).toBe('{"city":"Oslo"}');
    expect(steady(onWorkers)).toEqual(steady(onMain));
  });
});
