/**
 * Responses `store` and `previous_response_id` through the official `openai`
 * client (issue #19), one process, against the faithful vLLM stand-in:
 * stored by default, retrieved, listed, deleted; continued with the
 * previous response's reasoning and call put into the next prompt; scoped
 * by tenant. Replicas sharing Redis: test/e2e/replicas.test.ts.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "../../src/server.js";
import { harmony, WEATHER } from "../helpers.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc, vocab } = harmony();
const ids = (text: string) => enc.encode(text);
const { cot: COT, call: CALL, answer: ANSWER, responsesTools: TOOLS } = WEATHER;

/**
 * A response object's `store`: OpenAI's Response object carries it, but the
 * openai package's `Response` type (6.49) declares it only on create's params.
 */
const stored = (r: object): unknown => (r as { store?: unknown }).store;

/** The prompt the engine was sent last, as text. */
function lastPrompt(vllm: VllmStandIn): string {
  return (vllm.completions().at(-1)!.body!.prompt as number[]).map((id) => vocab.text(id)).join("");
}

async function failure(p: Promise<unknown>): Promise<{ status?: number; error?: { code?: string; param?: string | null } }> {
  return p.then(
    () => ({}),
    (e: unknown) => e as { status?: number; error?: { code?: string; param?: string | null } },
  );
}

describe("stored responses through the OpenAI front", () => {
  let vllm: VllmStandIn;
  let server: Server;
  let base: string;
  let alice: OpenAI;
  let bob: OpenAI;

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 8192 });
    const s = await startTestServer({
      grpcPort: -1,
      token: "sk-alice",
      upstream: { url: vllm.url, idleTimeoutMs: 2000, reasoningField: "reasoning" },
    });
    server = s.server;
    base = s.http;
    // a server with a token answers only it: another tenant is tested with two tokens... in replicas.test.ts (one token per process)
    alice = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-alice", maxRetries: 0 });
    bob = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-bob", maxRetries: 0 });
  });

  afterAll(async () => {
    await server.stop();
    await vllm.close();
  });

  it("stores by default: retrieve gives the answer back, store: true and previous_response_id echoed", async () => {
    vllm.script({ tokens: ids(ANSWER) });
    const r = await alice.responses.create({ model: "gpt-oss", input: "Weather in Oslo?" });
    expect(r.output_text).toBe("It is 3 °C in Oslo.");
    expect(stored(r)).toBe(true);
    expect(r.previous_response_id).toBeNull();
    const again = await alice.responses.retrieve(r.id);
    expect(again).toEqual(r);
    expect((await failure(bob.responses.retrieve(r.id))).status).toBe(401);
  });

  it("store: false keeps nothing: retrieve and previous_response_id are 404 with OpenAI's codes", async () => {
    vllm.script({ tokens: ids(ANSWER) });
    const r = await alice.responses.create({ model: "gpt-oss", input: "Weather in Oslo?", store: false });
    expect(stored(r)).toBe(false);
    const got = await failure(alice.responses.retrieve(r.id));
    expect(got.status).toBe(404);
    expect(got.error).toMatchObject({ code: "response_not_found", param: "response_id" });
    const cont = await failure(alice.responses.create({ model: "gpt-oss", input: "and tomorrow?", previous_response_id: r.id }));
    expect(cont.status).toBe(404);
    expect(cont.error).toMatchObject({ code: "previous_response_not_found", param: "previous_response_id" });
  });

  it("previous_response_id continues a tool call: the next prompt has the call and its reasoning, though the client sent only the output", async () => {
    vllm.script({ tokens: ids(CALL) });
    const first = await alice.responses.create({ model: "gpt-oss", input: "Weather in Oslo?", tools: TOOLS });
    const call = first.output.find((o) => o.type === "function_call");
    expect(call?.type === "function_call" && call.name).toBe("get_weather");
    const callId = call?.type === "function_call" ? call.call_id : "";

    vllm.script({ tokens: ids(ANSWER) });
    const second = await alice.responses.create({
      model: "gpt-oss",
      previous_response_id: first.id,
      tools: TOOLS,
      input: [{ type: "function_call_output", call_id: callId, output: '{"temp_c": 3}' }],
    });
    expect(second.output_text).toBe("It is 3 °C in Oslo.");
    expect(second.previous_response_id).toBe(first.id);
    const prompt = lastPrompt(vllm);
    expect(prompt).toContain("<|start|>user<|message|>Weather in Oslo?<|end|>");
    // the chain of thought before the call is kept until the final answer (HARMONY.md §5)
    expect(prompt).toContain(`<|channel|>analysis<|message|>${COT}<|end|>`);
    expect(prompt).toContain('to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Oslo"}<|call|>');
    expect(prompt).toContain('<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp_c": 3}<|end|>');

    // the conversation's items, newest first by default, paged
    const page = await alice.responses.inputItems.list(second.id, { limit: 2 });
    expect(page.data.map((i) => i.type)).toEqual(["function_call_output", "function_call"]);
    expect(page.has_more).toBe(true);
    const all = await alice.responses.inputItems.list(second.id, { order: "asc" });
    expect(all.data.map((i) => i.type)).toEqual(["message", "reasoning", "function_call", "function_call_output"]);
    expect(all.data.every((i) => typeof i.id === "string" && i.id !== "")).toBe(true);
  });

  it("a streamed response is announced complete only once stored: retrieve right after response.completed finds it", async () => {
    vllm.script({ tokens: ids(ANSWER) });
    const stream = await alice.responses.create({ model: "gpt-oss", input: "Weather in Oslo?", stream: true });
    let id = "";
    for await (const ev of stream) {
      if (ev.type === "response.created") expect(stored(ev.response)).toBe(true);
      if (ev.type === "response.completed") {
        id = ev.response.id;
        const got = await alice.responses.retrieve(id);
        expect(got.output_text).toBe("It is 3 °C in Oslo.");
      }
    }
    expect(id).not.toBe("");
  });

  it("delete removes it (then 404); a stored response is not streamed again; methods are checked", async () => {
    vllm.script({ tokens: ids(ANSWER) });
    const r = await alice.responses.create({ model: "gpt-oss", input: "Weather in Oslo?" });
    const raw = await fetch(`${base}/v1/responses/${r.id}?stream=true`, { headers: { authorization: "Bearer sk-alice" } });
    expect(raw.status).toBe(400);
    const put = await fetch(`${base}/v1/responses/${r.id}`, { method: "PUT", headers: { authorization: "Bearer sk-alice" } });
    expect(put.status).toBe(405);
    const del = await fetch(`${base}/v1/responses/${r.id}`, { method: "DELETE", headers: { authorization: "Bearer sk-alice" } });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ id: r.id, object: "response", deleted: true });
    expect((await failure(alice.responses.delete(r.id))).status).toBe(404);
    expect((await failure(alice.responses.retrieve(r.id))).status).toBe(404);
  });

  it("a bad previous_response_id is a 400 naming it, before the engine is asked", async () => {
    const before = vllm.completions().length;
    const bad = await fetch(`${base}/v1/responses`, {
      method: "POST",
      headers: { authorization: "Bearer sk-alice", "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-oss", input: "hi", previous_response_id: { nested: [1] } }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("previous_response_id");
    const long = await failure(
      alice.responses.create({ model: "gpt-oss", input: "hi", previous_response_id: `resp_${"x".repeat(10_000)}` }),
    );
    expect(long.status).toBe(404);
    expect(vllm.completions().length).toBe(before);
  });
});

describe("stored responses switched off (--response-store-bytes 0)", () => {
  it("store is ignored (false in the answer), and previous_response_id is refused with a reason", async () => {
    const vllm = await startVllm({ maxModelLen: 8192 });
    const s = await startTestServer({
      grpcPort: -1,
      upstream: { url: vllm.url, idleTimeoutMs: 2000, reasoningField: "reasoning" },
      responseStore: { maxBytes: 0, ttlMs: 60_000 },
    });
    try {
      const client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "none", maxRetries: 0 });
      vllm.script({ tokens: ids(ANSWER) });
      const r = await client.responses.create({ model: "gpt-oss", input: "hi" });
      expect(stored(r)).toBe(false);
      const cont = await failure(client.responses.create({ model: "gpt-oss", input: "more", previous_response_id: r.id }));
      expect(cont.status).toBe(400);
      expect(cont.error?.param).toBe("previous_response_id");
    } finally {
      await s.server.stop();
      await vllm.close();
    }
  });
});
