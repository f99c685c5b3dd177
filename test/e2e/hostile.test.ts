/**
 * Every attack of issue #16, as an attacker on the same machine sends it, against a real
 * server (smaller sizes where the full ones would make the test slow; the same shapes;
 * bench/hostile/main.ts runs the full sizes and measures /healthz meanwhile). Each must
 * leave the process up and answering /healthz, and get a coded answer.
 */
import http from "node:http";
import { readFileSync } from "node:fs";
import net from "node:net";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import OpenAI from "openai";
import WebSocket from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import { HARMONY_SERVICE } from "../../src/protocol/grpc-methods.js";
import { schema } from "../../src/protocol/schema.js";
import type { Server, ServerOptions } from "../../src/server.js";
import { MAX_ARGUMENT_BYTES } from "../../src/core/parser.js";
import { DEFAULT_COT_STORE, DEFAULT_LIMITS } from "../../src/service/service.js";
import { startRespPeer } from "../store/resp-peer.js";
import { harmony } from "../helpers.js";
import { startStandIn, type Script, type StandIn } from "./stand-in-vllm.js";
import { startTestServer } from "./test-server.js";

const JSON_BODY = { "content-type": "application/json" };
const wire = schema();
const { enc } = harmony();

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function start(opts: Partial<ServerOptions> = {}) {
  const s = await startTestServer(opts);
  servers.push(s.server);
  return s;
}

/** JSON text nested `depth` arrays deep around `inner`. */
const nested = (depth: number, inner = "1") => "[".repeat(depth) + inner + "]".repeat(depth);

async function healthy(base: string): Promise<void> {
  expect((await fetch(`${base}/healthz`)).status).toBe(200);
}

/** One WebSocket exchange: send `frames`, gather answers until `until` holds (or the socket closes). */
function exchange(
  url: string,
  frames: (string | Uint8Array)[],
  until: (answers: unknown[]) => boolean,
  headers: Record<string, string> = {},
) {
  return new Promise<{ answers: unknown[]; bytes: number; closed: number | null }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const answers: unknown[] = [];
    let bytes = 0;
    ws.on("open", () => frames.forEach((f) => ws.send(f)));
    ws.on("message", (data: Buffer, isBinary) => {
      bytes += data.length;
      answers.push(isBinary ? wire.ServerFrame.toObject(wire.ServerFrame.decode(data)) : JSON.parse(data.toString("utf8")));
      if (until(answers)) {
        ws.close();
        resolve({ answers, bytes, closed: null });
      }
    });
    ws.on("close", (code) => resolve({ answers, bytes, closed: code }));
    ws.on("error", reject);
  });
}

const eventsOf = (answers: unknown[]) => answers.flatMap((a) => (a as { events: Record<string, unknown>[] }).events ?? []);
const errorCodes = (answers: unknown[]) => eventsOf(answers).flatMap((e) => (e.error ? [(e.error as { code: string }).code] : []));

describe("hostile input: nothing recurses, spreads or runs unbounded", () => {
  it("a JSON frame whose ids hold 10,000 nested arrays: too_deep, and the server goes on", async () => {
    const s = await start();
    const frame = `{"ops":[{"open":{"stream":"a"}},{"tokens":{"stream":"a","ids":${nested(10_000)}}}]}`;
    const r = await exchange(s.ws, [frame], (a) => errorCodes(a).length > 0);
    expect(errorCodes(r.answers)).toEqual(["too_deep"]);
    await healthy(s.http);
  });

  it("a render nested 10,000 deep, anywhere (HTTP, the render op, gRPC): a coded refusal", async () => {
    const s = await start();
    const bodies = [
      `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":${nested(10_000, '"high"')}}`,
      `{"messages":[{"role":${nested(10_000, '"user"')},"content":"hi"}]}`,
      `{"messages":[{"role":"user","content":[{"type":${nested(10_000, '"text"')},"text":"hi"}]}]}`,
      `{"messages":[{"role":"tool","tool_call_id":${nested(10_000, '"x"')},"content":"hi"}]}`,
    ];
    for (const body of bodies) {
      const res = await fetch(`${s.http}/v1/render`, { method: "POST", headers: JSON_BODY, body });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("too_deep");
    }
    // the render op on a stream
    const op = JSON.stringify({ ops: [{ render: { request_id: "r", request_json: bodies[0] } }] });
    const r = await exchange(s.ws, [op], (a) => errorCodes(a).length > 0);
    const ev = eventsOf(r.answers).find((e) => e.error) as { error: { code: string; message: string } };
    expect(ev.error.code).toBe("bad_request");
    expect(ev.error.message).toMatch(/^too_deep/);
    // the Render RPC
    const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
    const client = new Stub(s.grpc, grpc.credentials.createInsecure()) as unknown as {
      Render(b: Uint8Array, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
      close(): void;
    };
    const bytes = wire.Render.encode({ request_id: "r", request_json: bodies[1] }).finish();
    const err = await new Promise<grpc.ServiceError | null>((resolve) => client.Render(bytes, (e) => resolve(e)));
    client.close();
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toMatch(/^too_deep/);
    await healthy(s.http);
  });

  it("one JSON frame of 130,000 <|end|> ids on a stream: answered, and the server goes on", async () => {
    const s = await start();
    const ids = new Array<number>(130_000).fill(200007);
    const frame = JSON.stringify({ ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids } }, { close: { stream: "a" } }] });
    const r = await exchange(s.ws, [frame], (a) => eventsOf(a).some((e) => e.done));
    expect(eventsOf(r.answers).some((e) => e.done)).toBe(true);
    await healthy(s.http);
  });

  it("a tool call's arguments nested 300,000 deep and past 1 MiB (multi-byte at the cut): cut, checked without recursion, the server goes on", async () => {
    // rule 12 keeps a call's arguments as UTF-8 up to MAX_ARGUMENT_BYTES and checks them by an
    // iterative scan; ids repeated by hand (a 300,000-bracket word would take BPE a while)
    const s = await start();
    const only = (text: string) => {
      const ids = enc.encodeOrdinary(text);
      expect(ids, text).toHaveLength(1);
      return ids[0]!;
    };
    const head = enc.encode("<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
    const open = only("[");
    const wide = only("日本");
    const call = enc.encode("<|call|>")[0]!;
    const body = [...new Array<number>(300_000).fill(open), ...new Array<number>(200_000).fill(wide)];
    const frames = [JSON.stringify({ ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids: head } }] })];
    for (let i = 0; i < body.length; i += 200_000)
      frames.push(JSON.stringify({ ops: [{ tokens: { stream: "a", ids: body.slice(i, i + 200_000) } }] }));
    frames.push(JSON.stringify({ ops: [{ tokens: { stream: "a", ids: [call] } }, { close: { stream: "a" } }] }));
    const r = await exchange(s.ws, frames, (a) => eventsOf(a).some((e) => e.done));
    const ends = eventsOf(r.answers).flatMap((e) =>
      e.tool_call_end ? [e.tool_call_end as { arguments: string; valid_json?: boolean }] : [],
    );
    expect(ends).toHaveLength(1);
    const args = ends[0]!.arguments;
    expect(ends[0]!.valid_json ?? false).toBe(false);
    expect(args.startsWith("[".repeat(300_000) + "日本")).toBe(true);
    expect(Buffer.byteLength(args)).toBeLessThanOrEqual(MAX_ARGUMENT_BYTES);
    expect(Buffer.byteLength(args)).toBeGreaterThan(MAX_ARGUMENT_BYTES - 6);
    expect(args).not.toContain("\uFFFD");
    expect(errorCodes(r.answers)).toEqual([]);
    await healthy(s.http);
  });

  it("broken arguments in a repairable shape around 200,000 open brackets: tried and left as they are, the server goes on", async () => {
    // the repairs (over-escaped body, code fence) scan and re-check the whole text: iteratively
    const s = await start();
    const head = enc.encode("<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
    const open = enc.encodeOrdinary("[");
    expect(open).toHaveLength(1);
    const call = enc.encode("<|call|>")[0]!;
    for (const [prefix, suffix] of [
      ['{\\"a\\":', ""],
      ["```json\n", "\n```"],
    ] as const) {
      const ids = [
        ...head,
        ...enc.encodeOrdinary(prefix),
        ...new Array<number>(200_000).fill(open[0]!),
        ...enc.encodeOrdinary(suffix),
        call,
      ];
      const frame = JSON.stringify({ ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids } }, { close: { stream: "a" } }] });
      const r = await exchange(s.ws, [frame], (a) => eventsOf(a).some((e) => e.done));
      const ends = eventsOf(r.answers).flatMap((e) =>
        e.tool_call_end ? [e.tool_call_end as { arguments: string; valid_json?: boolean }] : [],
      );
      expect(ends).toHaveLength(1);
      expect(ends[0]!.arguments === prefix + "[".repeat(200_000) + suffix, prefix).toBe(true);
      expect(ends[0]!.valid_json ?? false).toBe(false);
      expect(eventsOf(r.answers).filter((e) => (e.recovery as { kind?: string } | undefined)?.kind === "arguments_repaired")).toEqual([]);
    }
    await healthy(s.http);
  });

  it("a binary frame of 200,000 empty ops: refused whole (too_many_ops) with a small answer", async () => {
    const s = await start();
    const frame = new Uint8Array(2 * 200_000);
    for (let i = 0; i < frame.length; i += 2) frame[i] = 0x0a; // ops = 1, length 0
    const r = await exchange(s.ws, [frame], (a) => errorCodes(a).length > 0);
    expect(errorCodes(r.answers)).toEqual(["too_many_ops"]);
    expect(r.bytes).toBeLessThan(1024);
    await healthy(s.http);
  });

  it("repeated bad ops: the first 16 of a code are answered, the rest counted in one", async () => {
    const s = await start();
    const ops = Array.from({ length: 5000 }, () => ({ tokens: { stream: "nope", ids: [1] } }));
    const r = await exchange(s.ws, [JSON.stringify({ ops })], (a) => errorCodes(a).length > 0);
    const errors = eventsOf(r.answers).filter((e) => e.error) as { error: { code: string; message: string } }[];
    expect(errors).toHaveLength(17);
    expect(errors.at(-1)!.error.message).toMatch(/4984 more/);
  });

  it("opens with huge stream names are refused; the connection's streams stay within their budget", async () => {
    const s = await start({ limits: { ...DEFAULT_LIMITS, maxConnectionBytes: 1024 * 1024 } });
    const long = "x".repeat(100_000);
    const ops = Array.from({ length: 20 }, (_, i) => ({ open: { stream: `${long}${i}` } }));
    const r = await exchange(s.ws, [JSON.stringify({ ops })], (a) => errorCodes(a).length >= 17);
    expect(new Set(errorCodes(r.answers))).toEqual(new Set(["bad_option"]));
    expect(r.bytes).toBeLessThan(20_000); // the answer names each refused stream by its first 64 characters, not 100 KB
    // names within the limit: the budget (1 MiB, 16 KiB a stream) refuses the 64th
    const many = Array.from({ length: 70 }, (_, i) => ({ open: { stream: `s${i}` } }));
    const b = await exchange(s.ws, [JSON.stringify({ ops: many })], (a) => errorCodes(a).length > 0);
    expect(errorCodes(b.answers)[0]).toBe("over_budget");
    await healthy(s.http);
  });

  it("a long word renders (on the render thread) while /healthz answers", async () => {
    const s = await start();
    const body = JSON.stringify({ messages: [{ role: "user", content: "a".repeat(20_000) }] });
    const rendering = fetch(`${s.http}/v1/render`, { method: "POST", headers: JSON_BODY, body });
    await healthy(s.http);
    const res = await rendering;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { ids: number[] }).ids.length).toBeGreaterThan(10);
  });
});

describe("browsers and tenants can't reach in", () => {
  it("a WebSocket upgrade from a web page is refused unless its origin is allowed", async () => {
    const s = await start();
    const refused = await new Promise<number>((resolve) => {
      const ws = new WebSocket(s.ws, { headers: { origin: "https://evil.example" } });
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("open", () => resolve(101));
    });
    expect(refused).toBe(403);
    const allowed = await start({ access: { allowOrigins: ["https://app.example"], allowHosts: [], publicMetrics: false } });
    const opened = await new Promise<number>((resolve) => {
      const ws = new WebSocket(allowed.ws, { headers: { origin: "https://app.example" } });
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("open", () => {
        ws.close();
        resolve(101);
      });
    });
    expect(opened).toBe(101);
  });

  it("browser requests: a text/plain POST, a cross-site fetch, a foreign Origin, a rebound Host", async () => {
    const s = await start();
    const post = (headers: Record<string, string>) =>
      fetch(`${s.http}/v1/render`, { method: "POST", headers, body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }) });
    expect((await post({ "content-type": "text/plain" })).status).toBe(415);
    expect((await post({ ...JSON_BODY, "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await post({ ...JSON_BODY, origin: "https://evil.example" })).status).toBe(403);
    // the service's own page (the inspector) may call it
    const port = new URL(s.http).port;
    expect((await post({ ...JSON_BODY, origin: `http://127.0.0.1:${port}` })).status).toBe(200);
    // DNS rebinding: a page on evil.example resolved to 127.0.0.1
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        `${s.http}/v1/render`,
        { method: "POST", headers: { ...JSON_BODY, host: `evil.example:${port}` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end("{}");
    });
    expect(rebound).toBe(421);
    await healthy(s.http);
  });

  it("with --token, /metrics needs it too (unless --public-metrics); the probes stay open", async () => {
    const s = await start({ token: "secret" });
    expect((await fetch(`${s.http}/metrics`)).status).toBe(401);
    expect((await fetch(`${s.http}/metrics`, { headers: { authorization: "Bearer secret" } })).status).toBe(200);
    expect((await fetch(`${s.http}/healthz`)).status).toBe(200);
    expect((await fetch(`${s.http}/readyz`)).status).toBe(200);
    const open = await start({ token: "secret", access: { allowOrigins: [], allowHosts: [], publicMetrics: true } });
    expect((await fetch(`${open.http}/metrics`)).status).toBe(200);
  });

  it("another tenant's tool-call id restores nothing; call ids carry 96 random bits", async () => {
    const s = await start();
    const client = await HarmonyClient.connect(s.ws);
    const stream = client.open("a");
    stream.write(
      enc.encode(
        "<|channel|>analysis<|message|>Secret plan.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
      ),
    );
    stream.close();
    const events = await stream.collect();
    await client.close();
    const call = events.find((e) => e.type === "tool_call_start") as { id: string };
    expect(call.id).toMatch(/^call_[0-9a-f]{24}/);
    const history = {
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: call.id, content: "{}" },
      ],
    };
    const svc = s.server.service;
    expect((await svc.render(history, svc.tenantOf(undefined))).ok && (await svc.render(history, "local"))).toMatchObject({
      restored: [{ tool_call_id: call.id }],
    });
    const other = await svc.render(history, "someone-else");
    expect(other).toMatchObject({ ok: true, restored: [] });
  });
});

describe("honest statuses from the OpenAI front", () => {
  let upstream: StandIn;
  beforeAll(async () => {
    upstream = await startStandIn();
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("a streaming request whose upstream fails before the first byte gets the upstream's status, not a 200", async () => {
    const s = await start({ upstream: { url: upstream.url, idleTimeoutMs: 500, reasoningField: "reasoning" } });
    const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "hi" }], stream: true });
    const cases: [Script, number][] = [
      [{ tokens: [], status: 400, errorBody: JSON.stringify({ object: "error", message: "bad" }) }, 400],
      [{ tokens: [], status: 500 }, 502],
      [{ tokens: [], hang: true }, 504],
    ];
    for (const [script, status] of cases) {
      upstream.script(script);
      const err = (await ask().then(
        () => null,
        (e: unknown) => e,
      )) as { status?: number; error?: { type?: string; code?: string } } | null;
      expect(err?.status).toBe(status);
      expect(err?.error?.code).toMatch(/^upstream_/);
    }
  });

  it("bad input is a coded 400; a body over the limit is a 413 too_large; sampling fields are checked first", async () => {
    const s = await start({
      upstream: { url: upstream.url, idleTimeoutMs: 500, reasoningField: "reasoning" },
      limits: { ...DEFAULT_LIMITS, maxFrameBytes: 64 * 1024 },
    });
    const post = (path: string, body: string) => fetch(`${s.http}${path}`, { method: "POST", headers: JSON_BODY, body });
    const code = async (r: Response) => ((await r.json()) as { error: { code: string } }).error.code;
    const deep = `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":${nested(1000)}}`;
    for (const path of ["/v1/chat/completions", "/v1/responses"]) {
      const r = await post(path, deep);
      expect(r.status).toBe(400);
      expect(await code(r)).toBe("too_deep");
    }
    const big = await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "x".repeat(70_000) }] }));
    expect(big.status).toBe(413);
    expect(await code(big)).toBe("too_large");
    const received = upstream.received.length;
    for (const bad of [{ temperature: "hot" }, { top_p: 2 }, { max_tokens: -1 }, { stop: [1, 2] }, { logit_bias: { x: 1 } }]) {
      const r = await post("/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], ...bad }));
      expect(r.status).toBe(400);
      expect(await code(r)).toBe("bad_request");
    }
    expect(upstream.received.length).toBe(received); // none of them reached the engine
  });

  it("an upstream on a port fetch refuses (6000) is reached", async () => {
    const text = "<|channel|>final<|message|>hi<|return|>";
    const ids = enc.encode(text);
    const engine = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, token_ids: ids, finish_reason: "stop" }], usage: null })}\n\n`);
        res.end("data: [DONE]\n\n");
      });
    });
    // 6000 is on fetch's "bad port" list, as are 6665-6669 and 6697: the first free one
    let port = 0;
    for (const p of [6000, 6665, 6666, 6667, 6668, 6669, 6697]) {
      const ok = await new Promise<boolean>((resolve) => {
        engine.once("error", () => resolve(false));
        engine.listen(p, "127.0.0.1", () => resolve(true));
      });
      if (ok) {
        port = (engine.address() as AddressInfo).port;
        break;
      }
    }
    expect(port, "no port of fetch's blocked list is free on this machine").toBeGreaterThan(0);
    try {
      const s = await start({ upstream: { url: `http://127.0.0.1:${port}`, idleTimeoutMs: 2000, reasoningField: "reasoning" } });
      const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
      const r = await client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "hi" }] });
      expect(r.choices[0]!.message.content).toBe("hi");
    } finally {
      await new Promise<void>((resolve) => engine.close(() => resolve()));
    }
  });
});

describe("a shared store that answers anything (issue #32)", () => {
  it("MGET answered `:1` or `*1 :5` while renders name tool calls (HTTP, the render op, gRPC): each rendered without restoring, the process up", async () => {
    const peer = await startRespPeer(() => ":1\r\n");
    try {
      const s = await start({ cotStore: { ...DEFAULT_COT_STORE, shared: { url: peer.url, timeoutMs: 2000 } } });
      expect(await s.server.service.reasoning.shared!.waitReady(10_000)).toBe(true);
      const history = JSON.stringify({
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: null, tool_calls: [{ id: "call_x", type: "function", function: { name: "f", arguments: "{}" } }] },
          { role: "tool", tool_call_id: "call_x", content: "{}" },
        ],
      });
      const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
      const client = new Stub(s.grpc, grpc.credentials.createInsecure()) as unknown as {
        Render(b: Uint8Array, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
        close(): void;
      };
      try {
        for (const reply of [":1\r\n", "*1\r\n:5\r\n", "*2\r\n$1\r\nA\r\n$1\r\nB\r\n", "garbage\r\n"]) {
          peer.answer((cmd) => (cmd === "MGET" ? reply : "-ERR\r\n"));
          const res = await fetch(`${s.http}/v1/render`, { method: "POST", headers: JSON_BODY, body: history });
          expect(res.status, reply).toBe(200);
          expect(((await res.json()) as { restored: unknown[] }).restored).toEqual([]);
          const op = JSON.stringify({ ops: [{ render: { request_id: "r", request_json: history } }] });
          const r = await exchange(s.ws, [op], (a) => eventsOf(a).some((e) => e.rendered || e.error));
          expect(
            eventsOf(r.answers).find((e) => e.rendered),
            reply,
          ).toBeTruthy();
          const bytes = wire.Render.encode({ request_id: "r", request_json: history }).finish();
          const err = await new Promise<grpc.ServiceError | null>((resolve) => client.Render(bytes, (e) => resolve(e)));
          expect(err, reply).toBeNull();
        }
      } finally {
        client.close();
      }
      const failures = await s.server.service.metrics.registry.getSingleMetricAsString("harmony_cot_store_failures_total");
      expect(Number(/op="read"} (\d+)/.exec(failures)?.[1])).toBeGreaterThanOrEqual(9);
      await healthy(s.http);
    } finally {
      await peer.close();
    }
  });
});

describe("answer checks off the render thread (issue #32)", () => {
  let upstream: StandIn;
  beforeAll(async () => {
    upstream = await startStandIn();
  });
  afterAll(async () => {
    await upstream.close();
  });

  const render = (base: string) =>
    fetch(`${base}/v1/render`, {
      method: "POST",
      headers: JSON_BODY,
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });

  it("a response_format pattern `^(a+)+$` and an answer of 40 a's and a b: checked at once (schema_mismatch), other clients' renders served", async () => {
    const s = await start({ upstream: { url: upstream.url, idleTimeoutMs: 5000, reasoningField: "reasoning" } });
    upstream.script({ tokens: enc.encode(`<|channel|>final<|message|>${JSON.stringify("a".repeat(40) + "b")}<|return|>`) });
    const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
    const asked = client.chat.completions.create({
      model: "gpt-oss",
      messages: [{ role: "user", content: "say a" }],
      response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "string", pattern: "^(a+)+$" } } },
    });
    const others = await Promise.all([render(s.http), render(s.http)]);
    expect(others.map((r) => r.status)).toEqual([200, 200]);
    const r = (await asked) as unknown as { harmony?: { recoveries: { kind: string; detail: string }[] } };
    expect(r.harmony?.recoveries).toEqual([{ kind: "schema_mismatch", choice: 0, detail: expect.stringMatching(/must match pattern/) }]);
    await healthy(s.http);
  });

  it("a check past its deadline (uniqueItems over 10,000 objects): the answer says unchecked, no render fails, the server goes on", async () => {
    const s = await start({ upstream: { url: upstream.url, idleTimeoutMs: 5000, reasoningField: "reasoning" }, checkDeadlineMs: 200 });
    const answer = JSON.stringify(Array.from({ length: 10_000 }, (_, i) => ({ i })));
    upstream.script({ tokens: enc.encode(`<|channel|>final<|message|>${answer}<|return|>`) });
    const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
    const asked = client.chat.completions.create({
      model: "gpt-oss",
      messages: [{ role: "user", content: "list" }],
      response_format: { type: "json_schema", json_schema: { name: "list", schema: { type: "array", uniqueItems: true } } },
    });
    const others = await Promise.all([render(s.http), render(s.http)]);
    expect(others.map((r) => r.status)).toEqual([200, 200]);
    const r = (await asked) as unknown as { choices: { message: { content: string } }[]; harmony?: { unchecked?: unknown[] } };
    expect(r.choices[0]!.message.content).toBe(answer);
    expect(r.harmony).toEqual({ unchecked: [{ choice: 0, reason: expect.stringMatching(/did not finish within 200 ms/) }] });
    const checks = await s.server.service.metrics.registry.getSingleMetricAsString("harmony_answer_checks_total");
    expect(checks).toContain('harmony_answer_checks_total{outcome="unchecked"} 1');
    await healthy(s.http);
  });
});

describe("one reading of the request target (issue #32)", () => {
  /** Send `head` as it is (fetch and http.request would normalise the target) and read the status line and body. */
  function raw(base: string, head: string): Promise<{ status: number; body: string }> {
    const { hostname, port } = new URL(base);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => socket.write(head));
      let text = "";
      socket.on("data", (c: Buffer) => {
        text += c.toString("latin1");
        const end = text.indexOf("\r\n\r\n");
        if (end === -1) return;
        const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
        if (text.length >= end + 4 + length) {
          socket.destroy();
          resolve({ status: Number(text.slice(9, 12)), body: text.slice(end + 4, end + 4 + length) });
        }
      });
      socket.on("end", () => resolve({ status: Number(text.slice(9, 12)), body: text.slice(text.indexOf("\r\n\r\n") + 4) }));
      socket.on("error", reject);
    });
  }

  it("absolute-form, //-prefixed, /\\ and * targets: 400 bad_request_target, nothing forwarded; dot segments are read once, for both", async () => {
    // what reached the engine from the test's requests (the sidecar's own checks of the engine, /health,
    // /version and /v1/models, carry no x-from-test header)
    const seen: string[] = [];
    const engine = http.createServer((req, res) => {
      if (req.headers["x-from-test"] === "1") seen.push(req.url ?? "");
      res.writeHead(200, { "content-type": "text/plain" }).end("engine");
    });
    await new Promise<void>((resolve) => engine.listen(0, "127.0.0.1", resolve));
    try {
      const upstreamUrl = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
      const s = await start({ token: "secret", upstream: { url: upstreamUrl, idleTimeoutMs: 2000, reasoningField: "reasoning" } });
      const { port } = new URL(s.http);
      const get = (target: string, extra = "") =>
        raw(s.http, `GET ${target} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-from-test: 1\r\n${extra}connection: close\r\n\r\n`);
      for (const target of ["//x/health", "//tokenize/x/../../health", `http://127.0.0.1:${port}/health`, "/\\x/health", "*"]) {
        const r = await get(target);
        expect(r.status, target).toBe(400);
        if (target !== "/\\x/health" || r.body !== "") expect(JSON.parse(r.body).error.code, target).toBe("bad_request_target");
      }
      const options = await raw(s.http, `OPTIONS * HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-from-test: 1\r\nconnection: close\r\n\r\n`);
      expect(options.status).toBe(400);
      expect(seen).toEqual([]);
      // a path with dot segments is authorized as it is forwarded: the one reading
      expect((await get("/v1/../health")).status).toBe(200);
      expect((await get("/health/../tokenize")).status).toBe(401);
      expect((await get("/%2e%2e/health/%2E%2E/tokenize")).status).toBe(401);
      expect(seen).toEqual(["/health"]);
      expect((await get("/health/../tokenize?x=1", "authorization: Bearer secret\r\n")).status).toBe(200);
      expect(seen).toEqual(["/health", "/tokenize?x=1"]);
      // the WebSocket upgrade reads the target the same way
      const upgrade = await raw(
        s.http,
        `GET //v1/stream HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n`,
      );
      expect(upgrade.status).toBe(400);
      await healthy(s.http);
    } finally {
      await new Promise<void>((resolve) => engine.close(() => resolve()));
    }
  });
});

describe("a streamed client that stops reading (issue #32)", () => {
  let upstream: StandIn;
  beforeAll(async () => {
    upstream = await startStandIn();
  });
  afterAll(async () => {
    await upstream.close();
  });

  /** POST a streamed request on a raw socket, then never read a byte of the answer. */
  function unreadRequest(base: string, path: string, body: object): net.Socket {
    const { hostname, port } = new URL(base);
    const text = JSON.stringify(body);
    const socket = net.connect(Number(port), hostname, () => {
      socket.pause();
      socket.write(
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
      );
    });
    socket.on("error", () => undefined);
    return socket;
  }

  const TOTAL = 1 << 22;
  const word = enc.encodeOrdinary(" hello");
  /**
   * The most ids the engine can have sent once the sidecar holds it back,
   * whatever the sidecar does: what the kernel's socket buffers of the two
   * legs can hold. The front coalesces the tokens it has ready while the
   * client is behind (issue #35): then the answer to the unread client is
   * about 6 bytes a token (" hello", JSON-escaped), and the sidecar's send
   * buffer (autotuned up to tcp_wmem's max) with the client's unread
   * receive buffer (tcp_rmem's default: it grows only as it is read) holds
   * that many; the engine's leg, its send buffer and the sidecar's receive
   * buffer (up to tcp_rmem's max), at most 4 ids an event of at least 150
   * bytes (./stand-in-vllm.ts); and a slack of 65,536 for what the sidecar
   * holds itself (the parser's step, the stream's high-water mark).
   */
  function heldBackBound(): number {
    const kernel = (file: string, field: number, fallback: number) => {
      try {
        const v = Number(readFileSync(file, "utf8").trim().split(/\s+/)[field]);
        return Number.isFinite(v) && v > 0 ? v : fallback;
      } catch {
        return fallback;
      }
    };
    const wmemMax = kernel("/proc/sys/net/ipv4/tcp_wmem", 2, 4 << 20);
    const rmemDefault = kernel("/proc/sys/net/ipv4/tcp_rmem", 1, 128 << 10);
    const rmemMax = kernel("/proc/sys/net/ipv4/tcp_rmem", 2, 6 << 20);
    return Math.ceil((wmemMax + rmemDefault) / 6 + ((wmemMax + rmemMax) * 4) / 150 + 65_536);
  }

  for (const [path, body] of [
    ["/v1/chat/completions", { model: "gpt-oss", messages: [{ role: "user", content: "go on" }], stream: true }],
    ["/v1/responses", { model: "gpt-oss", input: "go on", stream: true, store: false }],
  ] as const) {
    it(`${path}: the engine's stream stops within a bounded buffer, the client is dropped after --slow-client-timeout-ms, others are served`, async () => {
      const s = await start({
        upstream: { url: upstream.url, idleTimeoutMs: 60_000, reasoningField: "reasoning" },
        limits: { ...DEFAULT_LIMITS, slowClientTimeoutMs: 2000 },
      });
      expect(word).toHaveLength(1);
      const answer = [
        ...enc.encode("<|channel|>final<|message|>"),
        ...new Array<number>(TOTAL).fill(word[0]!),
        ...enc.encode("<|return|>"),
      ];
      upstream.script({ tokens: answer, drain: true }, { tokens: enc.encode("<|channel|>final<|message|>hi<|return|>") });
      const received = upstream.received.length;
      const socket = unreadRequest(s.http, path, body);
      try {
        // the engine is held back: its stream waits for the sidecar to read, far short of the whole answer
        await until(() => upstream.received[received]?.waiting === true, 60_000);
        const rec = upstream.received[received]!;
        // meanwhile, another client is served
        const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
        const other = await client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "hi" }] });
        expect(other.choices[0]!.message.content).toBe("hi");
        await healthy(s.http);
        // dropped once unread past the bound: the engine's request ends too, long before the answer's end
        await until(() => rec.aborted, 60_000);
        expect(rec.sentTokens).toBeLessThan(Math.min(heldBackBound(), TOTAL / 2));
        const dropped = await s.server.service.metrics.registry.getSingleMetricAsString("harmony_slow_clients_dropped_total");
        expect(dropped).toContain('harmony_slow_clients_dropped_total{transport="http"} 1');
        await healthy(s.http);
      } finally {
        socket.destroy();
      }
    });
  }
});

/** Until `f` holds (polled), or fail after `ms`. */
async function until(f: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("slow readers and many calls on the WS and gRPC edges (issue #32)", () => {
  it("a WebSocket client that stops reading its openai.chat answers: it is paused, then closed 4409 after --slow-client-timeout-ms; others are served", async () => {
    const s = await start({ limits: { ...DEFAULT_LIMITS, maxBufferedBytes: 256 * 1024, slowClientTimeoutMs: 2000 } });
    const svc = s.server.service;
    const word = enc.encodeOrdinary(" hello")[0]!;
    const ws = new WebSocket(s.ws);
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    try {
      ws.pause(); // never read a byte of the answers
      ws.send(JSON.stringify({ ops: [{ open: { stream: "a", format: "openai.chat" } }] }));
      const ids = [...enc.encode("<|channel|>final<|message|>"), ...new Array<number>(5000).fill(word)];
      // ~2 MB of frames in, ~15 MB of answers out: more than the sockets' kernel buffers hold
      for (let i = 0; i < 300; i++) ws.send(JSON.stringify({ ops: [{ tokens: { stream: "a", ids: i === 0 ? ids : ids.slice(-5000) } }] }));
      // another client is served meanwhile
      const r = await exchange(s.ws, [JSON.stringify({ ops: [{ open: { stream: "b" } }, { close: { stream: "b" } }] })], (a) =>
        eventsOf(a).some((e) => e.done),
      );
      expect(eventsOf(r.answers).some((e) => e.done)).toBe(true);
      await healthy(s.http);
      await until(() => svc.connectionCount === 0, 60_000);
      const dropped = await svc.metrics.registry.getSingleMetricAsString("harmony_slow_clients_dropped_total");
      expect(dropped).toContain('harmony_slow_clients_dropped_total{transport="ws"} 1');
      // what it is told, once it reads: 4409
      const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
      ws.resume();
      expect([4409, 1006]).toContain(await closed);
      await healthy(s.http);
    } finally {
      ws.terminate();
    }
  });

  it("many gRPC calls on one HTTP/2 connection share one budget: opens past --max-connection-bytes over all of them are over_budget", async () => {
    const s = await start({ limits: { ...DEFAULT_LIMITS, maxConnectionBytes: 1024 * 1024 } });
    const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
    const client = new Stub(s.grpc, grpc.credentials.createInsecure()) as unknown as {
      Stream(): grpc.ClientDuplexStream<Uint8Array, Buffer>;
      close(): void;
    };
    try {
      // 1 MiB is 64 streams of 16 KiB: four calls of 30 opens each would each fit alone
      const codes = Array.from({ length: 4 }, (_, c) => {
        const call = client.Stream();
        call.on("error", () => undefined);
        const seen: string[] = [];
        const ops = Array.from({ length: 30 }, (_, i) => ({ open: { stream: `c${c}-s${i}` } }));
        return { call, seen, ops };
      });
      // each call's opens after the previous call's are answered (the budget is taken in order); all calls stay open
      for (const { call, seen, ops } of codes) {
        const answered = new Promise<void>((resolve) =>
          call.once("data", (b: Buffer) => {
            const frame = wire.ServerFrame.toObject(wire.ServerFrame.decode(b)) as { events?: { error?: { code: string } }[] };
            for (const e of frame.events ?? []) if (e.error) seen.push(e.error.code);
            resolve();
          }),
        );
        // a tokens op for a stream never opened: its unknown_stream error is the frame's answer
        call.write(wire.ClientFrame.encode({ ops: [...ops, { tokens: { stream: "probe", ids: [1] } }] }).finish());
        await answered;
      }
      // (a stream's name counts too: 63 of 16 KiB and their names fit), over all four calls
      const open = (await s.server.service.metrics.openStreams.get()).values[0]!.value;
      expect(open).toBeGreaterThanOrEqual(62);
      expect(open).toBeLessThanOrEqual(64);
      expect(codes[0]!.seen).toEqual(["unknown_stream"]);
      expect(codes[3]!.seen).toContain("over_budget");
      for (const { call } of codes) call.end();
    } finally {
      client.close();
    }
    await healthy(s.http);
  });
});
