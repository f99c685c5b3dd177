/**
 * The OpenAI front against vLLM's real contract (issue #18), through the
 * official `openai` client and the faithful stand-in (test/e2e/stand-ins/vllm.ts,
 * written from vLLM's source; docs/vllm-contract.md says which file each
 * behaviour comes from).
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc } = harmony();
const ids = (text: string) => enc.encode(text);
const TOOLS = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: {} } } }];
const ASK = { model: "gpt-oss", messages: [{ role: "user" as const, content: "Weather in Oslo?" }] };

describe("the OpenAI front against vLLM's contract", () => {
  let vllm: VllmStandIn;
  let server: Server;
  let client: OpenAI;
  let base: string;

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 4096 });
    const s = await startTestServer({ grpcPort: -1, upstream: { url: vllm.url, idleTimeoutMs: 2000, reasoningField: "reasoning" } });
    server = s.server;
    base = s.http;
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-local", maxRetries: 0 });
  });

  afterAll(async () => {
    await server.stop();
    await vllm.close();
  });

  it("a request without max_tokens gets the whole answer, not vLLM's 16 tokens (max_tokens = context - prompt)", async () => {
    const answer = "<|channel|>final<|message|>" + "The weather in Oslo is mild and clear today, ".repeat(4) + "<|return|>";
    vllm.script({ tokens: ids(answer) });
    const r = await client.chat.completions.create(ASK);
    expect(r.choices[0]!.message.content).toBe("The weather in Oslo is mild and clear today, ".repeat(4));
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const sent = vllm.completions().at(-1)!.body!;
    expect(sent.max_tokens).toBe(4096 - (sent.prompt as number[]).length);
    expect(sent.model).toBe("openai/gpt-oss-20b"); // the served name, whatever the client called it
  });

  it("a max_tokens beyond the context is a 400 in OpenAI's shape, before the engine sees it", async () => {
    const before = vllm.completions().length;
    const err = (await client.chat.completions.create({ ...ASK, max_tokens: 5000 }).then(
      () => null,
      (e: unknown) => e,
    )) as { status?: number; error?: { code?: string; type?: string } } | null;
    expect(err?.status).toBe(400);
    expect(err?.error).toMatchObject({ code: "context_length_exceeded", type: "invalid_request_error" });
    expect(vllm.completions().length).toBe(before);
  });

  it("an aborted call is never tool_calls, whether streamed or not", async () => {
    const call = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + '{"city":"Oslo","days":3}' + "<|call|>";
    const cut = ids(call).length - 6;
    vllm.script({ tokens: ids(call), abortAfter: cut });
    const r = await client.chat.completions.create({ ...ASK, tools: TOOLS });
    expect(r.choices[0]!.finish_reason).not.toBe("tool_calls");
    vllm.script({ tokens: ids(call), abortAfter: cut });
    const stream = await client.chat.completions.create({ ...ASK, tools: TOOLS, stream: true });
    const finishes: (string | null)[] = [];
    for await (const chunk of stream) for (const c of chunk.choices) if (c.finish_reason) finishes.push(c.finish_reason);
    expect(finishes).toEqual(["length"]); // Chat has no finish for an abort: "length" says the output is cut short
  });

  it("a call cut by max_tokens is not tool_calls either", async () => {
    const call = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + '{"city":"Oslo","days":3}' + "<|call|>";
    vllm.script({ tokens: ids(call) });
    const r = await client.chat.completions.create({ ...ASK, tools: TOOLS, max_tokens: ids(call).length - 4 });
    expect(r.choices[0]!.finish_reason).toBe("length");
  });

  it("a vLLM older than return_token_ids (v0.10.0) gets a 502 that says why", async () => {
    vllm.script({ tokens: ids("<|channel|>final<|message|>Hi<|return|>"), config: { profile: "v0.10.0" } });
    const err = (await client.chat.completions.create(ASK).then(
      () => null,
      (e: unknown) => e,
    )) as { status?: number; error?: { message?: string } } | null;
    expect(err?.status).toBe(502);
    expect(err?.error?.message).toMatch(/does not return token ids; vLLM ≥ 0\.10\.2 needed/);
  });

  it("<|endoftext|> is a stop id, whatever vLLM's --generation-config, and never reaches the answer", async () => {
    // --generation-config vllm: the model's EOS list is not loaded, so only the request's stop ids stop it
    const text = "<|channel|>final<|message|>Sunny.<|endoftext|>Later text the model went on with.";
    vllm.script({ tokens: ids(text), config: { generationConfigEosTokenIds: [] } });
    const r = await client.chat.completions.create(ASK);
    expect(r.choices[0]!.message.content).toBe("Sunny.");
    expect(vllm.completions().at(-1)!.body!.stop_token_ids).toContain(199999);
  });

  it("in a vLLM pod: paths the front does not serve reach vLLM, streaming included; /metrics holds both sets", async () => {
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(vllm.received.at(-1)!.path).toBe("/health");
    // a streamed /v1/completions, passed through as vLLM sent it
    vllm.script({ tokens: ids("<|channel|>final<|message|>Hi there<|return|>") });
    const res = await fetch(`${base}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "abc" },
      body: JSON.stringify({ model: "openai/gpt-oss-20b", prompt: [1, 2, 3], stream: true, max_tokens: 50, return_token_ids: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const sse = await res.text();
    expect(sse).toMatch(/"token_ids":\[/);
    expect(sse.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const sent = vllm.completions().at(-1)!;
    expect(sent.headers["x-request-id"]).toBe("abc");
    expect(sent.body).toMatchObject({ prompt: [1, 2, 3], max_tokens: 50 });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:num_requests_running/m);
    expect(metrics).toMatch(/^harmony_tokens_total/m);
  });

  it("include_reasoning: false keeps the chain of thought out of the answer, streamed or not", async () => {
    const text = "<|channel|>analysis<|message|>Secret thoughts.<|end|><|start|>assistant<|channel|>final<|message|>Mild.<|return|>";
    vllm.script({ tokens: ids(text) });
    const r = await client.chat.completions.create({ ...ASK, include_reasoning: false } as typeof ASK);
    const message = r.choices[0]!.message as { content: string | null; reasoning?: string | null };
    expect(message.content).toBe("Mild.");
    expect(message.reasoning ?? null).toBeNull();
    vllm.script({ tokens: ids(text) });
    const stream = await client.chat.completions.create({ ...ASK, include_reasoning: false, stream: true } as typeof ASK & {
      stream: true;
    });
    let seen = "";
    for await (const chunk of stream) seen += JSON.stringify(chunk);
    expect(seen).not.toMatch(/Secret thoughts/);
    vllm.script({ tokens: ids(text) });
    const kept = await client.chat.completions.create(ASK);
    expect((kept.choices[0]!.message as { reasoning?: string }).reasoning).toBe("Secret thoughts.");
  });

  it("cached prompt tokens pass through to usage (chat and Responses)", async () => {
    vllm.set({ enablePromptTokensDetails: true, cachedTokens: 7 });
    try {
      vllm.script({ tokens: ids("<|channel|>final<|message|>Hi<|return|>") });
      const r = await client.chat.completions.create(ASK);
      expect(r.usage?.prompt_tokens_details?.cached_tokens).toBe(7);
      vllm.script({ tokens: ids("<|channel|>final<|message|>Hi<|return|>") });
      const resp = await client.responses.create({ model: "gpt-oss", input: "hi" });
      expect(resp.usage?.input_tokens_details.cached_tokens).toBe(7);
    } finally {
      vllm.set({ enablePromptTokensDetails: false, cachedTokens: 0 });
    }
  });

  const PARALLEL =
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" +
    '{"city":"Oslo"}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>' +
    '{"city":"Bergen"}<|call|>';

  it('tool_choice "none": a call the model writes anyway is no call', async () => {
    vllm.script({ tokens: ids(PARALLEL) });
    const r = await client.chat.completions.create({ ...ASK, tools: TOOLS, tool_choice: "none" });
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(r.choices[0]!.finish_reason).toBe("stop");
    vllm.script({ tokens: ids(PARALLEL) });
    const any = await client.chat.completions.create({ ...ASK, tools: TOOLS });
    expect(any.choices[0]!.message.tool_calls).toHaveLength(2);
  });

  it("parallel_tool_calls: false: the first call ends the answer", async () => {
    vllm.script({ tokens: ids(PARALLEL) });
    const r = await client.chat.completions.create({ ...ASK, tools: TOOLS, parallel_tool_calls: false });
    const calls = r.choices[0]!.message.tool_calls!;
    expect(calls).toHaveLength(1);
    expect(calls[0]!.type === "function" && calls[0]!.function.arguments).toBe('{"city":"Oslo"}');
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("fields the sidecar cannot honour yet are refused by name, not dropped", async () => {
    const before = vllm.completions().length;
    for (const [extra, param] of [
      [{ tool_choice: "required" }, "tool_choice"],
      [{ tool_choice: { type: "function", function: { name: "get_weather" } } }, "tool_choice"],
      [{ response_format: { type: "json_object" } }, "response_format"],
      [{ logprobs: true, top_logprobs: 2 }, "logprobs"],
    ] as const) {
      const err = (await client.chat.completions.create({ ...ASK, tools: TOOLS, ...(extra as object) }).then(
        () => null,
        (e: unknown) => e,
      )) as { status?: number; error?: { param?: string } } | null;
      expect(err?.status).toBe(400);
      expect(err?.error?.param).toBe(param);
    }
    expect(vllm.completions().length).toBe(before);
  });
});
