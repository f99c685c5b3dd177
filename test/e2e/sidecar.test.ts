/**
 * Sidecar mode end to end: the official `openai` client talks to the
 * sidecar, which drives a stand-in vLLM (test/e2e/stand-in-vllm.ts: vLLM itself
 * needs a GPU) by token ids and parses its output on the worker pool.
 */
import OpenAI from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAULT_KINDS, generateStream } from "../../src/loadtest/generate.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";
import { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";
import { startStandIn, type StandIn } from "./stand-in-vllm.js";

/** A JSON POST: the service refuses other content types (a page can send text/plain without asking). */
const JSON_BODY = { "content-type": "application/json" };

const { enc, vocab } = harmony();
// the same suite with streams on worker threads and on the main thread
describe.each([2, 0])("sidecar mode, %i worker threads", (workers) => {
  let upstream: StandIn;
  let svc: Server;
  let client: OpenAI;
  let base: string;

  beforeAll(async () => {
    upstream = await startStandIn();
    svc = new Server({
      host: "127.0.0.1",
      port: 0,
      grpcPort: -1,
      workers,
      drainTimeoutMs: 2000,
      limits: DEFAULT_LIMITS,
      logger: pino({ level: "silent" }),
      upstream: { url: upstream.url, idleTimeoutMs: 1500, reasoningField: "reasoning" },
    });
    const { port } = await svc.start();
    base = `http://127.0.0.1:${port}`;
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  afterAll(async () => {
    await svc.stop();
    await upstream.close();
  });

  const completion = (text: string) => enc.encode(text);
  const ANSWER = "<|channel|>analysis<|message|>Simple arithmetic.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
  const CALL =
    '<|channel|>analysis<|message|>Need the weather for Oslo.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';
  const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
    { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
  ];

  describe("chat completions", () => {
    it("streams reasoning and content, with finish_reason and usage", async () => {
      upstream.script({ tokens: completion(ANSWER) });
      const stream = await client.chat.completions.create({
        model: "openai/gpt-oss-20b",
        messages: [{ role: "user", content: "What is 2 + 2?" }],
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.7,
        max_tokens: 500,
      });
      let content = "";
      let reasoning = "";
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (c) {
          content += c.delta.content ?? "";
          reasoning += (c.delta as { reasoning?: string }).reasoning ?? "";
          finish = c.finish_reason ?? finish;
        }
        if (chunk.usage) usage = chunk.usage;
      }
      expect(content).toBe("2 + 2 = 4.");
      expect(reasoning).toBe("Simple arithmetic.");
      expect(finish).toBe("stop");
      expect(usage).toMatchObject({ completion_tokens: completion(ANSWER).length });
      const sent = upstream.received.at(-1)!.body;
      expect(sent).toMatchObject({
        model: "openai/gpt-oss-20b",
        stream: true,
        return_token_ids: true,
        skip_special_tokens: false,
        stop_token_ids: [200002, 200012, 199999], // <|endoftext|> too, whatever --generation-config says (#18)
        temperature: 0.7,
        max_tokens: 500,
      });
      expect((sent.prompt as number[]).slice(-2)).toEqual([200006, 173781]); // ends in <|start|>assistant
    });

    it("answers non-streaming requests, with reasoning_content when asked and n choices", async () => {
      upstream.script({ tokens: [completion(ANSWER), completion(CALL)] });
      const r = await client.chat.completions.create({
        model: "gpt-oss",
        messages: [{ role: "user", content: "hi" }],
        n: 2,
        tools: TOOLS,
        harmony: { reasoning_field: "reasoning_content" },
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
      expect(r.object).toBe("chat.completion");
      expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
      expect(r.choices[0]!.message.content).toBe("2 + 2 = 4.");
      expect((r.choices[0]!.message as { reasoning_content?: string }).reasoning_content).toBe("Simple arithmetic.");
      expect(r.choices[1]!.finish_reason).toBe("tool_calls");
      expect(r.choices[1]!.message.tool_calls![0]).toMatchObject({
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
      });
      expect(r.usage!.prompt_tokens).toBeGreaterThan(0);
    });

    it("streams tool calls through the SDK's stream helper", async () => {
      upstream.script({ tokens: completion(CALL) });
      const runner = client.chat.completions.stream({
        model: "gpt-oss",
        messages: [{ role: "user", content: "Weather in Oslo?" }],
        tools: TOOLS,
      });
      const final = await runner.finalChatCompletion();
      const msg = final.choices[0]!.message;
      expect(final.choices[0]!.finish_reason).toBe("tool_calls");
      expect(msg.tool_calls![0]!.function).toMatchObject({ name: "get_weather", arguments: '{"city":"Oslo"}' });
      expect(msg.tool_calls![0]!.id).toMatch(/^call_/);
    });

    it("real-world output: a declared tool with a space, over-escaped arguments, an engine that did not stop at <|call|>", async () => {
      // shapes from test/fixtures/realworld/ (rw-001: "functions.Web Search"; rw-018: over-escaped
      // arguments; rw-012: an engine that went on after <|call|> and wrote the tool's result itself)
      const tools = [{ type: "function" as const, function: { name: "Web Search", parameters: { type: "object", properties: {} } } }];
      const text =
        '<|channel|>commentary to=functions.Web Search <|constrain|>json<|message|>{\\"query\\":\\"Oslo\\"}<|call|>' +
        "<|start|>assistant<|channel|>final<|message|>It is sunny in Oslo.<|return|>";
      upstream.script({ tokens: completion(text) });
      const r = await client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "Oslo?" }], tools });
      const choice = r.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(choice.message.content).toBeNull(); // nothing the model invented after its call
      const call = choice.message.tool_calls![0]!;
      expect(call.type === "function" && call.function).toEqual({ name: "Web Search", arguments: '{"query":"Oslo"}' });
      // streaming: the same call, the deltas adding up to the repaired arguments (issue #36), and no answer after it
      upstream.script({ tokens: completion(text) });
      const stream = await client.chat.completions.create({
        model: "gpt-oss",
        messages: [{ role: "user", content: "Oslo?" }],
        tools,
        stream: true,
      });
      let content = "";
      let name = "";
      let args = "";
      for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta;
        content += d?.content ?? "";
        name += d?.tool_calls?.[0]?.function?.name ?? "";
        args += d?.tool_calls?.[0]?.function?.arguments ?? "";
      }
      expect([content, name, args]).toEqual(["", "Web Search", '{"query":"Oslo"}']);
    });

    it("a multi-turn tool loop whose client drops the reasoning still sends the CoT upstream", async () => {
      upstream.script({ tokens: completion(CALL) });
      const first = await client.chat.completions.create({
        model: "gpt-oss",
        messages: [{ role: "user", content: "Weather in Oslo?" }],
        tools: TOOLS,
      });
      const call = first.choices[0]!.message.tool_calls![0]!;
      upstream.script({ tokens: completion("<|channel|>final<|message|>It is 3 °C in Oslo.<|return|>") });
      // a stateless client: history rebuilt from content and tool_calls only
      const second = await client.chat.completions.create({
        model: "gpt-oss",
        tools: TOOLS,
        messages: [
          { role: "user", content: "Weather in Oslo?" },
          { role: "assistant", content: null, tool_calls: [call] },
          { role: "tool", tool_call_id: call.id, content: '{"temp_c":3}' },
        ],
      });
      expect(second.choices[0]!.message.content).toBe("It is 3 °C in Oslo.");
      const prompt = upstream.received.at(-1)!.body.prompt as number[];
      const text = decode(prompt);
      expect(text).toContain("<|channel|>analysis<|message|>Need the weather for Oslo.<|end|>");
      expect(text).toContain('to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Oslo"}<|call|>');
    });

    it("repairs fault-injected model output instead of failing: every intended tool call arrives", async () => {
      // ids outside the vocabulary are no model output an engine can send: from the engine they are a 502
      // `upstream_bad_response` (issue #31, the next test); the parser's invalid_token repair is for stream clients
      const faults = FAULT_KINDS.filter(
        (k) => !k.startsWith("truncated") && k !== "out_of_vocab_token_in_content" && k !== "invalid_id_between_messages",
      );
      let checked = 0;
      for (let i = 0; checked < 25 && i < 400; i++) {
        const s = generateStream(i, { seed: 21, faultRate: 1, faults }, enc, vocab);
        const calls = s.intended.filter((m) => m.recipient?.startsWith("functions."));
        if (calls.length === 0) continue;
        checked++;
        upstream.script({ tokens: s.tokens });
        const r = await client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "go" }], tools: TOOLS });
        const got = r.choices[0]!.message.tool_calls ?? [];
        expect(
          got.map((c) => (c.type === "function" ? [`functions.${c.function.name}`, c.function.arguments] : [c.type, c.custom.input])),
          `${s.fault} #${i}`,
        ).toEqual(calls.map((m) => [m.recipient, m.content]));
      }
      expect(checked).toBe(25);
    });

    it("an engine that sends ids outside the vocabulary gets a 502 upstream_bad_response, never a repaired answer", async () => {
      for (const fault of ["out_of_vocab_token_in_content", "invalid_id_between_messages"] as const) {
        let s = generateStream(0, { seed: 21, faultRate: 1, faults: [fault] }, enc, vocab);
        for (let i = 1; s.fault !== fault && i < 200; i++) s = generateStream(i, { seed: 21, faultRate: 1, faults: [fault] }, enc, vocab);
        expect(s.fault).toBe(fault);
        upstream.script({ tokens: s.tokens });
        const err = (await client.chat.completions.create({ model: "gpt-oss", messages: [{ role: "user", content: "go" }] }).then(
          () => null,
          (e: unknown) => e,
        )) as { status?: number; error?: { code?: string } } | null;
        expect([err?.status, err?.error?.code], fault).toEqual([502, "upstream_bad_response"]);
      }
    });
  });

  describe("responses API", () => {
    it("streams reasoning, text and function calls as Responses events", async () => {
      upstream.script({ tokens: completion(CALL) });
      const stream = client.responses.stream({
        model: "gpt-oss",
        input: "Weather in Oslo?",
        tools: [
          {
            type: "function",
            name: "get_weather",
            parameters: { type: "object", properties: { city: { type: "string" } } },
            strict: false,
          },
        ],
      });
      const types: string[] = [];
      for await (const ev of stream) types.push(ev.type);
      const final = await stream.finalResponse();
      expect(types[0]).toBe("response.created");
      expect(types).toContain("response.reasoning_text.delta");
      expect(types).toContain("response.function_call_arguments.done");
      expect(final.status).toBe("completed");
      const call = final.output.find((o) => o.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
      expect(call).toMatchObject({ name: "get_weather", arguments: '{"city":"Oslo"}' });
      expect(final.usage?.output_tokens).toBe(completion(CALL).length);
    });

    it("answers non-streaming, and continues from function_call_output items", async () => {
      upstream.script({ tokens: completion(ANSWER) });
      const r = await client.responses.create({ model: "gpt-oss", input: "What is 2 + 2?" });
      expect(r.output_text).toBe("2 + 2 = 4.");
      upstream.script({ tokens: completion("<|channel|>final<|message|>Done.<|return|>") });
      const r2 = await client.responses.create({
        model: "gpt-oss",
        input: [
          { role: "user", content: "Weather?" },
          { type: "function_call", call_id: "call_x", name: "get_weather", arguments: '{"city":"Oslo"}' },
          { type: "function_call_output", call_id: "call_x", output: '{"temp_c":3}' },
        ],
      });
      expect(r2.output_text).toBe("Done.");
      expect(decode(upstream.received.at(-1)!.body.prompt as number[])).toContain(
        '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp_c":3}<|end|>',
      );
    });
  });

  describe("upstream faults never hang and never 500", () => {
    it("passes GET /v1/models through", async () => {
      const models = await client.models.list();
      expect(models.data.map((m) => m.id)).toEqual(["openai/gpt-oss-20b"]);
    });

    it("an upstream 4xx stays a 4xx; a 5xx becomes a 502; both are OpenAI-style errors", async () => {
      upstream.script({ tokens: [], status: 400, errorBody: JSON.stringify({ object: "error", message: "max_tokens is too large" }) });
      await expect(client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({
        status: 400,
        code: "upstream_error",
      });
      upstream.script({ tokens: [], status: 500 });
      await expect(client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({
        status: 502,
      });
    });

    it("an unreachable upstream is a 502, a silent one a 504", async () => {
      const dead = new Server({
        host: "127.0.0.1",
        port: 0,
        grpcPort: -1,
        workers: 1,
        drainTimeoutMs: 1000,
        limits: DEFAULT_LIMITS,
        logger: pino({ level: "silent" }),
        upstream: { url: "http://127.0.0.1:9", idleTimeoutMs: 1000, reasoningField: "reasoning" },
      });
      const { port } = await dead.start();
      const c = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "x", maxRetries: 0 });
      await expect(c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({
        status: 502,
        code: "upstream_unreachable",
      });
      await dead.stop();
      upstream.script({ tokens: [], hang: true });
      await expect(client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({
        status: 504,
      });
    });

    it("a stream that breaks mid-way ends with an error the client sees, not a hang", async () => {
      upstream.script({ tokens: completion(ANSWER), breakAfterChunks: 3, delayMs: 30 });
      const stream = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], stream: true });
      const consume = async () => {
        for await (const _ of stream) void _;
      };
      await expect(consume()).rejects.toThrow(/upstream stream/);
    });

    it("a client that disconnects aborts the upstream request and frees its sessions", async () => {
      upstream.script({ tokens: completion(ANSWER), delayMs: 200 });
      const ctrl = new AbortController();
      const stream = await client.chat.completions.create(
        { model: "m", messages: [{ role: "user", content: "x" }], stream: true },
        { signal: ctrl.signal },
      );
      const it = stream[Symbol.asyncIterator]();
      await it.next();
      ctrl.abort();
      // polled, not slept on: each holds once the abort has gone through
      for (;;) {
        const metrics = await (await fetch(`${base}/metrics`)).text();
        if (upstream.received.at(-1)!.aborted && /^harmony_open_streams 0$/m.test(metrics)) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(upstream.received.at(-1)!.aborted).toBe(true);
    });

    it("without --upstream the OpenAI paths say so", async () => {
      const plain = new Server({
        host: "127.0.0.1",
        port: 0,
        grpcPort: -1,
        workers: 1,
        drainTimeoutMs: 1000,
        limits: DEFAULT_LIMITS,
        logger: pino({ level: "silent" }),
      });
      const { port } = await plain.start();
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", headers: JSON_BODY, body: "{}" });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("no_upstream");
      await plain.stop();
    });
  });
});

function decode(ids: number[]): string {
  let out = "";
  for (const id of ids) {
    const b = vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id));
    out += Buffer.from(b).toString("latin1");
  }
  return Buffer.from(out, "latin1").toString("utf8");
}
