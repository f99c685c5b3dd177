/**
 * Issue #36: a call whose arguments the model writes in a broken-but-known
 * shape (HARMONY.md §4, rule 12) reaches a streaming client repaired. What
 * the client assembles from the deltas — the official `openai` client's
 * streams and its runTools, over the OpenAI front against the faithful vLLM
 * stand-in (test/e2e/stand-ins/vllm.ts); the bundled client's `openai.chat`
 * and `openai.responses` formats over WebSocket and gRPC — equals the
 * non-streamed answer's arguments, and is JSON.
 */
import OpenAI from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import type { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc } = harmony();
const CALL =
  "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
const ANSWER = "<|channel|>final<|message|>It is 3 °C in Kraków.<|return|>";
const PARAMETERS = { type: "object", properties: { location: { type: "string" } }, required: ["location"] };
const CHAT_TOOLS = [{ type: "function" as const, function: { name: "get_weather", parameters: PARAMETERS } }];
const RESPONSES_TOOLS = [{ type: "function" as const, name: "get_weather", strict: false, parameters: PARAMETERS }];
const ASK = { model: "gpt-oss", messages: [{ role: "user" as const, content: "Weather in Kraków?" }] };

// the load tester's rule-12 faults (src/loadtest/generate.ts: args_over_escaped, args_fenced, args_trailing_junk),
// as `loadtest --openai` found them lost in streamed Chat (docs/loadtest.md, request 595 of run full1)
const REPAIRED = '{"location":"Kraków"}';
const SHAPES: [string, string][] = [
  ["over-escaped", '{\\"location\\":\\"Kraków\\"}'],
  ["code fence", '```json\n{"location":"Kraków"}\n```'],
  ["json word", 'json{"location":"Kraków"}'],
  ["trailing brace", '{"location":"Kraków"}\n}'],
  ["trailing word", '{"location":"Kraków"} commentary'],
];

describe("a call's repaired arguments, streamed (issue #36)", () => {
  let vllm: VllmStandIn;
  let server: Server;
  let client: OpenAI;
  let ws: string;
  let grpc: string;

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 4096 });
    const s = await startTestServer({ grpcPort: 0, upstream: { url: vllm.url, idleTimeoutMs: 10_000, reasoningField: "reasoning" } });
    server = s.server;
    ws = s.ws;
    grpc = `grpc://${s.grpc}`;
    client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 });
  });

  afterAll(async () => {
    await server.stop();
    await vllm.close();
  });

  for (const [shape, args] of SHAPES) {
    it(`${shape}: Chat, streamed one id and three ids a chunk, assembles the repaired arguments`, async () => {
      for (const chunkSizes of [[1], [3]]) {
        vllm.script({ tokens: enc.encode(CALL + args + "<|call|>"), chunkSizes });
        const stream = await client.chat.completions.create({ ...ASK, tools: CHAT_TOOLS, stream: true });
        let assembled = "";
        let name = "";
        let finish: string | null = null;
        for await (const chunk of stream)
          for (const c of chunk.choices) {
            for (const t of c.delta.tool_calls ?? []) {
              assembled += t.function?.arguments ?? "";
              name += t.function?.name ?? "";
            }
            finish = c.finish_reason ?? finish;
          }
        expect({ name, assembled, finish }).toEqual({ name: "get_weather", assembled: REPAIRED, finish: "tool_calls" });
        expect(JSON.parse(assembled)).toEqual({ location: "Kraków" });
      }
      // the same as the non-streamed answer
      vllm.script({ tokens: enc.encode(CALL + args + "<|call|>") });
      const whole = await client.chat.completions.create({ ...ASK, tools: CHAT_TOOLS });
      const call = whole.choices[0]!.message.tool_calls![0]!;
      expect(call.type === "function" && call.function.arguments).toBe(REPAIRED);
    });

    it(`${shape}: Responses, streamed: the deltas, .done and the final response agree`, async () => {
      vllm.script({ tokens: enc.encode(CALL + args + "<|call|>"), chunkSizes: [2] });
      const stream = client.responses.stream({ model: "gpt-oss", input: "Weather in Kraków?", tools: RESPONSES_TOOLS });
      let deltas = "";
      const done: string[] = [];
      stream.on("response.function_call_arguments.delta", (e) => (deltas += e.delta));
      stream.on("response.function_call_arguments.done", (e) => done.push(e.arguments));
      const final = await stream.finalResponse();
      expect(deltas).toBe(REPAIRED);
      expect(done).toEqual([REPAIRED]);
      expect(final.output.find((i) => i.type === "function_call")).toMatchObject({ name: "get_weather", arguments: REPAIRED });
    });
  }

  it("runTools, streamed, over the front: the tool is called with the repaired arguments, and the answer follows", async () => {
    vllm.script({ tokens: enc.encode(CALL + SHAPES[0]![1] + "<|call|>") }, { tokens: enc.encode(ANSWER) });
    const got: unknown[] = [];
    const runner = client.chat.completions.runTools({
      ...ASK,
      stream: true,
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "The current weather for a location.",
            parameters: PARAMETERS,
            parse: JSON.parse,
            function: (a: unknown) => {
              got.push(a);
              return "3 °C";
            },
          },
        },
      ],
    });
    expect(await runner.finalContent()).toBe("It is 3 °C in Kraków.");
    expect(got).toEqual([{ location: "Kraków" }]);
  });

  for (const [edge, json] of [
    ["WebSocket, JSON frames", true],
    ["WebSocket, protobuf frames", false],
    ["gRPC", false],
  ] as const) {
    it(`the openai.chat and openai.responses formats over ${edge} stream the repaired arguments too`, async () => {
      const c = await HarmonyClient.connect(edge === "gRPC" ? grpc : ws, { json });
      try {
        for (const [shape, args] of SHAPES) {
          const ids = enc.encode(CALL + args + "<|call|>");
          const chat = c.open(`chat-${shape}`, { format: "openai.chat", model: "gpt-oss-20b" });
          const resp = c.open(`resp-${shape}`, { format: "openai.responses", model: "gpt-oss-20b" });
          for (const id of ids) {
            chat.write([id]);
            resp.write([id]);
          }
          chat.close();
          resp.close();
          const payloads = async <T>(st: typeof chat) => (await st.collect()).map((e) => (e as unknown as { payload: T }).payload);
          let assembled = "";
          for (const chunk of await payloads<ChatCompletionChunk>(chat))
            for (const ch of chunk.choices ?? []) for (const t of ch.delta.tool_calls ?? []) assembled += t.function?.arguments ?? "";
          expect(assembled, shape).toBe(REPAIRED);
          const events = await payloads<ResponseStreamEvent>(resp);
          const deltas = events.flatMap((e) => (e.type === "response.function_call_arguments.delta" ? [e.delta] : [])).join("");
          expect(deltas, shape).toBe(REPAIRED);
          expect(
            events.find((e) => e.type === "response.function_call_arguments.done"),
            shape,
          ).toMatchObject({ arguments: REPAIRED });
        }
      } finally {
        await c.close();
      }
    });
  }
});
