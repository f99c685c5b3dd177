/**
 * Replicas sharing one reasoning store (issue #19): real `serve` processes
 * (the built CLI, as a deployment runs them) with `--cot-store unix://…`
 * against a real redis-server (./../store/redis-server.ts). A tool call's
 * reasoning remembered by replica A is put back into the prompt replica B
 * renders; the store dying costs restoring, never a request; another
 * tenant gets nothing; SIGTERM withdraws readiness before the drain. A
 * Responses conversation stored through one replica (against the vLLM
 * stand-in) is continued, read and deleted through another.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import { KEY_PREFIX } from "../../src/store/redis.js";
import { harmony, WEATHER } from "../helpers.js";
import { RedisServer } from "../store/redis-server.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { enc, vocab } = harmony();
const COT = WEATHER.cot;
const STORE_WARNING = /^reasoning store failing/;

interface Replica {
  child: ChildProcess;
  http: string;
  ws: string;
  token: string;
  /** Every log line, parsed. */
  logs: { level: number; msg: string; [k: string]: unknown }[];
  exited: Promise<number | null>;
}

const redis = new RedisServer();
let probe: Redis;
const replicas: Replica[] = [];
const clients: HarmonyClient[] = [];

/**
 * `serve` with the shared store; resolves once it says where it listens. The
 * fetch budget is generous here (the suite shares the machine with the rest
 * of `make test`): the budget itself is tested in test/store/shared.test.ts.
 */
async function replica(token: string, ...flags: string[]): Promise<Replica> {
  const child = spawn(
    process.execPath,
    [
      CLI,
      "serve",
      "--port",
      "0",
      "--grpc-port",
      "-1",
      "--token",
      token,
      "--cot-store",
      redis.url,
      "--cot-store-timeout-ms",
      "1000",
      "--log-level",
      "info",
      ...flags,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const logs: Replica["logs"] = [];
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let o: Replica["logs"][number];
      try {
        o = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(o);
      if (o.msg === "harmony-sidecar serving") resolve(o.port as number);
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before serving`)));
  });
  const r = { child, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}/v1/stream`, token, logs, exited };
  replicas.push(r);
  return r;
}

const auth = (r: Replica) => ({ authorization: `Bearer ${r.token}` });
const tenantKey = (token: string, id: string) =>
  `${KEY_PREFIX}${createHash("sha256").update(`Bearer ${token}`).digest("hex").slice(0, 32)}:${id}`;

/** Turn 1: a completion that reasons and calls a tool, streamed through `r`; the call id it emitted. */
async function turn1(r: Replica): Promise<string> {
  const client = await HarmonyClient.connect(r.ws, { token: r.token });
  clients.push(client);
  const s = client.open(`turn-${Math.random()}`);
  s.write(
    enc.encode(
      `<|channel|>analysis<|message|>${COT}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>`,
    ),
  );
  s.close();
  const call = (await s.collect()).find((e) => e.type === "tool_call_start");
  if (call?.type !== "tool_call_start") throw new Error("no tool call");
  return call.id;
}

/** Turn 2's history, the reasoning dropped (or kept) by the client. */
function history(callId: string, withReasoning = false) {
  return {
    tools: [
      { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
    ],
    harmony: { current_date: "2026-11-30" },
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: null,
        ...(withReasoning ? { reasoning: COT } : {}),
        tool_calls: [{ id: callId, type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
      },
      { role: "tool", tool_call_id: callId, content: '{"temp_c": 3}' },
    ],
  };
}

async function render(
  r: Replica,
  body: unknown,
): Promise<{ status: number; ms: number; ids: number[]; text: string; restored: unknown[] }> {
  const t0 = performance.now();
  const res = await fetch(`${r.http}/v1/render`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth(r) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { ids: number[]; text: string; restored: unknown[] };
  return { status: res.status, ms: performance.now() - t0, ...json };
}

async function failures(r: Replica, op: "read" | "write"): Promise<number> {
  const text = await (await fetch(`${r.http}/metrics`, { headers: auth(r) })).text();
  const m = new RegExp(`^harmony_cot_store_failures_total\\{op="${op}"\\} (\\d+)`, "m").exec(text);
  if (!m) throw new Error(`no harmony_cot_store_failures_total{op="${op}"} in /metrics`);
  return Number(m[1]);
}

async function until(f: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

let a: Replica;
let b: Replica;

beforeAll(async () => {
  await redis.start();
  probe = new Redis({ path: redis.socket, protocol: 2 });
  // A parses on a worker thread (memos come back in results), B on the main thread (memos straight into the store)
  [a, b] = await Promise.all([replica("t1", "--workers", "1", "--inline", "0"), replica("t1", "--workers", "0")]);
});

afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const r of replicas) r.child.kill("SIGTERM");
  await Promise.all(replicas.map((r) => r.exited));
  probe?.disconnect();
  await redis.dispose();
});

describe("two replicas, one reasoning store", () => {
  it("turn 1 through A, turn 2 through B with the reasoning dropped: B's prompt has it", async () => {
    const id = await turn1(a);
    // written under hs:v1:<tenant>:<call id>, with the TTL
    await until(async () => (await probe.get(tenantKey("t1", id))) === COT);
    expect(await probe.pttl(tenantKey("t1", id))).toBeGreaterThan(60_000);

    const dropped = await render(b, history(id));
    const kept = await render(b, history(id, true));
    expect(dropped.status).toBe(200);
    expect(dropped.restored).toEqual([{ tool_call_id: id, message_index: 1, chars: COT.length }]);
    expect(dropped.text).toContain(`<|channel|>analysis<|message|>${COT}<|end|>`);
    expect(dropped.ids).toEqual(kept.ids);
    // the other way round: B remembers (main thread), A restores
    const id2 = await turn1(b);
    await until(async () => (await probe.exists(tenantKey("t1", id2))) === 1);
    expect((await render(a, history(id2))).restored).toEqual([{ tool_call_id: id2, message_index: 1, chars: COT.length }]);
  });

  it("another tenant (another token on the same store) gets nothing", async () => {
    const id = await turn1(a);
    await until(async () => (await probe.exists(tenantKey("t1", id))) === 1);
    const other = await replica("t2", "--workers", "0");
    const r = await render(other, history(id));
    expect(r.status).toBe(200);
    expect(r.restored).toEqual([]);
    expect(r.text).not.toContain(COT);
    expect((await render(b, history(id))).restored).toHaveLength(1);
  });

  it("the store killed: requests still succeed without restoring, counted, one warning; back: restoring resumes", async () => {
    const before = { read: await failures(b, "read"), write: await failures(a, "write") };
    const warningsBefore = b.logs.filter((l) => STORE_WARNING.test(l.msg)).length;
    expect(warningsBefore).toBe(0);
    await redis.stop();

    // turn 1 through A while the store is down: A keeps it locally, the write fails
    const id = await turn1(a);
    await until(async () => (await failures(a, "write")) > before.write);
    for (let i = 0; i < 5; i++) {
      const r = await render(b, history(id));
      expect(r.status).toBe(200);
      expect(r.restored).toEqual([]);
      expect(r.ms).toBeLessThan(500);
    }
    expect(await failures(b, "read")).toBeGreaterThanOrEqual(before.read + 5);
    // A's own cache still restores what A parsed
    expect((await render(a, history(id))).restored).toHaveLength(1);
    // one warning per interval (30 s), not one per request
    expect(b.logs.filter((l) => STORE_WARNING.test(l.msg))).toHaveLength(1);
    expect(b.logs.find((l) => STORE_WARNING.test(l.msg))).toMatchObject({ level: 40, store: redis.url });

    // back (empty: it kept nothing): new memos are shared again
    await redis.start();
    await until(async () => b.logs.some((l) => /reasoning store reachable again/.test(l.msg as string)));
    await until(async () => a.logs.some((l) => /reasoning store reachable again/.test(l.msg as string)));
    const id2 = await turn1(b);
    await until(async () => (await probe.exists(tenantKey("t1", id2))) === 1);
    expect((await render(a, history(id2))).restored).toEqual([{ tool_call_id: id2, message_index: 1, chars: COT.length }]);
  });

  it("SIGTERM: /readyz says not ready first, requests are still served during --shutdown-delay-ms, then it drains and exits 0", async () => {
    // the delay is the window in which the checks below must be answered: wide enough for a machine three times slower
    const r = await replica("t1", "--workers", "0", "--shutdown-delay-ms", "6000");
    expect((await fetch(`${r.http}/readyz`)).status).toBe(200);
    const id = await turn1(a);
    await until(async () => (await probe.exists(tenantKey("t1", id))) === 1);
    r.child.kill("SIGTERM");
    await until(async () => (await fetch(`${r.http}/readyz`)).status === 503);
    expect((await fetch(`${r.http}/healthz`)).status).toBe(200);
    expect((await render(r, history(id))).restored).toHaveLength(1);
    expect(await r.exited).toBe(0);
    const msgs = r.logs.map((l) => l.msg);
    expect(msgs.indexOf("not ready; serving until the drain")).toBeGreaterThan(-1);
    expect(msgs.indexOf("not ready; serving until the drain")).toBeLessThan(msgs.indexOf("draining"));
  });
});

describe("two replicas, one response store (Responses store and previous_response_id)", () => {
  let vllm: VllmStandIn;
  let c: Replica;
  let d: Replica;
  const responsesClient = (r: Replica, token = r.token) => new OpenAI({ baseURL: `${r.http}/v1`, apiKey: token, maxRetries: 0 });
  const { call: CALL, answer: ANSWER, responsesTools: TOOLS } = WEATHER;

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 8192 });
    [c, d] = await Promise.all([
      replica("t1", "--workers", "0", "--upstream", vllm.url),
      replica("t1", "--workers", "1", "--inline", "0", "--upstream", vllm.url),
    ]);
  });
  afterAll(async () => {
    await vllm.close();
  });

  it("turn 1 through C calls a tool; turn 2 through D continues it by previous_response_id, its prompt holding the call and its reasoning", async () => {
    vllm.script({ tokens: enc.encode(CALL) });
    const first = await responsesClient(c).responses.create({ model: "gpt-oss", input: "Weather in Oslo?", tools: TOOLS });
    const call = first.output.find((o) => o.type === "function_call");
    if (call?.type !== "function_call") throw new Error("no function call");
    // stored before it was answered, under the tenant's key
    expect(await probe.exists(tenantKey("t1", `response:${first.id}`))).toBe(1);

    vllm.script({ tokens: enc.encode(ANSWER) });
    const second = await responsesClient(d).responses.create({
      model: "gpt-oss",
      previous_response_id: first.id,
      tools: TOOLS,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"temp_c": 3}' }],
    });
    expect(second.output_text).toBe("It is 3 °C in Oslo.");
    const prompt = (vllm.completions().at(-1)!.body!.prompt as number[]).map((id) => vocab.text(id)).join("");
    expect(prompt).toContain(`<|channel|>analysis<|message|>${COT}<|end|>`);
    expect(prompt).toContain('<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp_c": 3}<|end|>');

    // either replica reads it; another tenant on the same store does not; a delete on one is seen by the other
    expect((await responsesClient(c).responses.retrieve(second.id)).output_text).toBe("It is 3 °C in Oslo.");
    const other = await replica("t2", "--workers", "0", "--upstream", vllm.url);
    const theirs = await responsesClient(other)
      .responses.retrieve(second.id)
      .then(
        () => 200,
        (e: { status?: number }) => e.status,
      );
    expect(theirs).toBe(404);
    await responsesClient(c).responses.delete(first.id);
    const gone = await responsesClient(d)
      .responses.retrieve(first.id)
      .then(
        () => 200,
        (e: { status?: number }) => e.status,
      );
    expect(gone).toBe(404);
  });
});
