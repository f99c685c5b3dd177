/**
 * The three engines besides vLLM (issue #18, item 5): SGLang, TensorRT-LLM's
 * trtllm-serve and llama.cpp's llama-server, each against a stand-in written
 * from its source (test/e2e/stand-ins/*.ts; docs/engines.md cites the files).
 * Each engine is driven directly (`createEngine(kind, cfg).complete(...)`: the
 * body sent, ids, finish, usage, errors) and through the OpenAI front with the
 * official `openai` client (chat and Responses, streaming and not, a tool call,
 * a malformed completion repaired, a request without max_tokens). The Server
 * builds the vLLM engine only, so the front is built here around a real Service.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LIMITS, Service } from "../../src/service/service.js";
import { frontRoute, OpenAIFront } from "../../src/transport/openai-front.js";
import { UpstreamError, type CompletionRequest, type Engine, type UpstreamChunk, type UpstreamConfig } from "../../src/upstream/engine.js";
import { AutoEngine, createEngine, probeEngineKind, type ConcreteEngineKind } from "../../src/upstream/index.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { startLlamacpp, type LlamacppStandIn } from "./stand-ins/llamacpp.js";
import { startSglang, type SglangStandIn } from "./stand-ins/sglang.js";
import { startTrtllm, type TrtllmStandIn } from "./stand-ins/trtllm.js";
import { startVllm } from "./stand-ins/vllm.js";

const enc = loadHarmonyEncoding();
const ids = (text: string) => enc.encode(text);
const CTX = 4096;
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

/** One engine and its stand-in, seen the same way by every test. */
interface Rig {
  kind: ConcreteEngineKind;
  url: string;
  script(tokens: number[], extra?: Record<string, unknown>): void;
  /** The body of the last generation request the stand-in got. */
  sent(): Record<string, unknown>;
  /** The token limit that body carries (`max_tokens`, or llama.cpp's `n_predict`). */
  limit(): unknown;
  /** Ids the engine gives back for a script that ends in `stop` (TensorRT-LLM drops the end id). */
  expected(script: number[]): number[];
  /** Script extras for an engine-side abort after `k` ids. */
  abort(k: number): Record<string, unknown>;
  /** Config extras for an engine too old to return ids, and what the 502 says. */
  old: { extra: Record<string, unknown>; message: RegExp };
  close(): Promise<void>;
}

async function sglangRig(): Promise<Rig> {
  const s: SglangStandIn = await startSglang({ contextLength: CTX });
  return {
    kind: "sglang",
    url: s.url,
    script: (tokens, extra = {}) => s.script({ tokens, ...extra }),
    sent: () => s.completions().at(-1)!.body!,
    limit: () => s.completions().at(-1)!.body!.max_tokens,
    expected: (t) => t,
    abort: (k) => ({ abortAfter: k }),
    old: { extra: { config: { profile: "old" } }, message: /does not return token ids; an SGLang with return_token_ids/ },
    close: () => s.close(),
  };
}

async function trtllmRig(): Promise<Rig> {
  const s: TrtllmStandIn = await startTrtllm({ maxSeqLen: CTX });
  return {
    kind: "trtllm",
    url: s.url,
    script: (tokens, extra = {}) => s.script({ tokens, ...extra }),
    sent: () => s.completions().at(-1)!.body!,
    limit: () => s.completions().at(-1)!.body!.max_tokens,
    expected: (t) => (t.at(-1) === 200002 ? t.slice(0, -1) : t),
    abort: (k) => ({ cancelAfter: k }),
    old: {
      extra: { config: { profile: "old" } },
      message: /does not return token ids; a trtllm-serve whose \/v1\/completions takes detokenize/,
    },
    close: () => s.close(),
  };
}

async function llamacppRig(): Promise<Rig> {
  const s: LlamacppStandIn = await startLlamacpp({ nCtx: CTX });
  return {
    kind: "llamacpp",
    url: s.url,
    script: (tokens, extra = {}) => s.script({ tokens, ...extra }),
    sent: () => s.completions().at(-1)!.body!,
    limit: () => s.completions().at(-1)!.body!.n_predict,
    expected: (t) => t,
    abort: (k) => ({ errorAfter: k }),
    old: {
      extra: { config: { profile: "old" } },
      message: /does not return token ids; a llama-server whose \/completion takes return_tokens/,
    },
    close: () => s.close(),
  };
}

function cfgFor(url: string): UpstreamConfig {
  return { url, idleTimeoutMs: 2000, reasoningField: "reasoning" };
}

function request(prompt: number[], extra: Partial<CompletionRequest> = {}): CompletionRequest {
  return { client: { model: "gpt-oss" }, prompt, n: 1, maxTokens: undefined, ...extra };
}

async function collect(engine: Engine, r: CompletionRequest): Promise<UpstreamChunk[]> {
  const out: UpstreamChunk[] = [];
  for await (const c of engine.complete(r, new AbortController().signal)) out.push(c);
  return out;
}

const idsOf = (chunks: UpstreamChunk[], choice = 0) =>
  chunks.flatMap((c) => c.choices.filter((x) => x.index === choice).flatMap((x) => x.token_ids));
const finishOf = (chunks: UpstreamChunk[], choice = 0) =>
  chunks.flatMap((c) => c.choices.filter((x) => x.index === choice && x.finish_reason !== null).map((x) => x.finish_reason));

/** The OpenAI front over `engine`, served on 127.0.0.1:0 around a real Service. */
async function startFront(engine: Engine, cfg: UpstreamConfig): Promise<{ client: OpenAI; close(): Promise<void> }> {
  const svc = new Service({ workers: 0, drainTimeoutMs: 2000, limits: DEFAULT_LIMITS, logger: pino({ level: "silent" }) });
  svc.start();
  const front = new OpenAIFront(svc, engine, cfg);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const route = frontRoute(url.pathname);
    if (route === null) return void res.writeHead(404).end();
    front.handle(route, url, req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "sk-local", maxRetries: 0 }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await svc.close();
    },
  };
}

describe.each([
  ["sglang", sglangRig],
  ["trtllm", trtllmRig],
  ["llamacpp", llamacppRig],
] as const)("the %s engine", (_name, makeRig) => {
  let rig: Rig;
  let engine: Engine;
  let front: { client: OpenAI; close(): Promise<void> };
  const prompt = ids("<|start|>user<|message|>Weather in Oslo?<|end|><|start|>assistant");

  beforeAll(async () => {
    rig = await makeRig();
    engine = createEngine(rig.kind, cfgFor(rig.url));
    front = await startFront(engine, cfgFor(rig.url));
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
      if (rig.kind === "llamacpp") expect(sent.return_tokens).toBe(true);
      else expect(sent.stop_token_ids).toEqual([200002, 200012, 199999]);
      if (rig.kind === "sglang") expect(sent.return_token_ids).toBe(true);
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
      const expected = { sglang: CTX - prompt.length - 1, trtllm: undefined, llamacpp: CTX - prompt.length }[rig.kind as "sglang"];
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

    it("n > 1: several choices, or a 400 where the engine makes one", async () => {
      rig.script(ids(ANSWER));
      if (rig.kind === "llamacpp") {
        const err = (await collect(engine, request(prompt, { n: 2 })).catch((e: unknown) => e)) as UpstreamError;
        expect(err).toMatchObject({ status: 400 });
        expect(err.message).toMatch(/n must be 1/);
        return;
      }
      const chunks = await collect(engine, request(prompt, { n: 2 }));
      expect(finishOf(chunks, 0)).toEqual(["stop"]);
      expect(finishOf(chunks, 1)).toEqual(["stop"]);
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
      const err = (await front.client.chat.completions.create(ASK).then(
        () => null,
        (e: unknown) => e,
      )) as { status?: number; error?: { message?: string } } | null;
      expect(err?.status).toBe(502);
      expect(err?.error?.message).toMatch(rig.old.message);
    });

    it("the model list is the engine's", async () => {
      const list = await front.client.models.list();
      expect(list.data.length).toBeGreaterThan(0);
    });
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
      expect(engine.kind).toBe("llamacpp");
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
