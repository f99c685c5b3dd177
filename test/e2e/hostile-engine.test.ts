/**
 * The engine as an untrusted peer (issue #31): a real server (127.0.0.1:0) in
 * front of an engine that misbehaves on purpose (bench/peers/hostile-engine.ts,
 * on a real socket too). Each misbehaviour gets a coded answer within the
 * deadline the test sets, and the server stays up (`/healthz`). How long
 * each takes, /healthz's latency meanwhile and the memory it costs are the
 * hostile bench's to measure (bench/hostile/main.ts, bench/RESULTS.md), not
 * this test's.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "../../src/server.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";
import { startHostileEngine, type HostileEngine } from "../../bench/peers/hostile-engine.js";
import { harmony } from "../helpers.js";
import { startTestServer } from "./test-server.js";

const { enc } = harmony();
const ASK = { model: "gpt-oss", messages: [{ role: "user" as const, content: "Hi" }] };
const HEAD = enc.encode("<|channel|>final<|message|>");
const HI = enc.encode(" hi");

describe("an engine that misbehaves", () => {
  let engine: HostileEngine;
  let server: Server;
  let base: string;
  let client: OpenAI;

  beforeAll(async () => {
    engine = await startHostileEngine(4096);
    const s = await startTestServer({
      grpcPort: -1,
      upstream: { url: engine.url, idleTimeoutMs: 1000, deadlineMs: 4000, reasoningField: "reasoning" },
    });
    server = s.server;
    base = s.http;
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-local", maxRetries: 0, timeout: 60_000 });
  });

  afterAll(async () => {
    await server.stop();
    await engine.close();
  });

  const up = async () => expect((await fetch(`${base}/healthz`)).status).toBe(200);
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => e as { status?: number; error?: { code?: string; message?: string } },
    );

  it("ignores max_tokens and streams forever: each choice is cut at the limit (length), the engine request ended", async () => {
    expect(HI).toHaveLength(1);
    // headerless text is the answer (the parser's headerless_text recovery)
    engine.script({ kind: "forever", ids: new Array<number>(16).fill(HI[0]!) });
    const r = await client.chat.completions.create({ ...ASK, max_tokens: 50 });
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.choices[0]!.message.content).toBe(" hi".repeat(50));
    expect(r.usage?.completion_tokens).toBe(50);
    // streamed, and without a client limit: the context the prompt leaves is the limit
    const stream = await client.chat.completions.create({ ...ASK, stream: true });
    let content = "";
    const finishes: string[] = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        content += c.delta.content ?? "";
        if (c.finish_reason) finishes.push(c.finish_reason);
      }
    }
    expect(finishes).toEqual(["length"]);
    expect(content.length).toBeGreaterThan(3 * 3000);
    await up();
    expect(engine.stats.aborted).toBeGreaterThanOrEqual(2);
  });

  it("one event of 300,000 ids: the whole answer, split into frames, nothing dropped", async () => {
    const n = 300_000;
    const big = await startHostileEngine(1_000_000);
    big.script({ kind: "huge_event", ids: [...HEAD, ...new Array<number>(n).fill(HI[0]!), 200002] });
    const s = await startTestServer({ grpcPort: -1, upstream: { url: big.url, idleTimeoutMs: 30_000, reasoningField: "reasoning" } });
    try {
      const c = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0, timeout: 120_000 });
      const r = await c.chat.completions.create(ASK);
      expect(r.choices[0]!.finish_reason).toBe("stop");
      expect(r.choices[0]!.message.content!.length).toBe(3 * n);
      expect(r.choices[0]!.message.content).toBe(" hi".repeat(n));
    } finally {
      await s.server.stop();
      await big.close();
    }
  });

  it.each([[-1], [1.5], ["x"], [2 ** 32], [null], [201089]])("an id %j: a 502 upstream_bad_response", async (bad) => {
    engine.script({ kind: "bad_id", bad });
    const err = await failure(client.chat.completions.create(ASK));
    expect([err?.status, err?.error?.code]).toEqual([502, "upstream_bad_response"]);
    await up();
  });

  it("usage counts that are not counts, or a choice nobody asked for: a 502 upstream_bad_response", async () => {
    for (const bad of [{ prompt_tokens: "10", completion_tokens: 2 }, { prompt_tokens: -4, completion_tokens: 2 }, "lots"]) {
      engine.script({ kind: "bad_usage", ids: [...HEAD, HI[0]!, 200002], bad });
      const err = await failure(client.chat.completions.create(ASK));
      expect([err?.status, err?.error?.code], JSON.stringify(bad)).toEqual([502, "upstream_bad_response"]);
    }
    engine.script({ kind: "bad_index", ids: [...HEAD, HI[0]!, 200002] });
    const err = await failure(client.chat.completions.create(ASK));
    expect([err?.status, err?.error?.code]).toEqual([502, "upstream_bad_response"]);
    await up();
  });

  it("an event that never ends, sent in 4 KiB pieces up to 17 MiB: a 502 upstream_bad_response at the bound", async () => {
    engine.script({ kind: "unterminated", pieceBytes: 4096, totalBytes: 17 * 1024 * 1024 });
    const err = await failure(client.chat.completions.create(ASK));
    expect([err?.status, err?.error?.code]).toEqual([502, "upstream_bad_response"]);
    await up();
  });

  it("SSE comments alone keep no request alive: a 504 upstream_timeout", async () => {
    engine.script({ kind: "comments", intervalMs: 100 });
    const err = await failure(client.chat.completions.create(ASK));
    expect([err?.status, err?.error?.code]).toEqual([504, "upstream_timeout"]);
    await up();
  });

  it("events that never finish and carry nothing: a 504 upstream_deadline", async () => {
    engine.script({ kind: "no_progress", intervalMs: 50 });
    const err = await failure(client.chat.completions.create(ASK));
    expect([err?.status, err?.error?.code]).toEqual([504, "upstream_deadline"]);
    await up();
  });

  it("the parser sessions refusing the generation (the server past its memory budget): a 503 parse_failed, never a hang", async () => {
    engine.script({ kind: "ok", ids: [...HEAD, HI[0]!, 200002] });
    const s = await startTestServer({
      grpcPort: -1,
      limits: { ...DEFAULT_LIMITS, memoryBudgetBytes: 1 },
      upstream: { url: engine.url, idleTimeoutMs: 1000, reasoningField: "reasoning" },
    });
    try {
      const c = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0, timeout: 60_000 });
      const err = await failure(c.chat.completions.create(ASK));
      expect([err?.status, err?.error?.code]).toEqual([503, "parse_failed"]);
      expect(err?.error?.message).toMatch(/over_budget/);
      expect((await fetch(`${s.http}/healthz`)).status).toBe(200);
    } finally {
      await s.server.stop();
    }
  });

  it("a /metrics of 80 MB is left out at its bound; the scrape answers with the sidecar's series", async () => {
    engine.metricsBytes = 80 * 1024 * 1024;
    try {
      const res = await fetch(`${base}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toMatch(/^# the engine's \/metrics is left out \(too_large\)/m);
      expect(text).toMatch(/^harmony_tokens_total/m);
      expect(text).toMatch(/^harmony_upstream_metrics_skipped_total\{reason="too_large"\} 1/m);
      expect(text.length).toBeLessThan(4 * 1024 * 1024);
    } finally {
      engine.metricsBytes = 0;
    }
    await up();
  });
});
