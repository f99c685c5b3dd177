/**
 * The service end to end: a real server on 127.0.0.1 (port 0), real `ws`
 * and gRPC clients. Every server is stopped after its test.
 */
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { HarmonyClient, WsClient, type GrpcClient } from "../../src/client/index.js";
import type { HarmonyEvent } from "../../src/core/events.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { schema } from "../../src/protocol/schema.js";
import { HEALTH_SERVICE } from "../../src/protocol/grpc-methods.js";
import { DEFAULT_LIMITS, type Limits } from "../../src/service/service.js";
import { Server, type ServerOptions } from "../../src/server.js";
import { harmony, loadJsonl, type ConformanceCase } from "../helpers.js";

const { enc, vocab } = harmony();
const wireSchema = schema();
const running: Server[] = [];
const clients: HarmonyClient[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

async function start(opts: Partial<Omit<ServerOptions, "limits">> & { limits?: Partial<Limits> } = {}) {
  const { limits, ...rest } = opts;
  const svc = new Server({
    host: "127.0.0.1",
    port: 0,
    grpcPort: 0,
    workers: 2,
    drainTimeoutMs: 5000,
    logger: pino({ level: "silent" }),
    ...rest,
    limits: { ...DEFAULT_LIMITS, ...limits },
  });
  running.push(svc);
  const ports = await svc.start();
  return {
    svc,
    ws: `ws://127.0.0.1:${ports.port}/v1/stream`,
    grpc: `grpc://127.0.0.1:${ports.grpcPort}`,
    http: `http://127.0.0.1:${ports.port}`,
  };
}

async function connect(url: string, opts: { json?: boolean; token?: string; handles?: boolean } = {}) {
  const c = await HarmonyClient.connect(url, opts);
  clients.push(c);
  return c;
}

/** Events with consecutive deltas of a message merged and tool call ids made comparable. */
function normalize(events: HarmonyEvent[]): unknown[] {
  const out: HarmonyEvent[] = [];
  for (const ev of events) {
    const last = out.at(-1);
    if (ev.type === "delta" && last?.type === "delta" && last.index === ev.index) {
      out[out.length - 1] = { ...last, text: last.text + ev.text };
      continue;
    }
    out.push(ev.type === "tool_call_start" || ev.type === "tool_call_end" ? { ...ev, id: `call_${ev.call_index}` } : ev);
  }
  return out;
}

function inProcess(tokens: number[], role: string | null): unknown[] {
  const p = new HarmonyParser(vocab, { role });
  return normalize([...p.write(tokens), ...p.end()]);
}

const cases = [...loadJsonl("wellformed.jsonl"), ...loadJsonl("malformed.jsonl")];
const roleOf = (c: ConformanceCase) => (c.role === null ? "none" : "assistant");

/** Send cases as interleaved step frames: each frame holds the next token of every live stream. */
async function runStepFrames(client: HarmonyClient, subset: ConformanceCase[], tokensPerStep = 1) {
  const open = client.batch();
  for (const c of subset) open.open(c.id, { role: roleOf(c) });
  open.send();
  const collected = subset.map((c) => client.handle(c.id).collect());
  const longest = Math.max(...subset.map((c) => c.tokens.length));
  for (let at = 0; at < longest; at += tokensPerStep) {
    const frame = client.batch();
    for (const c of subset) {
      if (at < c.tokens.length) frame.tokens(c.id, c.tokens.slice(at, at + tokensPerStep));
      if (at + tokensPerStep >= c.tokens.length && at < c.tokens.length) frame.close(c.id);
    }
    frame.send();
  }
  return Promise.all(collected);
}

describe("conformance corpus over the wire", () => {
  for (const [name, url, json, handles] of [
    ["WebSocket, protobuf frames", "ws", false, false],
    ["WebSocket, JSON frames", "ws", true, false],
    ["gRPC", "grpc", false, false],
    ["WebSocket, protobuf frames, streams named by handle", "ws", false, true],
    ["WebSocket, JSON frames, streams named by handle", "ws", true, true],
  ] as const) {
    it(`${name}: all 606 cases multiplexed on one connection give the in-process events`, async () => {
      const s = await start();
      const client = await connect(s[url], { json, handles });
      const got = await runStepFrames(client, cases, 7);
      for (const [i, c] of cases.entries()) expect(normalize(got[i]!), c.id).toEqual(inProcess(c.tokens, c.role));
    });
  }

  it("one token per frame on one stream and whole-stream frames agree", async () => {
    const s = await start();
    const client = await connect(s.ws);
    for (const c of cases.filter((_, i) => i % 40 === 0)) {
      const a = client.open(`${c.id}/a`, { role: roleOf(c) });
      for (const t of c.tokens) a.write([t]);
      a.close();
      const b = client.open(`${c.id}/b`, { role: roleOf(c) });
      b.write(c.tokens);
      b.close();
      const [ea, eb] = await Promise.all([a.collect(), b.collect()]);
      expect(normalize(ea), c.id).toEqual(normalize(eb));
      expect(normalize(ea), c.id).toEqual(inProcess(c.tokens, c.role));
    }
  });

  it("returns whole messages and strict errors when asked", async () => {
    const s = await start();
    const client = await connect(s.grpc);
    const st = client.open("x", { mode: "strict", wholeMessages: true });
    st.write(enc.encode("<|channel|>final<|message|>A<|end|><|return|>"));
    st.close();
    const evs = await st.collect();
    expect(evs.find((e) => e.type === "message_end")).toMatchObject({
      message: { role: "assistant", content: "A", channel: "final" },
    });
    expect(evs.find((e) => e.type === "error")).toMatchObject({
      code: "unexpected_token",
      message: "Unexpected token 200002 while expecting start token 200006",
      at: 5,
      token: 200002,
    });
    expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "error" });
  });
});

describe("bad input gets an error event and the connection carries on", () => {
  async function expectStillServing(client: HarmonyClient) {
    const st = client.open(`ok-${Math.random()}`);
    st.write(enc.encode("<|channel|>final<|message|>fine<|return|>"));
    st.close();
    const evs = await st.collect();
    expect(
      evs
        .filter((e) => e.type === "delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("fine");
  }
  const errorOf = async (client: HarmonyClient, stream: string) => {
    for await (const ev of client.handle(stream)) if (ev.type === "error") return ev;
    return undefined;
  };
  const nextConnectionError = (client: HarmonyClient) =>
    new Promise<HarmonyEvent>((resolve) => client.onEvent((stream, ev) => stream === "" && resolve(ev)));

  it("undecodable binary frame", async () => {
    const s = await start();
    const client = await connect(s.ws);
    const err = nextConnectionError(client);
    client.sendRaw(Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]));
    expect(await err).toMatchObject({ type: "error", code: "bad_frame" });
    await expectStillServing(client);
  });

  it("text frame that is not JSON, and JSON of the wrong shape", async () => {
    const s = await start();
    const client = await connect(s.ws, { json: true });
    let err = nextConnectionError(client);
    client.sendRaw("{nope");
    expect(await err).toMatchObject({ code: "bad_frame" });
    err = nextConnectionError(client);
    client.sendRaw(JSON.stringify({ ops: [{ open: { stream: 5 } }] }));
    expect(await err).toMatchObject({ code: "bad_frame", message: expect.stringContaining("stream must be a string") });
    await expectStillServing(client);
  });

  it("unknown op", async () => {
    const s = await start();
    const client = await connect(s.ws);
    const err = nextConnectionError(client);
    client.sendRaw(Uint8Array.from([0x0a, 0x02, 0x2a, 0x00])); // an Op with only field 5, unknown to this server
    expect(await err).toMatchObject({ code: "unknown_op" });
    await expectStillServing(client);
  });

  it("unknown stream, duplicate stream, tokens after close, bad options", async () => {
    const s = await start();
    const client = await connect(s.grpc);
    client.send([{ tokens: { stream: "ghost", ids: [1] } }]);
    expect(await errorOf(client, "ghost")).toMatchObject({ code: "unknown_stream" });

    const d = client.open("dup");
    client.send([{ open: { stream: "dup" } }]);
    const dupErr = await (async () => {
      for await (const ev of d) if (ev.type === "error") return ev;
    })();
    expect(dupErr).toMatchObject({ code: "duplicate_stream" });
    d.close();

    const c = client.open("late");
    c.close();
    expect((await c.collect()).at(-1)).toMatchObject({ type: "done" });
    client.send([{ tokens: { stream: "late", ids: [1] } }]);
    expect(await errorOf(client, "late")).toMatchObject({ code: "stream_closed" });

    client.send([{ open: { stream: "m", mode: "fast" } }]);
    expect(await errorOf(client, "m")).toMatchObject({ code: "bad_option" });
    await expectStillServing(client);
  });

  it("ids out of range are repaired (resilient) or reported (strict), never fatal", async () => {
    const s = await start();
    const client = await connect(s.ws, { json: true });
    const r = client.open("r");
    r.write([...enc.encode("<|channel|>final<|message|>a"), 250000, ...enc.encodeOrdinary("b"), 200002]);
    r.close();
    const evs = await r.collect();
    expect(evs.find((e) => e.type === "recovery")).toMatchObject({ kind: "invalid_token" });
    expect(
      evs
        .filter((e) => e.type === "delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("a\uFFFDb");
    // wrong types in the JSON form are refused with a code, nothing of the op is used
    client.sendRaw(JSON.stringify({ ops: [{ tokens: { stream: "r", ids: [1.5] } }] }));
    expect(await errorOf(client, "r")).toMatchObject({ code: "bad_token_id" });
    client.sendRaw(JSON.stringify({ ops: [{ tokens: { stream: "r", ids: [-1] } }] }));
    expect(await errorOf(client, "r")).toMatchObject({ code: "bad_token_id" });
    await expectStillServing(client);
  });

  it("limits: streams per connection, ids per frame, frame size", async () => {
    const s = await start({ limits: { maxStreamsPerConnection: 2, maxIdsPerFrame: 10, maxFrameBytes: 4096 } });
    const client = await connect(s.ws);
    client.open("a");
    client.open("b");
    client.send([{ open: { stream: "c" } }]);
    expect(await errorOf(client, "c")).toMatchObject({ code: "too_many_streams" });
    const err = nextConnectionError(client);
    client.send([{ tokens: { stream: "a", ids: Array.from({ length: 11 }, () => 1) } }]);
    expect(await err).toMatchObject({ code: "too_many_ids" });
    client.handle("a").close();
    client.handle("b").close();
    await expectStillServing(client);
    // a frame over the size limit closes that connection (1009) and only that one
    const other = await connect(s.ws);
    const closed = new Promise<number>((resolve) => (other as WsClient).ws.once("close", (code) => resolve(code)));
    other.sendRaw(new Uint8Array(8192));
    expect(await closed).toBe(1009);
    await expectStillServing(client);
  });
});

/** A raw WebSocket that keeps every event it receives, decoded, for checks on the wire form itself. */
async function rawClient(url: string, json = false) {
  const ws = new WebSocket(url);
  await new Promise((r) => ws.once("open", r));
  const events: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  ws.on("message", (data: Buffer, isBinary) => {
    const got = isBinary
      ? ((
          schemaOf().ServerFrame.toObject(schemaOf().ServerFrame.decode(data), { defaults: false }) as {
            events?: Record<string, unknown>[];
          }
        ).events ?? [])
      : (JSON.parse(data.toString("utf8")) as { events: Record<string, unknown>[] }).events;
    events.push(...got);
    for (const w of waiters.splice(0)) w();
  });
  return {
    ws,
    events,
    send(ops: unknown[]) {
      ws.send(json ? JSON.stringify({ ops }) : schemaOf().ClientFrame.encode({ ops }).finish());
    },
    /** Wait until an event matches, and return it. */
    async until(pred: (e: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        await new Promise<void>((r) => waiters.push(r));
      }
    },
  };
}
const schemaOf = () => wireSchema;

describe("streams named by a numeric handle", () => {
  const text = "<|channel|>final<|message|>by number<|return|>";
  for (const json of [false, true]) {
    it(`events carry the handle instead of the name (${json ? "JSON" : "protobuf"} frames); tokens and close name the stream by handle`, async () => {
      const s = await start({ workers: 1 });
      const c = await rawClient(s.ws, json);
      const ids = enc.encode(text);
      c.send([{ open: { stream: "n", handle: 7 } }, { tokens: { handle: 7, ids: ids.slice(0, 4) } }]);
      c.send([{ tokens: { handle: 7, ids: ids.slice(4) } }, { close: { handle: 7 } }]);
      await c.until((e) => e.done !== undefined);
      for (const e of c.events) {
        expect(Number(e.handle)).toBe(7);
        expect(e.stream ?? "").toBe("");
      }
      const deltas = c.events.filter((e) => e.delta).map((e) => (e.delta as { text: string }).text);
      expect(deltas.join("")).toBe("by number");
      // a name may still be used for a stream that has a handle; its events still carry the handle
      c.send([{ open: { stream: "m", handle: 8 } }, { tokens: { stream: "m", ids } }, { close: { stream: "m" } }]);
      const done = await c.until((e) => e.done !== undefined && Number(e.handle) === 8);
      expect(done.stream ?? "").toBe("");
      c.ws.close();
    });
  }

  it("bad handles get a precise error, never on another stream's handle, and the connection carries on", async () => {
    const s = await start({ workers: 1 });
    const c = await rawClient(s.ws);
    const errorFor = (handle: number, code: string) =>
      c.until((e) => Number(e.handle) === handle && (e.error as { code?: string } | undefined)?.code === code);
    c.send([{ tokens: { handle: 3, ids: [1] } }]);
    expect((await errorFor(3, "unknown_stream")).error).toMatchObject({ message: "no open stream with handle 3" });
    c.send([{ open: { stream: "a", handle: 4 } }, { open: { stream: "b", handle: 4 } }]);
    // errors about an op name the stream by the op's name when it gave one: handle 4 is another stream's
    const byName = (stream: string, code: string) =>
      c.until((e) => e.stream === stream && (e.error as { code?: string } | undefined)?.code === code);
    const dup = await byName("b", "duplicate_stream");
    expect(dup.handle ?? 0).toBe(0);
    expect(dup.error).toMatchObject({ message: 'handle 4 is already in use by stream "a"' });
    c.send([{ tokens: { stream: "zzz", handle: 4, ids: [1] } }]);
    const mismatch = await byName("zzz", "unknown_stream");
    expect(mismatch.handle ?? 0).toBe(0);
    expect(mismatch.error).toMatchObject({ message: 'handle 4 is stream "a", not "zzz"' });
    c.send([{ close: { handle: 4, reason: "later" } }]);
    expect((await errorFor(4, "bad_option")).stream ?? "").toBe("");
    // of these, stream a (handle 4) gets only the error about its own close
    expect(c.events.filter((e) => Number(e.handle) === 4 && e.error !== undefined).map((e) => (e.error as { code: string }).code)).toEqual([
      "bad_option",
    ]);
    c.send([{ close: { handle: 4 } }]);
    await c.until((e) => e.done !== undefined && Number(e.handle) === 4);
    c.send([{ tokens: { handle: 4, ids: [1] } }]);
    expect((await errorFor(4, "stream_closed")).error).toMatchObject({ message: "the stream with handle 4 is closed" });
    c.send([{ open: { handle: 9 } }]);
    const noName = await c.until((e) => (e.error as { message?: string } | undefined)?.message === "an open without a stream name");
    expect([noName.stream ?? "", Number(noName.handle ?? 0)]).toEqual(["", 0]); // a connection-level error
    // a closed handle may be given to a new stream
    c.send([{ open: { stream: "again", handle: 4 } }, { tokens: { handle: 4, ids: enc.encode(text) } }, { close: { handle: 4 } }]);
    const done = await c.until(
      (e) =>
        e.done !== undefined &&
        Number(e.handle) === 4 &&
        c.events.indexOf(e) > c.events.findIndex((x) => (x.error as { code?: string } | undefined)?.code === "bad_frame"),
    );
    expect(done.done).toMatchObject({ finish_reason: "stop" });
    // handles past the small ones kept in an array, up to the largest uint32
    for (const big of [8191, 8192, 0xffffffff]) {
      c.send([
        { open: { stream: `big${big}`, handle: big } },
        { tokens: { handle: big, ids: enc.encode(text) } },
        { close: { handle: big } },
      ]);
      expect((await c.until((e) => e.done !== undefined && Number(e.handle) === big)).done).toMatchObject({ finish_reason: "stop" });
      c.send([{ tokens: { handle: big, ids: [1] } }]);
      await errorFor(big, "stream_closed");
    }
    // a handle that does not fit uint32 (binary) and one of the wrong type (JSON) are bad frames
    c.ws.send(Uint8Array.from([0x0a, 0x08, 0x12, 0x06, 0x18, 0x80, 0x80, 0x80, 0x80, 0x10]));
    await c.until((e) => (e.error as { message?: string } | undefined)?.message === "a handle does not fit uint32");
    // the same for Open (field 9) and Close (field 3), which protobufjs alone would cut to their low bits
    const tooBig = (e: Record<string, unknown>) =>
      (e.error as { message?: string } | undefined)?.message === "a handle does not fit uint32";
    c.ws.send(Uint8Array.from([0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x01, 0x6f, 0x48, 0x85, 0x80, 0x80, 0x80, 0x10]));
    c.ws.send(Uint8Array.from([0x0a, 0x0b, 0x1a, 0x09, 0x0a, 0x01, 0x6f, 0x18, 0x85, 0x80, 0x80, 0x80, 0x10]));
    await c.until(() => c.events.filter(tooBig).length === 3);
    expect(c.events.some((e) => e.stream === "o" || Number(e.handle) === 5)).toBe(false);
    const j = await rawClient(s.ws, true);
    j.send([{ tokens: { handle: "seven", ids: [1] } }]);
    const bad = await j.until((e) => e.error !== undefined);
    expect(bad.error).toMatchObject({ code: "bad_frame", message: "ops[0].tokens: handle must be an integer in 0..2^32-1" });
    j.send([{ open: { stream: "s", handle: "12" } }, { tokens: { handle: 12, ids: enc.encode(text) } }, { close: { handle: 12 } }]);
    expect((await j.until((e) => e.done !== undefined)).handle).toBe(12);
    c.ws.close();
    j.ws.close();
  });

  it("the client gives a stream reopened under a name still finishing its own handle: each gets its own events", async () => {
    const s = await start({ workers: 0 });
    const client = await connect(s.ws, { handles: true });
    const ids = enc.encode(text);
    const first = client.open("same");
    first.write(ids);
    first.close();
    const second = client.open("same"); // before the first one's done has arrived
    second.write(ids);
    second.close();
    const [a, b] = await Promise.all([first.collect(), second.collect()]);
    expect(normalize(a)).toEqual(inProcess(ids, "assistant"));
    expect(normalize(b)).toEqual(inProcess(ids, "assistant"));
    expect(client.connectionErrors).toEqual([]);
  });

  it("a name or handle closed and reopened in one frame: the old stream's events come first, wherever it lived", async () => {
    // the main thread holds one stream; the rest go to the worker
    const s = await start({ workers: 1, inline: 1 });
    const c = await rawClient(s.ws);
    const ids = enc.encode(text);
    c.send([{ open: { stream: "a", handle: 1 } }, { open: { stream: "b", handle: 2 } }, { open: { stream: "x" } }]);
    c.send([{ tokens: { handle: 2, ids: ids.slice(0, 4) } }, { tokens: { stream: "x", ids: ids.slice(0, 4) } }]);
    await c.until((e) => e.message_start !== undefined && e.stream === "x");
    // a is closed, so the main thread has room: without care, c and y would be parsed there, ahead of b's and x's last events
    c.send([
      { close: { handle: 1 } },
      { tokens: { handle: 2, ids: ids.slice(4, 6) } },
      { close: { handle: 2 } },
      { open: { stream: "c", handle: 2 } },
      { tokens: { handle: 2, ids } },
      { close: { stream: "x" } },
      { open: { stream: "x" } },
      { tokens: { stream: "x", ids } },
    ]);
    await c.until(
      (e) =>
        e.message_start !== undefined && e.stream === "x" && c.events.filter((f) => f.stream === "x" && f.done !== undefined).length === 1,
    );
    await c.until(
      (e) =>
        Number(e.handle) === 2 &&
        e.message_start !== undefined &&
        c.events.filter((f) => Number(f.handle) === 2 && f.done !== undefined).length === 1,
    );
    for (const [key, val] of [
      ["handle", 2],
      ["stream", "x"],
    ] as const) {
      const mine = c.events.filter((e) => (key === "handle" ? Number(e.handle) === val : e.stream === val));
      const firstDone = mine.findIndex((e) => e.done !== undefined);
      const starts = mine.map((e, i) => (e.message_start !== undefined ? i : -1)).filter((i) => i >= 0);
      expect(starts.length, `${key} ${val}`).toBe(2);
      expect(firstDone, `${key} ${val}: the old stream's done before the new stream's start`).toBeLessThan(starts[1]!);
    }
    c.ws.close();
  });

  it("a worker crash and a graceful stop name handle streams by their handle", async () => {
    const s = await start({ workers: 1, inline: 0 });
    const c = await rawClient(s.ws);
    const ids = enc.encode(text);
    c.send([{ open: { stream: "w", handle: 21 } }, { tokens: { handle: 21, ids: ids.slice(0, 3) } }]);
    await c.until((e) => e.message_start !== undefined);
    await s.svc.service.pool.crash(0);
    const lost = await c.until((e) => (e.error as { code?: string } | undefined)?.code === "worker_crashed");
    expect(lost).toMatchObject({ handle: 21 });
    expect(lost.stream ?? "").toBe("");
    c.send([{ open: { stream: "x", handle: 22 } }, { tokens: { handle: 22, ids: ids.slice(0, 3) } }]);
    await c.until((e) => e.message_start !== undefined && Number(e.handle) === 22);
    const stopping = s.svc.stop();
    const notice = await c.until((e) => (e.error as { code?: string } | undefined)?.code === "shutting_down");
    expect(notice).toMatchObject({ handle: 22 });
    expect(await c.until((e) => e.done !== undefined && Number(e.handle) === 22)).toMatchObject({ done: { finish_reason: "abort" } });
    await stopping;
  });
});

describe("faults", () => {
  it("a worker killed mid-stream fails only its streams; the rest carry on and new streams work", async () => {
    const s = await start({ workers: 2 });
    const client = await connect(s.ws);
    const ids = enc.encode(
      "<|channel|>analysis<|message|>thinking about it<|end|><|start|>assistant<|channel|>final<|message|>done<|return|>",
    );
    const { crashed, fine } = await crashMidStream(s.svc, client, ids);
    expect(crashed.length).toBe(2); // streams are spread over both workers
    expect(fine.length).toBe(2);
    for (const evs of crashed) expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "error" });
    for (const evs of fine) expect(normalize(evs)).toEqual(inProcess(ids, "assistant"));
    const again = client.open("after");
    again.write(ids);
    again.close();
    expect(normalize(await again.collect())).toEqual(inProcess(ids, "assistant"));
    const metrics = await (await fetch(`${s.http}/metrics`)).text();
    expect(metrics).toMatch(/harmony_worker_restarts_total 1/);
  });

  it("a task that makes a worker's code throw ends that worker: its streams get worker_crashed, not silence", async () => {
    const s = await start({ workers: 1 });
    const crashes: number[] = [];
    s.svc.service.pool.on("crash", (slot) => crashes.push(slot));
    await faultMidStream(s, async () => {
      // stand in for a bug: the handler throws (the `throw` drill)
      await expect(s.svc.service.pool.throwIn(0)).rejects.toBeTruthy();
    });
    expect(crashes).toEqual([0]);
  });

  it("a client that never reads stops being read; memory stays bounded", async () => {
    const s = await start({ limits: { maxBufferedBytes: 64 * 1024, maxInflightFrames: 8 } });
    const raw = new WebSocket(s.ws);
    await new Promise((r) => raw.once("open", r));
    // never read: stop consuming the socket
    (raw as unknown as { _socket: { pause(): void } })._socket.pause();
    const frameOf = (ops: unknown[]) => s.svc.service.schema.ClientFrame.encode({ ops }).finish();
    raw.send(frameOf([{ open: { stream: "big", whole_messages: true } }]));
    const content = enc.encode("<|channel|>final<|message|>" + "lorem ipsum dolor sit amet ".repeat(400));
    const frame = frameOf([{ tokens: { stream: "big", ids: content } }]);
    for (let i = 0; i < 400; i++) raw.send(frame);
    // reading stops: the count settles, well short of what was sent
    const framesRead = await settled(() => wsFramesRead(s.http));
    expect(framesRead).toBeLessThan(400); // the server stopped reading this client
    raw.terminate();
  });

  it("a client disconnect frees its streams", async () => {
    const s = await start();
    const client = await connect(s.ws);
    for (let i = 0; i < 10; i++) client.open(`d${i}`).write([200005]);
    await eventually(async () => (await gauge(s.http, "harmony_open_streams")) === 10);
    await client.close();
    await eventually(async () => (await gauge(s.http, "harmony_open_streams")) === 0);
    expect(s.svc.service.pool.sessions()).toBe(0);
  });

  it("idle connections are closed (4408)", async () => {
    const s = await start({ limits: { idleTimeoutMs: 1000 } });
    const client = (await connect(s.ws)) as WsClient;
    const code = await new Promise<number>((resolve) => client.ws.once("close", (c) => resolve(c)));
    expect(code).toBe(4408);
  });

  it("graceful stop: streams in flight get shutting_down and done, then the connection closes", async () => {
    const s = await start();
    const client = (await connect(s.ws)) as WsClient;
    const st = client.open("open-at-stop");
    st.write(enc.encode("<|channel|>final<|message|>half an ans"));
    expect(await firstEvent(st)).toMatchObject({ type: "message_start" });
    const closed = new Promise<number>((resolve) => client.ws.once("close", (c) => resolve(c)));
    const stopping = s.svc.stop();
    const evs = await st.collect();
    expect(evs.find((e) => e.type === "error")).toMatchObject({ code: "shutting_down" });
    expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "abort" });
    expect(
      evs
        .filter((e) => e.type === "delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("half an ans");
    expect(await closed).toBe(1001);
    await stopping;
  });

  it("--max-ops-per-frame refuses a longer frame whole, and a graceful stop still closes more streams than that", async () => {
    const s = await start({ limits: { maxOpsPerFrame: 2 } });
    const c = await rawClient(s.ws);
    c.send([{ open: { stream: "a" } }, { open: { stream: "b" } }, { open: { stream: "c" } }]);
    const refused = await c.until((e) => (e.error as { code?: string } | undefined)?.code !== undefined);
    expect((refused.error as { code: string }).code).toBe("too_many_ops");
    expect(await gauge(s.http, "harmony_open_streams")).toBe(0); // nothing in that frame was used
    const ids = enc.encode("<|channel|>final<|message|>half");
    for (const name of ["a", "b", "c"]) c.send([{ open: { stream: name } }, { tokens: { stream: name, ids } }]);
    await c.until(() => c.events.filter((e) => e.message_start !== undefined).length === 3);
    const stopping = s.svc.stop();
    await c.until(() => c.events.filter((e) => e.done !== undefined).length === 3);
    const codes = c.events.map((e) => (e.error as { code?: string } | undefined)?.code).filter((x) => x !== undefined);
    expect(codes).toEqual(["too_many_ops", "shutting_down", "shutting_down", "shutting_down"]);
    await stopping;
  });
});

/**
 * A stream gets three tokens, then `inject` breaks the code holding it, then
 * the rest of its tokens and a close: it must end with worker_crashed and an
 * error done, and a new stream on the same connection must work.
 */
async function faultMidStream(s: Awaited<ReturnType<typeof start>>, inject: () => void | Promise<void>) {
  const client = await connect(s.ws);
  const ids = enc.encode("<|channel|>final<|message|>still here<|return|>");
  const victim = client.open("victim");
  victim.write(ids.slice(0, 3));
  expect(await firstEvent(victim)).toMatchObject({ type: "message_start" });
  await inject();
  victim.write(ids.slice(3));
  victim.close();
  const evs = await victim.collect();
  expect(evs.find((e) => e.type === "error")).toMatchObject({ code: "worker_crashed" });
  expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "error" });
  const after = client.open("after");
  after.write(ids);
  after.close();
  expect(normalize(await after.collect())).toEqual(inProcess(ids, "assistant"));
}

/** Four streams, five tokens each, then worker slot 0 dies, then the rest and a close: who failed, who did not. */
async function crashMidStream(svc: Server, client: HarmonyClient, ids: number[]) {
  const handles = ["s0", "s1", "s2", "s3"].map((n) => client.open(n));
  for (const h of handles) h.write(ids.slice(0, 5));
  // each stream's first event: its first tokens have been parsed where it is pinned
  const firsts: HarmonyEvent[] = [];
  for (const h of handles) firsts.push(await firstEvent(h));
  await svc.service.pool.crash(0);
  for (const h of handles) {
    h.write(ids.slice(5));
    h.close();
  }
  const results = await Promise.all(handles.map(async (h, i) => [firsts[i]!, ...(await h.collect())]));
  return {
    crashed: results.filter((evs) => evs.some((e) => e.type === "error" && e.code === "worker_crashed")),
    fine: results.filter((evs) => !evs.some((e) => e.type === "error")),
  };
}

async function gauge(http: string, name: string): Promise<number> {
  const text = await (await fetch(`${http}/metrics`)).text();
  return Number(text.match(new RegExp(`^${name} (\\d+)`, "m"))?.[1]);
}

/** Frames the service has read from WebSocket clients. */
async function wsFramesRead(http: string): Promise<number> {
  const text = await (await fetch(`${http}/metrics`)).text();
  return Number(text.match(/harmony_frames_total\{transport="ws"\} (\d+)/)?.[1] ?? 0);
}

/** Wait (polling, no deadline of its own: the test's timeout bounds it) until `f` holds. */
async function eventually(f: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await f())) await new Promise((r) => setTimeout(r, 25));
}

/** A count once it has stopped moving: the same over five readings 200 ms apart, and above zero. */
async function settled(read: () => Promise<number>): Promise<number> {
  let last = await read();
  for (let same = 0; same < 5 || last === 0;) {
    await new Promise((r) => setTimeout(r, 200));
    const now = await read();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

/** The stream's first event: the service has its tokens so far (no sleep standing in for that). */
async function firstEvent(st: { [Symbol.asyncIterator](): AsyncIterator<HarmonyEvent> }): Promise<HarmonyEvent> {
  const r = await st[Symbol.asyncIterator]().next();
  if (r.done) throw new Error("the stream ended before its first event");
  return r.value;
}

describe("security and operations", () => {
  it("with a token, connections without it are refused on both transports", async () => {
    const s = await start({ token: "s3cret" });
    await expect(HarmonyClient.connect(s.ws)).rejects.toThrow(/401/);
    await expect(HarmonyClient.connect(s.ws, { token: "wrong" })).rejects.toThrow(/401/);
    const ok = await connect(s.ws, { token: "s3cret" });
    const st = ok.open("t");
    st.close();
    expect((await st.collect()).at(-1)).toMatchObject({ type: "done" });

    const bad = (await HarmonyClient.connect(s.grpc)) as GrpcClient;
    clients.push(bad);
    bad.send([{ open: { stream: "x" } }]);
    const code = await new Promise<number>((resolve) => bad.call.once("error", (e: grpc.ServiceError) => resolve(e.code)));
    expect(code).toBe(grpc.status.UNAUTHENTICATED);
    const good = await connect(s.grpc, { token: "s3cret" });
    const g = good.open("t");
    g.close();
    expect((await g.collect()).at(-1)).toMatchObject({ type: "done" });
  });

  it("serves healthz, readyz, metrics and the gRPC health service", async () => {
    const s = await start();
    expect(await (await fetch(`${s.http}/healthz`)).json()).toEqual({ status: "ok" });
    expect((await fetch(`${s.http}/readyz`)).status).toBe(200);
    const client = await connect(s.ws);
    const st = client.open("m");
    st.write(enc.encode("<|channel|>final<|message|>hi<|end|><|return|>"));
    st.close();
    await st.collect();
    const text = await (await fetch(`${s.http}/metrics`)).text();
    expect(text).toMatch(/harmony_tokens_total \d+/);
    expect(text).toMatch(/harmony_events_total\{type="delta"\} \d+/);
    expect(text).toMatch(/harmony_recoveries_total\{kind="stray_stop"\} 1/);
    expect(text).toMatch(/harmony_frame_latency_seconds_bucket\{le="0.0001"\}/);
    expect((await fetch(`${s.http}/nope`)).status).toBe(404);

    const Health = grpc.makeGenericClientConstructor(HEALTH_SERVICE, "Health");
    const h = new Health(s.grpc.replace("grpc://", ""), grpc.credentials.createInsecure()) as unknown as {
      Check(req: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
      close(): void;
    };
    const reply = await new Promise<Buffer>((resolve, reject) =>
      h.Check(Buffer.from(s.svc.service.schema.HealthCheckRequest.encode({ service: "" }).finish()), (e, r) =>
        e ? reject(e) : resolve(r!),
      ),
    );
    expect(s.svc.service.schema.HealthCheckResponse.toObject(s.svc.service.schema.HealthCheckResponse.decode(reply))).toEqual({
      status: 1,
    });
    h.close();
  });
});

describe("OpenAI output formats on a stream", () => {
  const text =
    "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" +
    '{"city":"Oslo"}<|call|>';

  for (const json of [false, true]) {
    it(`openai.chat chunks (${json ? "JSON" : "protobuf"} frames) equal the in-process adapter's`, async () => {
      const { ChatCompletionChunkAdapter } = await import("../../src/openai/chat.js");
      const s = await start();
      const client = await connect(s.ws, { json });
      const st = client.open("c", { format: "openai.chat", reasoningField: "reasoning_content", model: "gpt-oss-20b" });
      const ids = enc.encode(text);
      for (const t of ids) st.write([t]);
      st.close();
      const got = (await st.collect()).map((e) => (e as unknown as { payload: Record<string, unknown> }).payload);
      const first = got[0]!;
      expect(first).toMatchObject({ object: "chat.completion.chunk", model: "gpt-oss-20b" });
      const adapter = new ChatCompletionChunkAdapter({
        id: first.id as string,
        model: "gpt-oss-20b",
        created: first.created as number,
        reasoningField: "reasoning_content",
      });
      const p = new HarmonyParser(vocab);
      const want: object[] = [];
      for (const ev of [...p.write(ids), ...p.end()]) want.push(...adapter.push(ev));
      const merged = (chunks: Record<string, unknown>[]) => {
        const out = { reasoning: "", args: "", finish: null as unknown, callId: "" };
        for (const c of chunks) {
          const ch = (c.choices as { delta: Record<string, unknown>; finish_reason: unknown }[])[0];
          if (!ch) continue;
          out.reasoning += (ch.delta.reasoning_content as string) ?? "";
          for (const tc of (ch.delta.tool_calls as { id?: string; function: { arguments?: string } }[]) ?? []) {
            out.args += tc.function.arguments ?? "";
            if (tc.id) out.callId = tc.id.replace(/^call_[0-9a-f]+_/, "call_");
          }
          if (ch.finish_reason) out.finish = ch.finish_reason;
        }
        return out;
      };
      expect(merged(got)).toEqual(merged(want as Record<string, unknown>[]));
      expect(merged(got)).toMatchObject({ reasoning: "Need the weather.", args: '{"city":"Oslo"}', finish: "tool_calls" });
    });
  }

  it("openai.responses events arrive in order with sequence numbers, ending in response.completed", async () => {
    const s = await start();
    const client = await connect(s.grpc);
    const st = client.open("r", { format: "openai.responses" });
    st.write(enc.encode(text));
    st.close();
    const got = (await st.collect()).map((e) => (e as unknown as { payload: Record<string, unknown> }).payload);
    expect(got.map((e) => e.sequence_number)).toEqual(got.map((_, i) => i));
    expect(got[0]).toMatchObject({ type: "response.created" });
    const done = got.at(-1)!;
    expect(done).toMatchObject({ type: "response.completed" });
    const output = (done.response as { output: Record<string, unknown>[] }).output;
    expect(output.map((o) => o.type)).toEqual(["reasoning", "function_call"]);
    expect(output[1]).toMatchObject({ name: "get_weather", arguments: '{"city":"Oslo"}' });
  });

  it("refuses an unknown format", async () => {
    const s = await start();
    const client = await connect(s.ws);
    client.send([{ open: { stream: "x", format: "xml" } } as never]);
    for await (const ev of client.handle("x")) {
      expect(ev).toMatchObject({ type: "error", code: "bad_option" });
      break;
    }
  });
});

describe("sessions on the main thread (the inline slot)", () => {
  for (const [name, opts] of [
    ["--workers 0 (everything inline)", { workers: 0 }],
    ["--workers 1 --inline 300 (streams split between the main thread and a worker)", { workers: 1, inline: 300 }],
  ] as const) {
    it(`${name}: the corpus multiplexed on one connection (WebSocket protobuf and JSON, gRPC; by name and by handle) gives the in-process events`, async () => {
      const s = await start(opts);
      for (const [url, json, handles] of [
        [s.ws, false, false],
        [s.ws, true, false],
        [s.grpc, false, false],
        [s.ws, false, true],
        [s.grpc, false, true],
      ] as const) {
        const client = await connect(url, { json, handles });
        const got = await runStepFrames(client, cases, 3);
        for (const [i, c] of cases.entries()) expect(normalize(got[i]!), c.id).toEqual(inProcess(c.tokens, c.role));
      }
      const split = s.svc.service.pool.inlineSlot >= 0 && s.svc.service.pool.workers > 0;
      expect(split || opts.workers === 0).toBe(true);
    });
  }

  it("answers stay in frame order when frames mix inline and worker streams", async () => {
    const s = await start({ workers: 1, inline: 2 });
    const client = await connect(s.ws);
    const ids = enc.encode("<|channel|>final<|message|>one two three four five six seven<|return|>");
    const handles = ["a", "b", "c", "d"].map((n) => client.open(n));
    for (const t of ids) for (const h of handles) h.write([t]);
    for (const h of handles) h.close();
    for (const evs of await Promise.all(handles.map((h) => h.collect()))) expect(normalize(evs)).toEqual(inProcess(ids, "assistant"));
  });

  it("a crashed worker fails only its streams; the inline ones carry on", async () => {
    const s = await start({ workers: 1, inline: 2 });
    const client = await connect(s.ws);
    const ids = enc.encode("<|channel|>final<|message|>the answer is forty-two<|return|>");
    const { crashed, fine } = await crashMidStream(s.svc, client, ids);
    expect(crashed.length).toBe(2);
    expect(fine.length).toBe(2);
    for (const evs of fine) expect(normalize(evs)).toEqual(inProcess(ids, "assistant"));
    await expect(s.svc.service.pool.crash(s.svc.service.pool.inlineSlot)).rejects.toThrow(/no thread/);
  });

  it("a fault inside the inline host fails its streams as a crash would, and the service carries on", async () => {
    const s = await start({ workers: 0 });
    await faultMidStream(s, () => {
      // stand in for a bug: the host throws (on either way in for tokens)
      const host = s.svc.service.pool.inlineHost!;
      host.tokens = host.tokensOf = () => {
        throw new Error("injected fault");
      };
    });
    expect(await gauge(s.http, "harmony_worker_restarts_total")).toBe(1);
  });

  it("backpressure, disconnect and graceful stop hold with no worker threads", async () => {
    const s = await start({ workers: 0, limits: { maxBufferedBytes: 64 * 1024 } });
    // a client that never reads stops being read
    const raw = new WebSocket(s.ws);
    await new Promise((r) => raw.once("open", r));
    (raw as unknown as { _socket: { pause(): void } })._socket.pause();
    const frameOf = (ops: unknown[]) => s.svc.service.schema.ClientFrame.encode({ ops }).finish();
    raw.send(frameOf([{ open: { stream: "big" } }]));
    const frame = frameOf([
      { tokens: { stream: "big", ids: enc.encode("<|channel|>final<|message|>" + "lorem ipsum dolor sit amet ".repeat(400)) } },
    ]);
    for (let i = 0; i < 400; i++) raw.send(frame);
    expect(await settled(() => wsFramesRead(s.http))).toBeLessThan(400);
    raw.terminate();
    await eventually(() => s.svc.service.pool.sessions() === 0);
    // graceful stop: shutting_down, then done, in that order
    const client = (await connect(s.ws)) as WsClient;
    const st = client.open("open-at-stop");
    st.write(enc.encode("<|channel|>final<|message|>half"));
    await firstEvent(st);
    const stopping = s.svc.stop();
    const evs = await st.collect();
    const err = evs.findIndex((e) => e.type === "error" && e.code === "shutting_down");
    expect(err).toBeGreaterThanOrEqual(0);
    expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "abort" });
    expect(evs.findIndex((e) => e.type === "done")).toBeGreaterThan(err);
    await stopping;
  });
});
