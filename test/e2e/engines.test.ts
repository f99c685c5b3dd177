/**
 * The four engines behind --upstream-kind (issues #18 and #31): vLLM, SGLang,
 * TensorRT-LLM's trtllm-serve and llama.cpp's llama-server, each against a
 * stand-in written from its source (test/e2e/stand-ins/*.ts cite the files;
 * docs/engines.md too), and the same suite for each: the engine driven
 * directly (`createEngine(kind, cfg).stream(...)`: the body sent, ids,
 * finish, usage, errors), then the whole server (`Server` with that
 * `upstreamKind`) through the official `openai` client: chat and Responses,
 * streaming and not, a tool call, a malformed completion repaired, a request
 * without max_tokens, null sampling fields, emoji and CJK and combining marks,
 * stop strings, an engine started with --api-key, and /metrics scraped whole.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FLAG_WHOLE } from "../../src/core/vocab.js";
import type { Server } from "../../src/server.js";
import {
  UpstreamError,
  type CompletionRequest,
  type Engine,
  type EngineVocabulary,
  type UpstreamChunk,
  type UpstreamConfig,
} from "../../src/upstream/engine.js";
import { AutoEngine, createEngine, probeEngineKind, type ConcreteEngineKind } from "../../src/upstream/index.js";
import { expositionProblem } from "../../src/upstream/metrics.js";
import { ENGINE_RULES } from "../../src/upstream/request.js";
import { harmony } from "../helpers.js";
import { startLlamacpp, type LlamacppConfig, type LlamacppStandIn } from "./stand-ins/llamacpp.js";
import { startSglang, type SglangConfig, type SglangStandIn } from "./stand-ins/sglang.js";
import { startTrtllm, type TrtllmConfig, type TrtllmStandIn } from "./stand-ins/trtllm.js";
import { startVllm, type VllmConfig, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc } = harmony();
const ids = (text: string) => enc.encode(text);
/** An id's bytes in o200k_harmony. */
const bytesOf = (id: number) => enc.table.bytes.subarray(enc.table.offsets[id]!, enc.table.offsets[id + 1]!);
const VOCAB: EngineVocabulary = {
  table: enc.table,
  firstSpecial: enc.preset.firstSpecial,
  specials: enc.preset.specials,
  encode: (t) => enc.encode(t),
  encodeOrdinary: (t) => enc.encodeOrdinary(t),
};
const CTX = 4096;
const KEY = "engine-secret";
const TOOLS = [
  {
    type: "function" as const,
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  },
];
const ASK = { model: "gpt-oss", messages: [{ role: "user" as const, content: "Weather in Oslo?" }] };
const LONG = "The weather in Oslo is mild and clear today, ".repeat(4);
const ANSWER = "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>" + LONG + "<|return|>";
const CALL =
  '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';
const MALFORMED =
  "<|channel|>analysis<|message|>Call the tool.<|end|>" +
  '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|><|start|>assistant<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>';
/** Characters of more than one byte, several split across ids: emoji (with variation selectors and ZWJ), CJK, combining marks. */
const WIDE = "Sunny ☀️ today 🫠, 喵喵喵 says the cat; café and cafe\u0301, family 👩‍👩‍👧, flag 🇳🇴, math 𝔸𝔹!";
const WIDE_ANSWER =
  "<|channel|>analysis<|message|>Weather ☀️ and 喵.<|end|><|start|>assistant<|channel|>final<|message|>" + WIDE + "<|return|>";
/** A stop string that is in the reasoning and in the answer. */
const STOPPED =
  "<|channel|>analysis<|message|>I will say END at the end.<|end|><|start|>assistant<|channel|>final<|message|>Mild and clear. END of report.<|return|>";

/** How a stand-in is started, whichever it is. */
interface RigOptions {
  apiKey?: string;
  model?: string;
  version?: string;
  metricsOff?: boolean;
}

/** One engine and its stand-in, seen the same way by every test. */
interface Rig {
  kind: ConcreteEngineKind;
  url: string;
  script(tokens: number[], extra?: Record<string, unknown>): void;
  /** The body of the last generation request the stand-in got. */
  sent(): Record<string, unknown>;
  /** Its headers. */
  sentHeaders(): Record<string, unknown>;
  /** The token limit that body carries (`max_tokens`, or llama.cpp's `n_predict`). */
  limit(): unknown;
  /** Ids the engine gives back for a script that ends in `stop` (TensorRT-LLM drops the end id). */
  expected(script: number[]): number[];
  /** Script extras for an engine-side abort after `k` ids. */
  abort(k: number): Record<string, unknown>;
  /** Config extras for an engine too old to return ids, and what the 502 says. */
  old: { extra: Record<string, unknown>; message: RegExp };
  /** Whether the engine has an --api-key (trtllm-serve registers no auth middleware). */
  keyed: boolean;
  /** A series of the engine's own, as its /metrics names it. */
  series: string;
  /** Every path the stand-in was asked. */
  paths(): string[];
  close(): Promise<void>;
}

/** What every stand-in gives alike: its URL, its script, what it was sent last (`limitField`: the body's token limit), its paths, closing. */
function recorded(
  s: {
    url: string;
    script(x: { tokens: number[] }): void;
    completions(): { body?: Record<string, unknown>; headers: Record<string, unknown> }[];
    received: { path: string }[];
    close(): Promise<void>;
  },
  limitField: string,
): Pick<Rig, "url" | "script" | "sent" | "sentHeaders" | "limit" | "paths" | "close"> {
  const last = () => s.completions().at(-1)!;
  return {
    url: s.url,
    script: (tokens, extra = {}) => s.script({ tokens, ...extra }),
    sent: () => last().body!,
    sentHeaders: () => last().headers,
    limit: () => last().body![limitField],
    paths: () => s.received.map((r) => r.path),
    close: () => s.close(),
  };
}

async function vllmRig(o: RigOptions = {}): Promise<Rig> {
  const c: Partial<VllmConfig> = { maxModelLen: CTX, apiKey: o.apiKey ?? null };
  if (o.model) c.servedModelName = c.modelRoot = o.model;
  if (o.version) c.version = o.version;
  // the completion's text as vLLM decodes it (stop strings are looked for in it)
  c.decode = (id) => (id >= 199998 ? specialName(id) : Buffer.from(bytesOf(id)).toString("utf8"));
  const s: VllmStandIn = await startVllm(c);
  return {
    kind: "vllm",
    ...recorded(s, "max_tokens"),
    expected: (t) => t,
    abort: (k) => ({ abortAfter: k }),
    old: { extra: { config: { profile: "v0.10.0" } }, message: /does not return token ids; vLLM ≥ 0\.10\.2 needed/ },
    keyed: true,
    series: "vllm:num_requests_running",
  };
}

function specialName(id: number): string {
  for (const [text, sid] of Object.entries(enc.preset.specials)) if (sid === id) return text;
  return `<|reserved_${id}|>`;
}

async function sglangRig(o: RigOptions = {}): Promise<Rig> {
  const c: Partial<SglangConfig> = { contextLength: CTX, apiKey: o.apiKey ?? null, enableMetrics: !o.metricsOff };
  if (o.model) c.servedModelName = o.model;
  const s: SglangStandIn = await startSglang(c);
  return {
    kind: "sglang",
    ...recorded(s, "max_tokens"),
    expected: (t) => t,
    abort: (k) => ({ abortAfter: k }),
    old: { extra: { config: { profile: "old" } }, message: /does not return token ids; an SGLang with return_token_ids/ },
    keyed: true,
    series: "sglang:num_running_reqs",
  };
}

async function trtllmRig(o: RigOptions = {}): Promise<Rig> {
  const c: Partial<TrtllmConfig> = { maxSeqLen: CTX, returnPerfMetrics: !o.metricsOff };
  if (o.model) c.model = o.model;
  if (o.version) c.version = o.version;
  const s: TrtllmStandIn = await startTrtllm(c);
  return {
    kind: "trtllm",
    ...recorded(s, "max_tokens"),
    expected: (t) => (t.at(-1) === 200002 ? t.slice(0, -1) : t),
    abort: (k) => ({ cancelAfter: k }),
    old: {
      extra: { config: { profile: "old" } },
      message: /does not return token ids; a trtllm-serve whose \/v1\/completions takes detokenize/,
    },
    keyed: false,
    series: "trtllm_num_requests_running",
  };
}

async function llamacppRig(o: RigOptions = {}, extra: Partial<LlamacppConfig> = {}): Promise<Rig> {
  const c: Partial<LlamacppConfig> = { nCtx: CTX, apiKey: o.apiKey ?? null, metrics: !o.metricsOff, pieceBytes: bytesOf, ...extra };
  if (o.model) c.model = o.model;
  const s: LlamacppStandIn = await startLlamacpp(c);
  return {
    kind: "llamacpp",
    ...recorded(s, "n_predict"),
    expected: (t) => t,
    abort: (k) => ({ errorAfter: k }),
    old: {
      extra: { config: { profile: "old" } },
      message: /does not return token ids; a llama-server whose \/completion takes return_tokens/,
    },
    keyed: true,
    series: "llamacpp:prompt_tokens_total",
  };
}

const RIGS = { vllm: vllmRig, sglang: sglangRig, trtllm: trtllmRig, llamacpp: llamacppRig } as const;

function cfgFor(url: string, extra: Partial<UpstreamConfig> = {}): UpstreamConfig {
  return { url, idleTimeoutMs: 2000, reasoningField: "reasoning", vocab: VOCAB, ...extra };
}

function request(prompt: number[], extra: Partial<CompletionRequest> = {}): CompletionRequest {
  return { client: { model: "gpt-oss" }, prompt, n: 1, maxTokens: undefined, ...extra };
}

async function collect(engine: Engine, r: CompletionRequest): Promise<UpstreamChunk[]> {
  const out: UpstreamChunk[] = [];
  await engine.stream(r, new AbortController().signal, (c) => void out.push(c));
  return out;
}

const idsOf = (chunks: UpstreamChunk[], choice = 0) =>
  chunks.flatMap((c) => c.choices.filter((x) => x.index === choice).flatMap((x) => x.token_ids));
const finishOf = (chunks: UpstreamChunk[], choice = 0) =>
  chunks.flatMap((c) => c.choices.filter((x) => x.index === choice && x.finish_reason !== null).map((x) => x.finish_reason));

/** The whole server (the front, /metrics, /readyz) over `kind` at `url`, on 127.0.0.1:0. */
async function startFront(
  kind: ConcreteEngineKind | "auto",
  cfg: UpstreamConfig,
): Promise<{ client: OpenAI; base: string; server: Server; close(): Promise<void> }> {
  const s = await startTestServer({ grpcPort: -1, upstream: cfg, upstreamKind: kind });
  return {
    client: new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-local", maxRetries: 0 }),
    base: s.http,
    server: s.server,
    close: () => s.server.stop(),
  };
}

/** The error a call fails with (null: it did not fail). */
async function failure(p: Promise<unknown>): Promise<{ status?: number; error?: { message?: string; code?: string } } | null> {
  return p.then(
    () => null,
    (e: unknown) => e as { status?: number; error?: { message?: string; code?: string } },
  );
}

/** Poll `f` until it holds, within a deadline set here (generous: tests run on slow machines too). */
async function until(f: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error("the condition did not hold in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each([["vllm"], ["sglang"], ["trtllm"], ["llamacpp"]] as const)("the %s engine", (kind) => {
  let rig: Rig;
  let engine: Engine;
  let front: Awaited<ReturnType<typeof startFront>>;
  const prompt = ids("<|start|>user<|message|>Weather in Oslo?<|end|><|start|>assistant");

  beforeAll(async () => {
    rig = await RIGS[kind]();
    engine = createEngine(rig.kind, cfgFor(rig.url));
    front = await startFront(rig.kind, cfgFor(rig.url));
  });

  afterAll(async () => {
    await front.close();
    await rig.close();
  });

  describe("driven directly", () => {
    it("streams the generated ids, a stop finish and usage", async () => {
      const script = ids(ANSWER);
      rig.script(script);
      const chunks = await collect(engine, request(prompt));
      expect(idsOf(chunks)).toEqual(rig.expected(script));
      expect(finishOf(chunks)).toEqual(["stop"]);
      const usage = chunks.map((c) => c.usage).find((u) => u !== null);
      expect(usage).toMatchObject({ prompt_tokens: prompt.length });
      expect(usage!.completion_tokens).toBeGreaterThan(16);
      // token ids asked for, Harmony's stop ids where the engine takes them
      const sent = rig.sent();
      expect(sent.prompt).toEqual(prompt);
      expect(sent.stream).toBe(true);
      if (rig.kind === "llamacpp")
        expect(sent).toMatchObject({ return_tokens: true, preserved_tokens: expect.arrayContaining(["<|channel|>", "<|call|>"]) });
      else expect(sent.stop_token_ids).toEqual([200002, 200012, 199999]);
      if (rig.kind === "sglang" || rig.kind === "vllm") expect(sent.return_token_ids).toBe(true);
      if (rig.kind === "trtllm") expect(sent).toMatchObject({ detokenize: false, include_stop_str_in_output: true, model: "gpt-oss-20b" });
    });

    it("keeps the stop id <|call|> in the ids", async () => {
      const script = ids(CALL);
      rig.script(script);
      const got = idsOf(await collect(engine, request(prompt)));
      expect(got.at(-1)).toBe(200012);
    });

    it("without a client limit, asks for what the context leaves (or lets the engine fill it)", async () => {
      rig.script(ids(ANSWER));
      await collect(engine, request(prompt));
      const expected = { vllm: CTX - prompt.length, sglang: CTX - prompt.length - 1, trtllm: undefined, llamacpp: CTX - prompt.length }[
        rig.kind
      ];
      expect(rig.limit()).toBe(expected);
    });

    it("passes the client's limit and ends on length", async () => {
      rig.script(ids(ANSWER));
      const chunks = await collect(engine, request(prompt, { maxTokens: 5 }));
      expect(rig.limit()).toBe(5);
      expect(idsOf(chunks)).toHaveLength(5);
      expect(finishOf(chunks)).toEqual(["length"]);
    });

    it("passes sampling fields it takes, under its own names", async () => {
      rig.script(ids(ANSWER));
      await collect(
        engine,
        request(prompt, { client: { model: "gpt-oss", temperature: 0.5, top_p: 0.9, seed: 7, repetition_penalty: 1.1 } }),
      );
      const sent = rig.sent();
      expect(sent).toMatchObject({ temperature: 0.5, top_p: 0.9, seed: 7 });
      expect(rig.kind === "llamacpp" ? sent.repeat_penalty : sent.repetition_penalty).toBe(1.1);
    });

    it("sends no null and no stop string: the engine's rules (src/upstream/request.ts) say which nulls it would refuse", async () => {
      const nulls = {
        model: "gpt-oss",
        temperature: null,
        top_p: null,
        top_k: null,
        min_p: null,
        presence_penalty: null,
        frequency_penalty: null,
        repetition_penalty: null,
        seed: null,
        logit_bias: null,
        user: null,
        stop: ["END"],
      };
      rig.script(ids(ANSWER));
      const chunks = await collect(engine, request(prompt, { client: nulls }));
      expect(finishOf(chunks)).toEqual(["stop"]);
      const sent = rig.sent();
      expect(Object.entries(sent).filter(([, v]) => v === null)).toEqual([]);
      expect(sent.stop).toBeUndefined();
      // what the engine does with a null, from its source (the stand-ins' headers cite it): each field
      // the rules name is refused by the engine itself
      for (const field of ENGINE_RULES[rig.kind].refusesNull) {
        const res = await fetch(`${rig.url}${ENGINE_RULES[rig.kind].endpoint}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...sent, [field]: null }),
        });
        expect(res.status, field).toBe(400);
      }
    });

    it("an engine-side abort or error is never a clean stop", async () => {
      rig.script(ids(CALL), rig.abort(4));
      const chunks = await collect(engine, request(prompt)).catch((e: unknown) => e);
      if (chunks instanceof UpstreamError) expect(chunks.status).toBe(502);
      else expect(finishOf(chunks as UpstreamChunk[])).toEqual(["abort"]);
    });

    it("an engine that cannot return ids is a 502 that says why", async () => {
      rig.script(ids(ANSWER), rig.old.extra);
      const err = (await collect(engine, request(prompt)).catch((e: unknown) => e)) as UpstreamError;
      expect(err).toBeInstanceOf(UpstreamError);
      expect(err.status).toBe(502);
      expect(err.message).toMatch(rig.old.message);
    });

    it("a limit beyond the context is refused before the engine runs (TensorRT-LLM lowers it itself)", async () => {
      rig.script(ids(ANSWER));
      if (rig.kind === "trtllm") {
        const chunks = await collect(engine, request(prompt, { maxTokens: CTX * 2 }));
        expect(finishOf(chunks)).toEqual(["stop"]);
        return;
      }
      const err = (await collect(engine, request(prompt, { maxTokens: CTX })).catch((e: unknown) => e)) as UpstreamError;
      expect(err).toBeInstanceOf(UpstreamError);
      expect(err).toMatchObject({ status: 400, code: "context_length_exceeded" });
    });

    it("n > 1: several choices, or a 400 where one request cannot give them apart", async () => {
      rig.script(ids(ANSWER));
      if (rig.kind === "llamacpp" || rig.kind === "trtllm") {
        const err = (await collect(engine, request(prompt, { n: 2 })).catch((e: unknown) => e)) as UpstreamError;
        expect(err).toMatchObject({ status: 400 });
        expect(err.message).toMatch(/n must be 1/);
        return;
      }
      const chunks = await collect(engine, request(prompt, { n: 2 }));
      expect(finishOf(chunks, 0)).toEqual(["stop"]);
      expect(finishOf(chunks, 1)).toEqual(["stop"]);
      expect(idsOf(chunks, 1)).toEqual(ids(ANSWER));
    });
  });

  describe("through the OpenAI front", () => {
    it("chat without max_tokens returns the whole answer", async () => {
      rig.script(ids(ANSWER));
      const r = await front.client.chat.completions.create(ASK);
      expect(r.choices[0]!.message.content).toBe(LONG);
      expect(r.choices[0]!.finish_reason).toBe("stop");
      expect(r.usage?.prompt_tokens).toBeGreaterThan(0);
    });

    it("chat, streaming", async () => {
      rig.script(ids(ANSWER));
      const stream = await front.client.chat.completions.create({ ...ASK, stream: true, stream_options: { include_usage: true } });
      let content = "";
      const finishes: string[] = [];
      let usage: unknown = null;
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          content += c.delta.content ?? "";
          if (c.finish_reason) finishes.push(c.finish_reason);
        }
        if (chunk.usage) usage = chunk.usage;
      }
      expect(content).toBe(LONG);
      expect(finishes).toEqual(["stop"]);
      expect(usage).toMatchObject({ prompt_tokens: expect.any(Number) });
    });

    it("null sampling fields, which OpenAI takes as its defaults, are a 200 (never the engine's 400)", async () => {
      rig.script(ids(ANSWER));
      const r = await front.client.chat.completions.create({
        ...ASK,
        temperature: null,
        top_p: null,
        presence_penalty: null,
        frequency_penalty: null,
        seed: null,
        logit_bias: null,
        stop: null,
        max_tokens: null,
      });
      expect(r.choices[0]!.message.content).toBe(LONG);
      expect(Object.entries(rig.sent()).filter(([, v]) => v === null)).toEqual([]);
    });

    it("emoji, CJK and combining marks come out byte for byte, streamed and not", async () => {
      const script = ids(WIDE_ANSWER);
      // the script has ids whose bytes end inside a character: the case llama-server holds back
      expect(script.filter((id) => (enc.table.flags[id]! & FLAG_WHOLE) === 0).length).toBeGreaterThan(2);
      rig.script(script);
      const r = await front.client.chat.completions.create(ASK);
      expect(r.choices[0]!.message.content).toBe(WIDE);
      expect((r.choices[0]!.message as { reasoning?: string }).reasoning).toBe("Weather ☀️ and 喵.");
      rig.script(script);
      const stream = await front.client.chat.completions.create({ ...ASK, stream: true });
      let content = "";
      for await (const chunk of stream) for (const c of chunk.choices) content += c.delta.content ?? "";
      expect(content).toBe(WIDE);
    });

    it("stop strings end the answer before the first one, never the reasoning, and never reach the engine", async () => {
      rig.script(ids(STOPPED));
      const r = await front.client.chat.completions.create({ ...ASK, stop: ["END", "never"] });
      expect(r.choices[0]!.message.content).toBe("Mild and clear. ");
      expect(r.choices[0]!.finish_reason).toBe("stop");
      expect((r.choices[0]!.message as { reasoning?: string }).reasoning).toBe("I will say END at the end.");
      expect(rig.sent().stop).toBeUndefined();
      rig.script(ids(STOPPED));
      const stream = await front.client.chat.completions.create({ ...ASK, stop: "END", stream: true });
      let content = "";
      let reasoning = "";
      const finishes: string[] = [];
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          content += c.delta.content ?? "";
          reasoning += (c.delta as { reasoning?: string }).reasoning ?? "";
          if (c.finish_reason) finishes.push(c.finish_reason);
        }
      }
      expect([content, reasoning, finishes]).toEqual(["Mild and clear. ", "I will say END at the end.", ["stop"]]);
    });

    it("a tool call, streamed and not", async () => {
      rig.script(ids(CALL));
      const r = await front.client.chat.completions.create({ ...ASK, tools: TOOLS });
      expect(r.choices[0]!.finish_reason).toBe("tool_calls");
      const call = r.choices[0]!.message.tool_calls![0]!;
      expect(call.type === "function" && call.function.name).toBe("get_weather");
      expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: "Oslo" });

      rig.script(ids(CALL));
      const stream = await front.client.chat.completions.create({ ...ASK, tools: TOOLS, stream: true });
      let args = "";
      let name = "";
      const finishes: string[] = [];
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          for (const t of c.delta.tool_calls ?? []) {
            name += t.function?.name ?? "";
            args += t.function?.arguments ?? "";
          }
          if (c.finish_reason) finishes.push(c.finish_reason);
        }
      }
      expect(name).toBe("get_weather");
      expect(JSON.parse(args)).toEqual({ city: "Oslo" });
      expect(finishes).toEqual(["tool_calls"]);
    });

    it("a malformed completion (an abandoned tool-call header) is repaired into the call", async () => {
      rig.script(ids(MALFORMED));
      const r = await front.client.chat.completions.create({ ...ASK, tools: TOOLS });
      const call = r.choices[0]!.message.tool_calls?.[0];
      expect(call && call.type === "function" && call.function.name).toBe("get_weather");
      expect(call && call.type === "function" && JSON.parse(call.function.arguments)).toEqual({ city: "Oslo" });
      expect(r.choices[0]!.finish_reason).toBe("tool_calls");
    });

    it("Responses, not streaming and streaming", async () => {
      rig.script(ids(ANSWER));
      const r = await front.client.responses.create({ model: "gpt-oss", input: "Weather in Oslo?" });
      expect(r.status).toBe("completed");
      expect(r.output_text).toBe(LONG);

      rig.script(ids(ANSWER));
      const stream = await front.client.responses.create({ model: "gpt-oss", input: "Weather in Oslo?", stream: true });
      let text = "";
      let last = "";
      for await (const ev of stream) {
        if (ev.type === "response.output_text.delta") text += ev.delta;
        last = ev.type;
      }
      expect(text).toBe(LONG);
      expect(last).toBe("response.completed");
    });

    it("a Responses tool call", async () => {
      rig.script(ids(CALL));
      const r = await front.client.responses.create({
        model: "gpt-oss",
        input: "Weather in Oslo?",
        tools: [{ type: "function", name: "get_weather", parameters: TOOLS[0]!.function.parameters, strict: false }],
      });
      const call = r.output.find((o) => o.type === "function_call");
      expect(call && call.type === "function_call" && call.name).toBe("get_weather");
      expect(call && call.type === "function_call" && JSON.parse(call.arguments)).toEqual({ city: "Oslo" });
    });

    it("an engine too old for token ids is a 502 that says why", async () => {
      rig.script(ids(ANSWER), rig.old.extra);
      const err = await failure(front.client.chat.completions.create(ASK));
      expect(err?.status).toBe(502);
      expect(err?.error?.message).toMatch(rig.old.message);
    });

    it("the model list is the engine's", async () => {
      const list = await front.client.models.list();
      expect(list.data.length).toBeGreaterThan(0);
    });

    it("/metrics holds the engine's series and the sidecar's, as one scrape that parses whole", async () => {
      const text = await (await fetch(`${front.base}/metrics`)).text();
      expect(expositionProblem(text, null)).toBeNull();
      expect(text).toContain(rig.series);
      expect(text).toMatch(/^harmony_tokens_total/m);
      // the engine's Prometheus endpoint was read, by its own path (trtllm-serve's /metrics is JSON iteration stats)
      expect(rig.paths()).toContain(ENGINE_RULES[rig.kind].metricsPath);
      if (rig.kind === "trtllm") {
        expect(rig.paths()).not.toContain("/metrics");
        expect(await (await fetch(`${rig.url}/metrics`)).json()).toEqual(expect.any(Array));
      }
    });
  });
});

describe.each([["vllm"], ["sglang"], ["trtllm"], ["llamacpp"]] as const)("the %s engine with --api-key", (kind) => {
  let rig: Rig;
  beforeAll(async () => {
    rig = await RIGS[kind]({ apiKey: KEY });
  });
  afterAll(async () => {
    await rig.close();
  });

  it("without --upstream-api-key the client gets a 502 that names the setting; with it, the answer", async () => {
    if (rig.keyed) {
      // the engine's own rule (the stand-ins cite it): the generation endpoint needs the key
      const res = await fetch(`${rig.url}${ENGINE_RULES[rig.kind].endpoint}`, {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" },
      });
      expect(res.status).toBe(401);
      const without = await startFront(rig.kind, cfgFor(rig.url));
      try {
        rig.script(ids(ANSWER));
        const err = await failure(without.client.chat.completions.create(ASK));
        expect([err?.status, err?.error?.code]).toEqual([502, "upstream_unauthorized"]);
        expect(err?.error?.message).toMatch(/--upstream-api-key/);
      } finally {
        await without.close();
      }
    }
    const keyed = await startFront(rig.kind, cfgFor(rig.url, { apiKey: KEY }));
    try {
      rig.script(ids(ANSWER));
      const r = await keyed.client.chat.completions.create(ASK);
      expect(r.choices[0]!.message.content).toBe(LONG);
      expect(rig.sentHeaders().authorization).toBe(`Bearer ${KEY}`);
      const metrics = await (await fetch(`${keyed.base}/metrics`)).text();
      expect(metrics).toContain(rig.series);
      // a path proxied to the engine carries the engine's key in place of the client's
      rig.script(ids(ANSWER));
      const proxied = await fetch(`${keyed.base}${ENGINE_RULES[rig.kind].endpoint}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer the-clients-own" },
        body: JSON.stringify(rig.sent()),
      });
      expect(proxied.status).toBe(200);
      await proxied.text();
      expect(rig.sentHeaders().authorization).toBe(`Bearer ${KEY}`);
    } finally {
      await keyed.close();
    }
  });

  it("auto probes with the key and finds the engine; without it, a 502 that says so", async () => {
    expect(await probeEngineKind(cfgFor(rig.url, { apiKey: KEY }))).toBe(rig.kind);
    if (!rig.keyed) return;
    const auto = new AutoEngine(cfgFor(rig.url));
    rig.script(ids(ANSWER));
    const err = (await collect(auto, request(ids("<|start|>user<|message|>Hi<|end|><|start|>assistant"))).catch(
      (e: unknown) => e,
    )) as UpstreamError;
    expect(err).toBeInstanceOf(UpstreamError);
    expect([err.status, err.code]).toEqual([502, "upstream_unauthorized"]);
  });
});

describe("/readyz and the engine", () => {
  it.each([["vllm"], ["sglang"], ["trtllm"], ["llamacpp"]] as const)(
    "%s: with --upstream-readiness, /readyz follows the engine's health check",
    async (kind) => {
      const rig = await RIGS[kind]();
      const front = await startFront(kind, cfgFor(rig.url, { readiness: true, healthIntervalMs: 100 }));
      try {
        const readyz = async () => {
          const res = await fetch(`${front.base}/readyz`);
          return { status: res.status, body: (await res.json()) as { upstream: { healthy: boolean; kind: string; harmony: boolean } } };
        };
        await until(async () => (await readyz()).status === 200);
        expect((await readyz()).body.upstream).toMatchObject({ healthy: true, kind, harmony: true });
        await rig.close();
        await until(async () => (await readyz()).status === 503);
        expect((await readyz()).body.upstream).toMatchObject({ healthy: false, reachable: false });
      } finally {
        await front.close();
        await rig.close().catch(() => undefined);
      }
    },
  );

  it("without it (the default), /readyz stays ready while the engine is down, and says so", async () => {
    const rig = await vllmRig();
    const front = await startFront("vllm", cfgFor(rig.url));
    try {
      await rig.close();
      const res = await fetch(`${front.base}/readyz`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { upstream: { follows: boolean } }).upstream.follows).toBe(false);
    } finally {
      await front.close();
    }
  });

  it("a model that is not a Harmony model: a warning in /readyz, the log and harmony_upstream_info", async () => {
    for (const [kind, model] of [
      ["vllm", "Qwen/Qwen3-8B"],
      ["llamacpp", "qwen3-8b-q4_k_m.gguf"],
    ] as const) {
      const rig = await RIGS[kind]({ model });
      const front = await startFront(kind, cfgFor(rig.url));
      try {
        const detail = async () =>
          ((await (await fetch(`${front.base}/readyz`)).json()) as { upstream: { harmony: boolean | null; warnings: string[] } }).upstream;
        await until(async () => (await detail()).harmony !== null);
        const d = await detail();
        expect(d.harmony, kind).toBe(false);
        expect(d.warnings.join(" ")).toMatch(/not a Harmony model/);
        const metrics = await (await fetch(`${front.base}/metrics`)).text();
        expect(metrics).toMatch(/harmony_upstream_info\{[^}]*harmony="false"/);
      } finally {
        await front.close();
        await rig.close();
      }
    }
  });

  it("a vLLM older than 0.10.2 (its /version): an error at start-up that says what will fail", async () => {
    const rig = await vllmRig({ version: "0.10.1" });
    const front = await startFront("vllm", cfgFor(rig.url));
    try {
      const detail = async () =>
        ((await (await fetch(`${front.base}/readyz`)).json()) as { upstream: { version: string | null; warnings: string[] } }).upstream;
      await until(async () => (await detail()).version !== null);
      expect((await detail()).warnings.join(" ")).toMatch(/vLLM 0\.10\.1 is older than 0\.10\.2/);
    } finally {
      await front.close();
      await rig.close();
    }
  });
});

describe("what the engines do that the rules guard against (each from the stand-in's source)", () => {
  const prompt = ids("<|start|>user<|message|>Weather in Oslo?<|end|><|start|>assistant");

  it("vLLM applies a stop string to the whole completion's text: sent to it, `stop` would cut the reasoning", async () => {
    const rig = await vllmRig();
    try {
      rig.script(ids(STOPPED));
      // detokenizer.py @ e372329d: the stop strings are looked for in output_text, reasoning included
      const res = await fetch(`${rig.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "openai/gpt-oss-20b",
          prompt,
          stream: false,
          return_token_ids: true,
          skip_special_tokens: false,
          max_tokens: 100,
          stop: ["END"],
        }),
      });
      const body = (await res.json()) as { choices: { finish_reason: string; stop_reason: string; token_ids: number[] }[] };
      expect(body.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "END" });
      expect(Buffer.concat(body.choices[0]!.token_ids.map((id) => Buffer.from(bytesOf(id)))).toString()).toContain("I will say END");
      expect(Buffer.concat(body.choices[0]!.token_ids.map((id) => Buffer.from(bytesOf(id)))).toString()).not.toContain("Mild");
    } finally {
      await rig.close();
    }
  });

  it("trtllm-serve's stream with n = 2 sends each choice on every step, the one that did not move with its last ids again", async () => {
    const s = await startTrtllm({ maxSeqLen: CTX });
    try {
      const script = ids("<|channel|>final<|message|>Hi there<|return|>");
      s.script({ tokens: script });
      const res = await fetch(`${s.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-oss-20b", prompt, stream: true, detokenize: false, n: 2 }),
      });
      const events = (await res.text())
        .split("\n\n")
        .filter((e) => e.startsWith("data: {"))
        .map((e) => JSON.parse(e.slice(6)) as { choices: { index: number; token_ids: number[] }[] });
      const summed = events
        .flatMap((e) => e.choices)
        .filter((c) => c.index === 0)
        .flatMap((c) => c.token_ids);
      // read naively, choice 0 has more ids than the model sampled: hence n = 1 with trtllm-serve
      expect(summed.length).toBeGreaterThan(script.length - 1);
    } finally {
      await s.close();
    }
  });

  it("llama-server holds back the ids of a split character; their text arrives with the next id (tokens_predicted tells)", async () => {
    const s = await startLlamacpp({ nCtx: CTX, pieceBytes: bytesOf });
    try {
      const script = ids(WIDE_ANSWER);
      s.script({ tokens: script });
      const res = await fetch(`${s.url}/completion`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt, stream: true, return_tokens: true }),
      });
      const partials = (await res.text())
        .split("\n\n")
        .filter((e) => e.startsWith("data: {"))
        .map((e) => JSON.parse(e.slice(6)) as { stop: boolean; tokens: number[]; tokens_predicted: number; content: string })
        .filter((e) => !e.stop);
      const carried = partials.flatMap((p) => p.tokens);
      expect(carried.length).toBeLessThan(script.length); // ids lost on the wire
      expect(partials.at(-1)!.tokens_predicted).toBe(script.length); // and counted
    } finally {
      await s.close();
    }
  });

  it.each([
    ["preserved_tokens (the specials' text in content)", {}],
    ["a build that ignores preserved_tokens (no special's text)", { preservedTokens: false }],
    ["--special", { special: true }],
  ] as const)("llama-server, %s: the held ids are read back from the text, exactly", async (_name, extra) => {
    const rig = await llamacppRig({}, extra);
    const engine = createEngine("llamacpp", cfgFor(rig.url));
    try {
      rig.script(ids(WIDE_ANSWER));
      const got = idsOf(await collect(engine, request(prompt)));
      const text = (list: number[]) =>
        Buffer.concat(list.map((id) => Buffer.from(id >= 199998 ? specialName(id) : bytesOf(id)))).toString();
      expect(text(got)).toBe(WIDE_ANSWER);
    } finally {
      await rig.close();
    }
  });

  it("llama-server ending inside a character (a limit cut mid-emoji): a 502 upstream_lost_tokens, never an answer missing it", async () => {
    const rig = await llamacppRig();
    const engine = createEngine("llamacpp", cfgFor(rig.url));
    try {
      const script = ids("<|channel|>final<|message|>Sunny ☀️ today 🫠<|return|>");
      // the first id after which the text ends inside a character: cut right after it
      const ends = (k: number) => {
        const b = Buffer.concat(script.slice(0, k + 1).map((id) => Buffer.from(id >= 199998 ? "" : bytesOf(id))));
        return new TextDecoder("utf-8", { fatal: true }).decode(b, { stream: true }).length < b.toString().length;
      };
      const cut = script.findIndex((_id, k) => ends(k));
      expect(cut).toBeGreaterThan(0);
      rig.script(script);
      const err = (await collect(engine, request(prompt, { maxTokens: cut + 1 })).catch((e: unknown) => e)) as UpstreamError;
      expect(err).toBeInstanceOf(UpstreamError);
      expect([err.status, err.code]).toEqual([502, "upstream_lost_tokens"]);
    } finally {
      await rig.close();
    }
  });
});

describe("--upstream-kind auto", () => {
  it("tells the four engines apart", async () => {
    const vllm = await startVllm();
    const sglang = await startSglang();
    const trtllm = await startTrtllm();
    const llamacpp = await startLlamacpp();
    try {
      expect(await probeEngineKind(cfgFor(vllm.url))).toBe("vllm");
      expect(await probeEngineKind(cfgFor(sglang.url))).toBe("sglang");
      expect(await probeEngineKind(cfgFor(trtllm.url))).toBe("trtllm");
      expect(await probeEngineKind(cfgFor(llamacpp.url))).toBe("llamacpp");
    } finally {
      await Promise.all([vllm.close(), sglang.close(), trtllm.close(), llamacpp.close()]);
    }
  });

  it("probes on first use and then speaks the engine it found", async () => {
    const llamacpp = await startLlamacpp({ nCtx: CTX });
    try {
      const engine = createEngine("auto", cfgFor(llamacpp.url)) as AutoEngine;
      llamacpp.script({ tokens: ids(ANSWER) });
      const chunks = await collect(engine, request(ids("<|start|>user<|message|>Hi<|end|><|start|>assistant")));
      expect(await engine.kind()).toBe("llamacpp");
      expect(idsOf(chunks)).toEqual(ids(ANSWER));
      expect(llamacpp.completions()).toHaveLength(1);
    } finally {
      await llamacpp.close();
    }
  });

  it("an unreachable upstream decides nothing yet", async () => {
    const probe = await probeEngineKind(cfgFor("http://127.0.0.1:9"));
    expect(probe).toBeNull();
  });
});
