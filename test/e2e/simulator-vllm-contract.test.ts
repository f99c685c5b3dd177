/**
 * The engine simulator (src/simulate/, `harmony-sidecar simulate-engine`)
 * against vLLM's contract: the cases test/e2e/vllm-contract.ts runs against
 * the faithful stand-in too, for the current wire (the stand-in's profile
 * `current`), each naming the vLLM file it mirrors (repository
 * vllm-project/vllm, at the commits test/e2e/stand-ins/vllm.ts cites). The
 * simulator decodes with the real vocabulary, so texts are gpt-oss's, not
 * the stand-in's placeholders. Then what only the simulator does: specials
 * by name, tools read from the prompt, generated calls valid for their
 * schemas, injections reported by key. Plain `fetch` to 127.0.0.1.
 */
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { renderConversationForCompletion } from "../../src/core/render.js";
import { ENGINE_FAULT_KINDS, REAL_FAULT_KINDS } from "../../src/loadtest/generate.js";
import { startSimulator, type Simulator } from "../../src/simulate/server.js";
import { harmony } from "../helpers.js";
import { chunksOf, vllmContract, type Obj } from "./vllm-contract.js";

const { enc, vocab } = harmony();
const text = (ids: number[]) =>
  ids.map((id) => new TextDecoder().decode(vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id)))).join("");

const { engine, post, events, body } = vllmContract<Simulator>({
  start: () => startSimulator({ port: 0, maxModelLen: 1000, tokensPerSecond: 0, faultRate: 0.5, seed: 3 }, enc, vocab),
  reset: (sim) => sim.script({}),
  prompt: enc.encode("<|start|>user<|message|>hi<|end|><|start|>assistant"),
  text,
  tokenize: (t) => enc.encodeOrdinary(t),
  abort: (sim, ids) => sim.script({ tokens: ids, then: "abort" }),
});

describe("what the simulator answers beside vLLM's contract", () => {
  // skip_special_tokens (default true): specials dropped from text; false: by name
  it("writes specials by name only with skip_special_tokens false", async () => {
    engine().script({ tokens: enc.encode("<|channel|>final<|message|>Hi<|return|>") });
    const named = chunksOf(await events(body()))
      .map((c) => c.choices[0].text)
      .join("");
    expect(named).toBe("<|channel|>final<|message|>Hi");
    const skipped = chunksOf(await events(body({ skip_special_tokens: undefined })))
      .map((c) => c.choices[0].text)
      .join("");
    expect(skipped).toBe("finalHi");
  });

  it("POST /detokenize: the real tokenizer's text", async () => {
    const d = (await (await post({ tokens: enc.encodeOrdinary("hello world") }, "/detokenize")).json()) as Obj;
    expect(d.prompt).toBe("hello world");
  });

  it("names each answer's id in x-simulator-request-id", async () => {
    engine().script({ tokens: [5000, 200012] });
    const res = await post(body({ stream: false, stream_options: undefined }));
    const j = (await res.json()) as Obj;
    expect(res.headers.get("x-simulator-request-id")).toBe(j.id);
  });
});

describe("generations (what only the simulator does)", () => {
  const TOOLS = [
    {
      name: "get_weather",
      description: "Get the weather.",
      parameters: {
        type: "object",
        properties: { location: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] }, days: { type: "integer" } },
        required: ["location"],
        additionalProperties: false,
      },
    },
    {
      name: "book_flight",
      description: "Book a flight.",
      parameters: {
        type: "object",
        properties: {
          origin: { type: "string" },
          passengers: { type: "object", properties: { adults: { type: "integer" } }, required: ["adults"] },
          tags: { type: "array", items: { type: "string" } },
        },
        required: ["origin", "passengers"],
      },
    },
  ];
  /** A prompt as the sidecar renders it: the tools in the developer message's namespace functions block. */
  const prompt = (key: string) =>
    enc.encode(
      renderConversationForCompletion([
        { role: "system", content: { type: "system_content", model_identity: "You are ChatGPT.", reasoning_effort: "medium" } },
        { role: "developer", content: { type: "developer_content", tools: { functions: { name: "functions", tools: TOOLS } } } },
        { role: "user", content: `Weather? (harmony-loadtest run=contract request=${key})` },
      ]),
    );

  it("calls only the tools the prompt declares, with arguments valid for their schemas, and reports it by key", async () => {
    engine().script();
    const ajv = new Ajv({ strict: false });
    const validators = new Map(TOOLS.map((t) => [t.name, ajv.compile(t.parameters)]));
    let calls = 0;
    for (let i = 0; i < 40; i++) {
      const res = await post(body({ prompt: prompt(String(i)), stream: false, stream_options: undefined, max_tokens: 600 }));
      expect(res.status).toBe(200);
      const j = (await res.json()) as Obj;
      const rec = (await (await fetch(`${engine().url}/simulate/requests?key=${encodeURIComponent(`contract/${i}`)}`)).json()) as Obj;
      expect(rec).toMatchObject({ id: j.id, key: `contract/${i}`, endpoint: "completions", tools: ["get_weather", "book_flight"] });
      const c = rec.choices[0];
      expect(c.tokens).toBe(j.choices[0].token_ids.length);
      for (const call of c.intent.calls as { name: string; arguments: string }[]) {
        calls++;
        const v = validators.get(call.name);
        expect(v, call.name).toBeDefined();
        expect(v!(JSON.parse(call.arguments)), `${call.name} ${call.arguments}`).toBe(true);
      }
    }
    expect(calls).toBeGreaterThan(10);
    // a key samples the same generation every time
    const first = (await (await fetch(`${engine().url}/simulate/requests?key=contract/7`)).json()) as Obj;
    const again = (await (
      await post(body({ prompt: prompt("7"), stream: false, stream_options: undefined, max_tokens: 600 }))
    ).json()) as Obj;
    const second = (await (await fetch(`${engine().url}/simulate/requests?key=contract/7`)).json()) as Obj;
    expect(second.id).toBe(again.id);
    expect(second.id).not.toBe(first.id);
    expect(second.choices).toEqual(first.choices);
    const run = (await (await fetch(`${engine().url}/simulate/requests?run=contract`)).json()) as Obj;
    expect(run.data).toHaveLength(40);
  });

  it("answers without calling when the prompt declares no tools", async () => {
    engine().script();
    for (let i = 0; i < 10; i++) {
      await (
        await post(
          body({
            prompt: enc.encode(`<|start|>user<|message|>(harmony-loadtest run=notools request=${i})<|end|><|start|>assistant`),
            max_tokens: 600,
          }),
        )
      ).text();
    }
    const run = (await (await fetch(`${engine().url}/simulate/requests?run=notools`)).json()) as Obj;
    expect(run.data).toHaveLength(10);
    for (const r of run.data as Obj[]) expect(r.choices[0].intent.calls).toEqual([]);
  });

  it("serves Chat and Responses raw: the same generation as text, control tokens included, no parsed calls", async () => {
    engine().script();
    const key = "(harmony-loadtest run=raw request=1)";
    const tools = [{ type: "function", function: TOOLS[0] }];
    const chat = (await (
      await post({ model: "openai/gpt-oss-20b", messages: [{ role: "user", content: `Weather? ${key}` }], tools }, "/v1/chat/completions")
    ).json()) as Obj;
    expect(chat.object).toBe("chat.completion");
    const content: string = chat.choices[0].message.content;
    expect(content.startsWith("<|channel|>")).toBe(true); // the prompt ended in <|start|>assistant
    expect(chat.choices[0].message.tool_calls).toEqual([]);
    const rec = (await (await fetch(`${engine().url}/simulate/requests?id=${chat.id}`)).json()) as Obj;
    expect(rec).toMatchObject({ key: "raw/1", endpoint: "chat", tools: ["get_weather"] });
    const res = await post(
      {
        model: "openai/gpt-oss-20b",
        input: `Weather? ${key.replace("request=1", "request=2")}`,
        tools: [{ type: "function", ...TOOLS[0] }],
        stream: true,
      },
      "/v1/responses",
    );
    const types = (await res.text())
      .split("\n\n")
      .filter((b) => b.startsWith("event: "))
      .map((b) => b.slice(7, b.indexOf("\n")));
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_text.delta");
    expect(["response.completed", "response.incomplete"]).toContain(types.at(-1));
  });

  it("offers every real-world shape by default, but no id outside the vocabulary", () => {
    expect(ENGINE_FAULT_KINDS).toEqual(expect.arrayContaining([...REAL_FAULT_KINDS]));
    expect(ENGINE_FAULT_KINDS).not.toContain("out_of_vocab_token_in_content");
    expect(ENGINE_FAULT_KINDS).not.toContain("invalid_id_between_messages");
  });
});
