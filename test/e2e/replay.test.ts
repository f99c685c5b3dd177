/**
 * Replay through the service: render requests (CLI, POST /v1/render, the
 * Render op and RPC) and chain-of-thought restoration for clients that drop it.
 */
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import { PassThrough, Readable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { HarmonyClient, type RenderedPrompt } from "../../src/client/index.js";
import { runRender } from "../../src/commands/render.js";
import { HARMONY_SERVICE } from "../../src/protocol/grpc-methods.js";
import { CotStore } from "../../src/store/memory.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";
import { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";

/** A JSON POST: the service refuses other content types (a page can send text/plain without asking). */
const JSON_BODY = { "content-type": "application/json" };

/** POST /v1/render; the answer, as the client library types a render. */
async function renderOverHttp(http: string, body: unknown): Promise<RenderedPrompt> {
  const res = await fetch(`${http}/v1/render`, { method: "POST", headers: JSON_BODY, body: JSON.stringify(body) });
  return (await res.json()) as RenderedPrompt;
}

const { enc } = harmony();
const services: Server[] = [];
const clients: HarmonyClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(services.splice(0).map((s) => s.stop()));
});

/** A service; with `workers: 0` streams are parsed on the main thread, whose memos go straight into the store. */
async function start(cotStore?: { maxBytes: number; maxEntries: number; ttlMs: number }, workers = 1) {
  const svc = new Server({
    host: "127.0.0.1",
    port: 0,
    grpcPort: 0,
    workers,
    drainTimeoutMs: 2000,
    limits: DEFAULT_LIMITS,
    logger: pino({ level: "silent" }),
    ...(cotStore ? { cotStore } : {}),
  });
  services.push(svc);
  const { port, grpcPort } = await svc.start();
  return { svc, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}/v1/stream`, grpc: `127.0.0.1:${grpcPort}` };
}

const COT = "The user wants the weather in Oslo. Call get_weather.";
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
];

/** Stream a completion that reasons and calls a tool; returns the call id the service emitted. */
async function callThroughService(client: HarmonyClient): Promise<string> {
  const s = client.open(`turn-${Math.random()}`);
  s.write(
    enc.encode(
      `<|channel|>analysis<|message|>${COT}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>`,
    ),
  );
  s.close();
  const evs = await s.collect();
  const call = evs.find((e) => e.type === "tool_call_start");
  if (call?.type !== "tool_call_start") throw new Error("no tool call");
  return call.id;
}

function history(callId: string, withReasoning: boolean) {
  return {
    tools: TOOLS,
    harmony: { current_date: "2026-11-30" },
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: null,
        ...(withReasoning ? { reasoning_content: COT } : {}),
        tool_calls: [{ id: callId, type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: callId, content: '{"temp_c": 3}' },
    ],
  };
}

describe("chain-of-thought restoration", () => {
  it.each([
    ["a worker thread", 1],
    ["the main thread", 0],
  ])("puts back the reasoning a stateless client dropped: same prompt as a client that kept it (parsed on %s)", async (_where, workers) => {
    const s = await start(undefined, workers);
    const client = await HarmonyClient.connect(s.ws);
    clients.push(client);
    const id = await callThroughService(client);
    const kept = await renderOverHttp(s.http, history(id, true));
    const dropped = await renderOverHttp(s.http, history(id, false));
    expect(kept.text).toContain(`<|channel|>analysis<|message|>${COT}<|end|>`);
    expect(dropped.ids).toEqual(kept.ids);
    expect(dropped.text).toEqual(kept.text);
    expect(dropped.restored).toEqual([{ tool_call_id: id, message_index: 1, chars: COT.length }]);
    expect(kept.restored).toEqual([]);
    const metrics = await (await fetch(`${s.http}/metrics`)).text();
    expect(metrics).toMatch(/harmony_cot_restored_total 1/);
    expect(metrics).toMatch(/harmony_cot_store_entries 1/);
    // one entry of the reasoning's UTF-8 bytes, trimmed, at the ring's start
    expect(metrics).toMatch(new RegExp(`harmony_cot_store_ring_bytes ${Buffer.byteLength(COT)}\\b`));
  });

  it("restores nothing when asked not to, or when the store is off", async () => {
    const s = await start();
    const client = await HarmonyClient.connect(s.ws);
    clients.push(client);
    const id = await callThroughService(client);
    const req = { ...history(id, false), harmony: { current_date: "2026-11-30", restore_reasoning: false } };
    const r = await renderOverHttp(s.http, req);
    expect(r.restored).toEqual([]);
    expect(r.text).not.toContain(COT);

    const off = await start({ maxBytes: 0, maxEntries: 0, ttlMs: 0 });
    const c2 = await HarmonyClient.connect(off.ws);
    clients.push(c2);
    const id2 = await callThroughService(c2);
    const r2 = await renderOverHttp(off.http, history(id2, false));
    expect(r2.restored).toEqual([]);
  });

  it("the Render op (WebSocket) and the Render RPC (gRPC) give the same prompt, restored", async () => {
    const s = await start();
    const ws = await HarmonyClient.connect(s.ws, { json: true });
    clients.push(ws);
    const id = await callThroughService(ws);
    const viaWs = await ws.render(history(id, false));
    const viaHttp = await renderOverHttp(s.http, history(id, true));
    expect(viaWs.ids).toEqual(viaHttp.ids);
    expect(viaWs.restored.map((r) => r.tool_call_id)).toEqual([id]);

    const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
    const stub = new Stub(s.grpc, grpc.credentials.createInsecure()) as unknown as {
      Render(req: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
      close(): void;
    };
    const { Render, Rendered } = s.svc.service.schema;
    const reply = await new Promise<Buffer>((resolve, reject) =>
      stub.Render(Buffer.from(Render.encode({ request_id: "r1", request_json: JSON.stringify(history(id, false)) }).finish()), (e, r) =>
        e ? reject(e) : resolve(r!),
      ),
    );
    const out = Rendered.toObject(Rendered.decode(reply), { defaults: true }) as { ids: number[]; restored: { tool_call_id: string }[] };
    expect(out.ids).toEqual(viaHttp.ids);
    expect(out.restored[0]!.tool_call_id).toBe(id);
    const bad = await new Promise<grpc.ServiceError>((resolve) =>
      stub.Render(Buffer.from(Render.encode({ request_id: "r2", request_json: "{" }).finish()), (e) => resolve(e!)),
    );
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
    stub.close();
  });

  it("bad render requests get a code, on every edge", async () => {
    const s = await start();
    const res = await fetch(`${s.http}/v1/render`, {
      method: "POST",
      headers: JSON_BODY,
      body: JSON.stringify({ messages: [{ role: "wizard" }] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: "bad_message", path: "messages[0].role" });
    expect((await fetch(`${s.http}/v1/render`)).status).toBe(405);
    const client = await HarmonyClient.connect(s.ws);
    clients.push(client);
    await expect(client.render({ messages: "nope" })).rejects.toThrow(/bad_request/);
  });
});

const utf8 = (s: string) => new TextEncoder().encode(s);

describe("CotStore", () => {
  it("evicts the least recently used beyond its byte or entry budget", () => {
    const store = new CotStore({ maxBytes: 10_000, maxEntries: 2, ttlMs: 60_000 });
    store.remember("a", utf8("alpha"));
    store.remember("b", utf8("beta"));
    expect(store.recall("a")).toBe("alpha"); // a is now the most recent
    store.remember("c", utf8("gamma"));
    expect(store.recall("b")).toBeUndefined();
    expect(store.recall("a")).toBe("alpha");
    expect(store.stats).toMatchObject({ entries: 2, evictions: 1 });
    const small = new CotStore({ maxBytes: 300, maxEntries: 100, ttlMs: 60_000 });
    for (let i = 0; i < 10; i++) small.remember(`id${i}`, utf8("x".repeat(40)));
    expect(small.stats.bytes).toBeLessThanOrEqual(300);
    expect(small.recall("id9")).toBe("x".repeat(40));
    expect(small.recall("id0")).toBeUndefined();
  });

  it("forgets entries older than the TTL", () => {
    let now = 0;
    const store = new CotStore({ maxBytes: 10_000, maxEntries: 10, ttlMs: 1000, now: () => now });
    store.remember("a", utf8("alpha"));
    now = 999;
    expect(store.recall("a")).toBe("alpha");
    now = 2000;
    expect(store.recall("a")).toBeUndefined();
    expect(store.stats.entries).toBe(0);
  });

  it("behaves as a plain least-recently-used map bounded by bytes, entries and age", () => {
    type Step = { op: "remember"; id: number; text: string } | { op: "recall"; id: number } | { op: "wait"; ms: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ op: fc.constant("remember" as const), id: fc.nat({ max: 4 }), text: fc.string({ unit: "grapheme", maxLength: 30 }) }),
      // long enough for the store's bulk copy (256 bytes and more)
      fc.record({
        op: fc.constant("remember" as const),
        id: fc.nat({ max: 4 }),
        text: fc.tuple(fc.string({ minLength: 1, maxLength: 30 }), fc.integer({ min: 10, max: 60 })).map(([t, k]) => t.repeat(k)),
      }),
      fc.record({ op: fc.constant("recall" as const), id: fc.nat({ max: 4 }) }),
      fc.record({ op: fc.constant("wait" as const), ms: fc.nat({ max: 700 }) }),
    );
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 60 }),
        fc.integer({ min: 170, max: 4000 }),
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 16, 100, 5000),
        (steps, maxBytes, maxEntries, arenaBytes) => {
          let now = 0;
          // a tiny ring: it wraps, and repacks, within a few steps
          const store = new CotStore({ maxBytes, maxEntries, ttlMs: 1000, now: () => now, arenaBytes });
          // the model: insertion order is recency order
          const model = new Map<string, { text: string; size: number; expires: number }>();
          let bytes = 0;
          let evictions = 0;
          const drop = (id: string) => {
            const e = model.get(id);
            if (e) {
              model.delete(id);
              bytes -= e.size;
            }
          };
          for (const st of steps) {
            if (st.op === "wait") now += st.ms;
            else if (st.op === "remember") {
              const id = `call_${st.id}`;
              const utf8Bytes = utf8(st.text);
              store.remember(id, utf8Bytes);
              const size = utf8Bytes.length + 2 * id.length + 160;
              if (utf8Bytes.length === 0 || size > maxBytes) continue;
              drop(id);
              model.set(id, { text: st.text, size, expires: now + 1000 });
              bytes += size;
              for (const [k, e] of model) {
                if (bytes <= maxBytes && model.size <= maxEntries && e.expires > now) break;
                drop(k);
                evictions++;
              }
            } else {
              const id = `call_${st.id}`;
              const e = model.get(id);
              const want = e && e.expires > now ? e.text : undefined;
              if (e && want === undefined) drop(id);
              if (e && want !== undefined) {
                model.delete(id);
                model.set(id, e);
              }
              expect(store.recall(id)).toBe(want);
            }
            expect(store.stats.entries).toBe(model.size);
            expect(store.stats.bytes).toBe(bytes);
            expect(store.stats.evictions).toBe(evictions);
            let live = 0;
            for (const e of model.values()) live += utf8(e.text).length;
            expect(store.arenaBytes).toBeGreaterThanOrEqual(live);
            expect(store.arenaReach).toBeLessThanOrEqual(store.arenaBytes);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("keeps UTF-8 bytes and gives back the same text, whatever its characters", () => {
    const store = new CotStore({ maxBytes: 1_000_000, maxEntries: 100, ttlMs: 60_000 });
    const texts = ["plain", "é😀家 — “quoted”", "\u3000inner\u00a0space"];
    texts.forEach((t, i) => store.remember(`c${i}`, utf8(t)));
    texts.forEach((t, i) => expect(store.recall(`c${i}`)).toBe(t));
    store.remember("empty", new Uint8Array(0));
    expect(store.recall("empty")).toBeUndefined();
    expect(store.stats.entries).toBe(3);
  });

  it("holds its bytes in one arena that stops growing once full, with large entries and recalls between", () => {
    const maxEntries = 200;
    const store = new CotStore({ maxBytes: 64 * 1024 * 1024, maxEntries, ttlMs: 60_000 });
    // entry i: 1 to 12,000 bytes of a pattern of its own (a mismatch shows which entry leaked into which)
    const text = (i: number) => `<${i}>`.repeat(1 + ((i * 7919) % 3000)).slice(0, 1 + ((i * 7919) % 12000));
    const live = new Map<string, number>();
    let liveBytes = 0;
    let peak = 0;
    const sizes = new Set<number>();
    for (let i = 0; i < 5000; i++) {
      const t = utf8(text(i));
      store.remember(`call_${i}`, t);
      live.set(`call_${i}`, t.length);
      liveBytes += t.length;
      if (i % 7 === 0 && i >= 50) {
        // a recall moves an entry's bytes to the ring's head
        const j = i - 50 + (i % 13);
        expect(store.recall(`call_${j}`)).toBe(text(j));
        const n = live.get(`call_${j}`)!;
        live.delete(`call_${j}`);
        live.set(`call_${j}`, n);
      }
      // the model's least recently used go, as the store's do
      for (const [id, n] of live) {
        if (live.size <= maxEntries) break;
        live.delete(id);
        liveBytes -= n;
      }
      peak = Math.max(peak, liveBytes);
      sizes.add(store.arenaBytes);
    }
    expect(store.stats.entries).toBe(maxEntries);
    for (const id of live.keys()) expect(store.recall(id)).toBe(text(Number(id.slice(5))));
    // one ring, never reallocated (no copy as the store fills); the head wraps once past
    // 1.5 times the live bytes, so what it touched stays near that (plus the largest entries)
    expect(sizes.size).toBe(1);
    expect(store.arenaReach).toBeLessThanOrEqual(1.5 * peak + 4 * 12_000);
  });

  it("refuses a budget over 1 GiB, and a ring given as 0 bytes still takes what it needs", () => {
    expect(() => new CotStore({ maxBytes: 2 ** 30 + 1, maxEntries: 10, ttlMs: 1000 })).toThrow(/at most/);
    const store = new CotStore({ maxBytes: 10_000, maxEntries: 10, ttlMs: 60_000, arenaBytes: 0 });
    store.remember("a", utf8("alpha"));
    expect(store.recall("a")).toBe("alpha");
  });

  it("lets go of its ring, and the pages it touched, when it is emptied", () => {
    let now = 0;
    const store = new CotStore({ maxBytes: 64 * 1024 * 1024, maxEntries: 1000, ttlMs: 1000, now: () => now });
    for (let i = 0; i < 500; i++) store.remember(`call_${i}`, utf8("x".repeat(4000)));
    expect(store.arenaReach).toBe(500 * 4000);
    now = 5000;
    store.remember("late", utf8("y")); // the expired entries go first, then a new ring takes it
    expect(store.stats.entries).toBe(1);
    expect(store.recall("late")).toBe("y");
    expect(store.arenaReach).toBe(1);
  });
});

describe("harmony-sidecar render", () => {
  it("renders stdin to ids and text, and rejects bad input with a code", async () => {
    const run = async (input: string) => {
      const out = new PassThrough();
      const err = new PassThrough();
      let o = "";
      let e = "";
      out.on("data", (c) => (o += c));
      err.on("data", (c) => (e += c));
      const code = await runRender({ output: "json" }, { stdin: Readable.from([input]), stdout: out, stderr: err }, enc);
      return { code, o, e };
    };
    const ok = await run(JSON.stringify({ messages: [{ role: "user", content: "hi" }] }));
    expect(ok.code).toBe(0);
    const r = JSON.parse(ok.o);
    expect(r.text.endsWith("<|start|>user<|message|>hi<|end|><|start|>assistant")).toBe(true);
    expect(r.ids.slice(-2)).toEqual([200006, 173781]);
    expect((await run("{")).e).toContain("bad_json");
    expect((await run(JSON.stringify({ messages: 5 }))).e).toContain("bad_request");
  });
});
