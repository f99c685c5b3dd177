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

const { enc, vocab } = harmony();
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

  it("usage counts reasoning tokens: the analysis messages' tokens, header to end token (chat, n = 2, and Responses)", async () => {
    const thought = "<|channel|>analysis<|message|>Think about Oslo first.<|end|>";
    const text = `${thought}<|start|>assistant<|channel|>final<|message|>Hi<|return|>`;
    const expected = ids(thought).length;
    vllm.script({ tokens: ids(text) });
    const r = await client.chat.completions.create({ ...ASK, n: 2, temperature: 1 });
    expect(r.usage?.completion_tokens_details?.reasoning_tokens).toBe(2 * expected);
    vllm.script({ tokens: ids(text) });
    const stream = await client.chat.completions.create({ ...ASK, stream: true, stream_options: { include_usage: true } });
    let reasoning = -1;
    for await (const chunk of stream) {
      expect(chunk).not.toHaveProperty("harmony");
      if (chunk.usage) reasoning = chunk.usage.completion_tokens_details?.reasoning_tokens ?? -1;
    }
    expect(reasoning).toBe(expected);
    vllm.script({ tokens: ids(text) });
    const resp = await client.responses.create({ model: "gpt-oss", input: "hi" });
    expect(resp.usage?.output_tokens_details.reasoning_tokens).toBe(expected);
    expect(resp).not.toHaveProperty("harmony");
    // no analysis, no reasoning tokens
    vllm.script({ tokens: ids("<|channel|>final<|message|>Hi<|return|>") });
    expect((await client.chat.completions.create(ASK)).usage?.completion_tokens_details?.reasoning_tokens).toBe(0);
  });

  it("tool_choice named: the call's header is put after the model's reasoning, so the model calls it (chat, not streamed and streamed)", async () => {
    const reasoning = "The user asks about Oslo. I know it is sunny.";
    // step 1 stops at the analysis message's <|end|> (a stop id asked for it): the final answer after it is never sampled
    const step1 = ids(`${reasoning}<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>`);
    const step2 = ids('{"city":"Oslo"}<|call|>');
    for (const stream of [false, true]) {
      vllm.script({ tokens: step1 }, { tokens: step2 });
      const before = vllm.completions().length;
      const request = { ...ASK, tools: TOOLS, tool_choice: { type: "function" as const, function: { name: "get_weather" } } };
      let name = "";
      let args = "";
      let finish: string | null = null;
      let thought = "";
      if (!stream) {
        const r = await client.chat.completions.create(request);
        const call = r.choices[0]!.message.tool_calls?.[0];
        name = call?.type === "function" ? call.function.name : "";
        args = call?.type === "function" ? call.function.arguments : "";
        finish = r.choices[0]!.finish_reason;
        thought = (r.choices[0]!.message as { reasoning?: string }).reasoning ?? "";
        // usage: both steps' generated ids and the injected header parts
        const sent = vllm.completions().slice(before);
        const injected =
          ids("<|channel|>analysis<|message|>").length +
          ids("<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>").length;
        expect(r.usage?.completion_tokens).toBe(ids(`${reasoning}<|end|>`).length + step2.length + injected);
        expect(r.usage?.prompt_tokens).toBe((sent[0]!.body!.prompt as number[]).length - ids("<|channel|>analysis<|message|>").length);
      } else {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
          const c = chunk.choices[0];
          if (!c) continue;
          const d = c.delta as { reasoning?: string; tool_calls?: { function?: { name?: string; arguments?: string } }[] };
          thought += d.reasoning ?? "";
          for (const tc of d.tool_calls ?? []) {
            name += tc.function?.name ?? "";
            args += tc.function?.arguments ?? "";
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
      }
      expect(name).toBe("get_weather");
      expect(JSON.parse(args)).toEqual({ city: "Oslo" });
      expect(finish).toBe("tool_calls");
      expect(thought).toBe(reasoning);
      const [first, second] = vllm
        .completions()
        .slice(before)
        .map((r) => r.body!);
      const text = (p: unknown) => (p as number[]).map((id) => vocab.text(id)).join("");
      expect(text(first!.prompt).endsWith("<|start|>assistant<|channel|>analysis<|message|>")).toBe(true);
      expect(first!.stop_token_ids).toContain(200007);
      expect(
        text(second!.prompt).endsWith(
          `${reasoning}<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>`,
        ),
      ).toBe(true);
      expect(second!.stop_token_ids).not.toContain(200007);
    }
  });

  it("tool_choice named: a name that spells a special token goes into the header as text, as the prompt renders it", async () => {
    const odd = "x<|call|>y";
    vllm.script({ tokens: ids("Fine.<|end|>") }, { tokens: ids("{}<|call|>") });
    const before = vllm.completions().length;
    await client.chat.completions.create({
      ...ASK,
      tools: [{ type: "function", function: { name: odd, parameters: { type: "object", properties: {} } } }],
      tool_choice: { type: "function", function: { name: odd } },
    });
    const [first, second] = vllm
      .completions()
      .slice(before)
      .map((r) => r.body!.prompt as number[]);
    // the developer message names the tool as text, and so does the injected header: no <|call|> id in either prompt
    expect(first!.includes(200012)).toBe(false);
    expect(second!.includes(200012)).toBe(false);
    const text = second!.map((id) => vocab.text(id)).join("");
    expect(text.endsWith(`<|start|>assistant<|channel|>commentary to=functions.${odd} <|constrain|>json<|message|>`)).toBe(true);
  });

  it('tool_choice "required": the model names the function after "to=functions." (chat and Responses); bad choices are 400s', async () => {
    vllm.script(
      { tokens: ids("Need the weather.<|end|>") },
      { tokens: ids('get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>') },
    );
    const r = await client.chat.completions.create({ ...ASK, tools: TOOLS, tool_choice: "required" });
    const call = r.choices[0]!.message.tool_calls?.[0];
    expect(call?.type === "function" && call.function.name).toBe("get_weather");
    expect(r.choices[0]!.finish_reason).toBe("tool_calls");

    vllm.script({ tokens: ids("Need the weather.<|end|>") }, { tokens: ids('{"city":"Oslo"}<|call|>') });
    const resp = await client.responses.create({
      model: "gpt-oss",
      input: "Weather in Oslo?",
      tools: [{ type: "function", name: "get_weather", parameters: TOOLS[0]!.function.parameters, strict: false }],
      tool_choice: { type: "function", name: "get_weather" },
    });
    const fc = resp.output.find((o) => o.type === "function_call");
    expect(fc?.type === "function_call" && fc.name).toBe("get_weather");

    const before = vllm.completions().length;
    for (const [extra, param] of [
      [{ tool_choice: { type: "function", function: { name: "get_time" } } }, "tool_choice"],
      [{ tool_choice: "sometimes" }, "tool_choice"],
      [{ tool_choice: "required", n: 2 }, "n"],
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

  it("tool_choice named when the reasoning step is cut by max_tokens: no call is forced, the answer is cut (length)", async () => {
    vllm.script({ tokens: ids("A long think that never ends and goes on and on") });
    const r = await client.chat.completions.create({
      ...ASK,
      tools: TOOLS,
      max_tokens: 5,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([]);
  });

  const SHOPPING = {
    type: "object",
    properties: { items: { type: "array", items: { type: "string" } } },
    required: ["items"],
    additionalProperties: false,
  };

  it("response_format json_schema: rendered as the guide's Response Formats; a matching answer passes, one that is not is said (chat)", async () => {
    const response_format = { type: "json_schema" as const, json_schema: { name: "shopping_list", schema: SHOPPING } };
    vllm.script({ tokens: ids('<|channel|>final<|message|>{"items":["coffee","eggs"]}<|return|>') });
    const good = await client.chat.completions.create({ ...ASK, response_format });
    expect(JSON.parse(good.choices[0]!.message.content!)).toEqual({ items: ["coffee", "eggs"] });
    expect(good).not.toHaveProperty("harmony");
    const prompt = (vllm.completions().at(-1)!.body!.prompt as number[]).map((id) => vocab.text(id)).join("");
    expect(prompt).toContain(`<|start|>developer<|message|># Response Formats\n\n## shopping_list\n\n${JSON.stringify(SHOPPING)}<|end|>`);

    vllm.script({ tokens: ids('<|channel|>final<|message|>{"items":"coffee"}<|return|>') });
    const bad = (await client.chat.completions.create({ ...ASK, response_format })) as unknown as {
      choices: { message: { content: string } }[];
      harmony?: { recoveries: { kind: string; choice: number; detail: string }[] };
    };
    expect(bad.choices[0]!.message.content).toBe('{"items":"coffee"}'); // delivered as generated
    expect(bad.harmony?.recoveries).toEqual([{ kind: "schema_mismatch", choice: 0, detail: expect.stringMatching(/must be array/) }]);

    // streamed: one chunk with no choices says so, before [DONE]
    vllm.script({ tokens: ids("<|channel|>final<|message|>Sure! Coffee and eggs.<|return|>") });
    const stream = await client.chat.completions.create({ ...ASK, response_format: { type: "json_object" }, stream: true });
    const said: unknown[] = [];
    for await (const chunk of stream) if ("harmony" in chunk) said.push((chunk as { harmony: unknown }).harmony);
    expect(said).toEqual([{ recoveries: [{ kind: "schema_mismatch", choice: 0, detail: expect.stringMatching(/not JSON/) }] }]);
  });

  it("response_format json_schema with Responses' text.format; a schema Ajv cannot compile is a 400 before the engine is asked", async () => {
    vllm.script({ tokens: ids('<|channel|>final<|message|>{"items":[1]}<|return|>') });
    const r = await client.responses.create({
      model: "gpt-oss",
      input: "coffee and eggs",
      text: { format: { type: "json_schema", name: "shopping_list", schema: SHOPPING, strict: true } },
    });
    expect(r.output_text).toBe('{"items":[1]}');
    expect((r as unknown as { harmony?: { recoveries: { kind: string }[] } }).harmony?.recoveries[0]?.kind).toBe("schema_mismatch");
    const prompt = (vllm.completions().at(-1)!.body!.prompt as number[]).map((id) => vocab.text(id)).join("");
    expect(prompt).toContain("# Response Formats\n\n## shopping_list");

    const before = vllm.completions().length;
    const err = (await client.chat.completions
      .create({ ...ASK, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "no-such-type" } } } })
      .then(
        () => null,
        (e: unknown) => e,
      )) as { status?: number; error?: { code?: string; param?: string } } | null;
    expect(err?.status).toBe(400);
    expect(err?.error).toMatchObject({ code: "bad_response_format", param: "response_format.json_schema.schema" });
    expect(vllm.completions().length).toBe(before);
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

  it("logprobs: the answer's tokens only (not reasoning, not the call), aligned with vLLM's values, streamed and not", async () => {
    const answer = "Hello there, Oslo!";
    const text = `<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>${answer}<|return|>`;
    const want = ids(answer).map((id) => ({ token: vocab.text(id), logprob: -(1 + (id % 997)) / 1000 }));
    vllm.script({ tokens: ids(text) });
    const r = await client.chat.completions.create({ ...ASK, logprobs: true, top_logprobs: 1 });
    const content = r.choices[0]!.logprobs?.content ?? [];
    expect(content.map((t) => ({ token: t.token, logprob: t.logprob }))).toEqual(want);
    expect(content.map((t) => Buffer.from(t.bytes!).toString()).join("")).toBe(answer);
    expect(content[0]!.top_logprobs).toEqual([{ token: want[0]!.token, logprob: want[0]!.logprob, bytes: content[0]!.bytes }]);
    const sent = vllm.completions().at(-1)!.body!;
    expect(sent).toMatchObject({ logprobs: 1, return_tokens_as_token_ids: true });

    vllm.script({ tokens: ids(text) });
    const streamed: { token: string; logprob: number }[] = [];
    let said = "";
    for await (const chunk of await client.chat.completions.create({ ...ASK, logprobs: true, stream: true })) {
      for (const c of chunk.choices) {
        said += c.delta.content ?? "";
        for (const t of c.logprobs?.content ?? []) streamed.push({ token: t.token, logprob: t.logprob });
      }
    }
    expect(said).toBe(answer);
    expect(streamed).toEqual(want);

    // without logprobs, none are asked of the engine
    vllm.script({ tokens: ids(text) });
    const plain = await client.chat.completions.create(ASK);
    expect(plain.choices[0]!.logprobs).toBeNull();
    expect(vllm.completions().at(-1)!.body!).not.toHaveProperty("logprobs");
  });

  it("logprobs fields it cannot use are refused by name, before the engine is asked (and Responses' are not supported yet)", async () => {
    const before = vllm.completions().length;
    for (const [extra, param] of [
      [{ top_logprobs: 2 }, "top_logprobs"],
      [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"],
      [{ logprobs: "yes" }, "logprobs"],
    ] as const) {
      const err = (await client.chat.completions.create({ ...ASK, ...(extra as object) }).then(
        () => null,
        (e: unknown) => e,
      )) as { status?: number; error?: { param?: string } } | null;
      expect(err?.status).toBe(400);
      expect(err?.error?.param).toBe(param);
    }
    const resp = (await client.responses.create({ model: "gpt-oss", input: "hi", top_logprobs: 2 }).then(
      () => null,
      (e: unknown) => e,
    )) as { status?: number; error?: { param?: string } } | null;
    expect(resp?.status).toBe(400);
    expect(resp?.error?.param).toBe("top_logprobs");
    expect(vllm.completions().length).toBe(before);
  });
});
