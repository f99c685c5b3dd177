/**
 * `harmony-sidecar simulate-engine`: a vLLM-compatible gpt-oss engine
 * without a GPU. It serves vLLM's `POST /v1/completions` (prompt as token
 * ids, `return_token_ids`, streamed and not), `GET /v1/models`, `/health`,
 * `/ping`, `/version`, `/metrics` (`vllm:*` series), `/tokenize` and
 * `/detokenize`, with vLLM's contract (src/simulate/vllm.ts). What the
 * "model" writes comes from the load tester's generator, with faults at a
 * chosen rate (src/simulate/model.ts); what was injected into each request
 * is kept and served at `GET /simulate/requests` (by `id`, `key` or `run`).
 *
 * Generation is paced like an engine's: one step loop for every running
 * sequence (continuous batching, at most `maxNumSeqs` at once, the rest
 * waiting), each step `stepTokens` ids per sequence (the first, prefill,
 * one), `tokensPerSecond` per sequence (0: as fast as the loop turns).
 *
 * `/v1/chat/completions` and `/v1/responses` (`chat: "raw"`) answer with
 * the same generations as plain text, control tokens included: what a
 * client gets from a server that passes gpt-oss output through without a
 * Harmony parser. It is not vLLM's own Chat or Responses handling of
 * gpt-oss (docs/loadtest.md says what is and is not modelled).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { TextDecoder } from "node:util";
import { Counter, Gauge, Registry } from "prom-client";
import { isObj, parseJson } from "../core/json.js";
import type { Vocabulary } from "../core/vocab.js";
import { shapeOfSchema, type ToolSpec } from "../loadtest/arguments.js";
import { ENGINE_FAULT_KINDS, type Encoder, type FaultKind } from "../loadtest/generate.js";
import { choiceRecord, keyIndex, sample, type ChoiceRecord, type Sample } from "./model.js";
import { declaredTools, decodeIds, lastMessage, requestKey } from "./prompt.js";
import { Records, type RequestRecord } from "./records.js";
import {
  Emitter,
  errorBody,
  finishReason,
  GENERATION_CONFIG_EOS,
  HttpFail,
  isIntList,
  logprobsOf,
  plan,
  runChoice,
  textOf,
  TOKENIZER_EOS,
  usageOf,
  type Plan,
  type Run,
  type Sampled,
  type ServedModel,
} from "./vllm.js";

type Obj = Record<string, unknown>;

export interface SimulatorOptions {
  host: string;
  port: number;
  /** `--served-model-name`: the `model` of every answer; another name in a request is vLLM's 404. */
  servedModelName: string;
  /** `--max-model-len`. */
  maxModelLen: number;
  /** `--stream-interval`: ids gathered per chunk (a request's `stream_interval` can raise it). */
  streamInterval: number;
  /** Ids per second per sequence (0: unpaced). */
  tokensPerSecond: number;
  /** Ids per engine step per sequence after the first (speculative decoding samples several). */
  stepTokens: number;
  /** `--max-num-seqs`: sequences generating at once; later requests wait. */
  maxNumSeqs: number;
  seed: number;
  faultRate: number;
  faults: readonly FaultKind[];
  /** Requests whose injections are kept for `GET /simulate/requests`. */
  records: number;
  /** `/v1/chat/completions` and `/v1/responses`: the raw output as text, or not served (404, as vLLM's completions-only use). */
  chat: "raw" | "off";
  /** Largest request body. */
  maxBodyBytes: number;
  /** The sum of tokens held by running sequences that reads as a full KV cache on `/metrics`. */
  kvCacheTokens: number;
}

export const SIMULATOR_DEFAULTS: SimulatorOptions = Object.freeze({
  host: "127.0.0.1",
  port: 8000,
  servedModelName: "openai/gpt-oss-20b",
  maxModelLen: 131072,
  streamInterval: 1,
  tokensPerSecond: 100,
  stepTokens: 1,
  maxNumSeqs: 256,
  seed: 1,
  faultRate: 0.1,
  faults: ENGINE_FAULT_KINDS,
  records: 100_000,
  chat: "raw" as const,
  maxBodyBytes: 32 << 20,
  kvCacheTokens: 1_000_000,
});

/** What the model samples for one request in tests (instead of the generator): per choice, or one list for all. */
export interface Script {
  tokens?: number[] | number[][];
  /** When a choice's ids run out: the tokenizer EOS (default), a `length` finish, or an engine abort. */
  then?: Sampled["then"];
}

export interface Simulator {
  url: string;
  port: number;
  records: Records;
  /** Scripts are taken in order, one per generating request (the last repeats); none given: the generator. */
  script(...s: Script[]): void;
  close(): Promise<void>;
}

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };
export const REQUEST_ID_HEADER = "x-simulator-request-id";

function randomId(): string {
  let s = "";
  for (let i = 0; i < 32; i++) s += Math.floor(Math.random() * 16).toString(16);
  return s;
}

/** One request in the engine: its choices advance one step per engine step. */
interface Job {
  seqs: number;
  closed: boolean;
  /** Tokens held (prompt and generated), for the KV-cache gauge. */
  held(): number;
  /** One engine step; true when the request is done. */
  step(): boolean;
}

interface ChoiceState {
  run: Run;
  emitter: Emitter;
  decoder: TextDecoder;
  sentIds: number;
  sentText: number;
  prompted: boolean;
}

export async function startSimulator(options: Partial<SimulatorOptions>, enc: Encoder, vocab: Vocabulary): Promise<Simulator> {
  const o: SimulatorOptions = { ...SIMULATOR_DEFAULTS, ...options };
  const served: ServedModel = {
    servedModelName: o.servedModelName,
    maxModelLen: o.maxModelLen,
    maxNewTokens: null,
    streamInterval: o.streamInterval,
  };
  const records = new Records(o.records);
  const started = Math.floor(Date.now() / 1000);
  let scripts: Script[] = [];
  let counter = 0;

  // ---------------------------------------------------------------- metrics
  const registry = new Registry();
  const labels = { engine: "0", model_name: o.servedModelName };
  const running: Job[] = [];
  const waiting: Job[] = [];
  new Gauge({
    name: "vllm:num_requests_running",
    help: "Number of requests in model execution batches.",
    labelNames: ["engine", "model_name"],
    registers: [registry],
    collect() {
      this.set(labels, running.length);
    },
  });
  new Gauge({
    name: "vllm:num_requests_waiting",
    help: "Number of requests waiting to be processed.",
    labelNames: ["engine", "model_name"],
    registers: [registry],
    collect() {
      this.set(labels, waiting.length);
    },
  });
  new Gauge({
    name: "vllm:kv_cache_usage_perc",
    help: "KV-cache usage. 1 means 100 percent usage.",
    labelNames: ["engine", "model_name"],
    registers: [registry],
    collect() {
      this.set(labels, Math.min(1, running.reduce((a, j) => a + j.held(), 0) / Math.max(1, o.kvCacheTokens)));
    },
  });
  const promptTokens = new Counter({
    name: "vllm:prompt_tokens_total",
    help: "Number of prefill tokens processed.",
    labelNames: ["engine", "model_name"],
    registers: [registry],
  });
  const generationTokens = new Counter({
    name: "vllm:generation_tokens_total",
    help: "Number of generation tokens processed.",
    labelNames: ["engine", "model_name"],
    registers: [registry],
  });
  const success = new Counter({
    name: "vllm:request_success_total",
    help: "Count of successfully processed requests.",
    labelNames: ["engine", "finished_reason", "model_name"],
    registers: [registry],
  });
  for (const r of ["stop", "length", "abort", "error", "repetition"]) success.inc({ ...labels, finished_reason: r }, 0);
  const faultsInjected = new Counter({
    name: "simulator_faults_injected_total",
    help: "Choices generated with an injected fault, by kind (none: without one).",
    labelNames: ["kind"],
    registers: [registry],
  });
  const requestsTotal = new Counter({
    name: "simulator_requests_total",
    help: "Generating requests, by endpoint and HTTP status.",
    labelNames: ["endpoint", "status"],
    registers: [registry],
  });

  // ---------------------------------------------------------------- the engine's step loop
  const stepMs = o.tokensPerSecond > 0 ? (1000 * o.stepTokens) / o.tokensPerSecond : 0;
  let timer: NodeJS.Timeout | NodeJS.Immediate | null = null;
  let nextAt = 0;
  let stopped = false;
  const runningSeqs = () => running.reduce((a, j) => a + j.seqs, 0);
  const admitWaiting = () => {
    while (waiting.length > 0 && (running.length === 0 || runningSeqs() + waiting[0]!.seqs <= o.maxNumSeqs)) running.push(waiting.shift()!);
  };
  const schedule = () => {
    if (timer !== null || stopped || (running.length === 0 && waiting.length === 0)) return;
    if (stepMs === 0) {
      timer = setImmediate(tick);
      return;
    }
    const now = performance.now();
    if (nextAt < now - stepMs) nextAt = now; // idle, or far behind: start afresh
    nextAt += stepMs;
    timer = setTimeout(tick, Math.max(0, nextAt - now));
  };
  function tick(): void {
    timer = null;
    admitWaiting();
    for (let k = 0; k < running.length;) {
      const job = running[k]!;
      if (job.closed || job.step()) running.splice(k, 1);
      else k++;
    }
    admitWaiting();
    schedule();
  }
  const submit = (job: Job) => {
    waiting.push(job);
    admitWaiting();
    schedule();
  };

  // ---------------------------------------------------------------- generations
  const bytesOf = (id: number) => (vocab.isToken(id) ? vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id)) : new Uint8Array(0));
  const nameOf = (id: number) => decodeIds(vocab, [id]);

  /** The model's sample for each choice: the script's, or the generator's (recorded). */
  function samples(
    count: number,
    tools: ToolSpec[] | undefined,
    key: string | null,
    stops: ReadonlySet<number>,
  ): { sampled: Sampled[]; gens: (Sample | null)[] } {
    const request = counter++;
    if (scripts.length > 0) {
      const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
      const per = (i: number): number[] => {
        const t = s.tokens ?? [];
        return Array.isArray(t[0]) ? ((t as number[][])[i] ?? []) : (t as number[]);
      };
      return {
        sampled: Array.from({ length: count }, (_, i) => ({ ids: per(i), then: s.then ?? "eos" })),
        gens: Array.from({ length: count }, () => null),
      };
    }
    const gens: Sample[] = [];
    for (let c = 0; c < count; c++) {
      const index = key !== null ? (keyIndex(key) + Math.imul(c, 0x9e3779b1)) >>> 0 : (request * 128 + c) >>> 0;
      const s = sample(index, tools, { seed: o.seed, faultRate: o.faultRate, faults: o.faults }, stops, enc, vocab);
      faultsInjected.inc({ kind: s.gen.fault ?? "none" });
      gens.push(s);
    }
    return { sampled: gens.map((g) => g.sampled), gens };
  }

  function record(
    id: string,
    key: string | null,
    endpoint: RequestRecord["endpoint"],
    tools: ToolSpec[] | undefined,
    gens: (Sample | null)[],
    runs: Run[],
  ): void {
    const choices: ChoiceRecord[] = [];
    gens.forEach((g, i) => {
      if (g) choices.push(choiceRecord(i, g, runs[i]!, finishReason(runs[i]!.end)));
    });
    if (choices.length === 0) return;
    records.add({ id, key, endpoint, tools: (tools ?? []).map((t) => t.name), created: Math.floor(Date.now() / 1000), choices });
  }

  const countFinish = (runs: Run[]) => {
    for (const run of runs) {
      generationTokens.inc(labels, run.ids.length);
      success.inc({ ...labels, finished_reason: finishReason(run.end) });
    }
  };

  // ---------------------------------------------------------------- HTTP
  function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  async function readBody(
    req: http.IncomingMessage,
  ): Promise<{ ok: true; value: unknown } | { ok: false; status: number; message: string }> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > o.maxBodyBytes) {
        req.resume();
        return { ok: false, status: 413, message: `the body is over ${o.maxBodyBytes} bytes` };
      }
      chunks.push(c as Buffer);
    }
    const text = Buffer.concat(chunks).toString("utf8");
    if (text === "") return { ok: true, value: undefined };
    const parsed = parseJson(text);
    return parsed.ok ? parsed : { ok: false, status: 400, message: parsed.message };
  }

  const ROUTES: Record<string, string[]> = {
    "/health": ["GET"],
    "/ping": ["GET", "POST"],
    "/version": ["GET"],
    "/metrics": ["GET"],
    "/v1/models": ["GET"],
    "/tokenize": ["POST"],
    "/detokenize": ["POST"],
    "/v1/completions": ["POST"],
    "/simulate/requests": ["GET"],
    ...(o.chat === "raw" ? { "/v1/chat/completions": ["POST"], "/v1/responses": ["POST"] } : {}),
  };

  const server = http.createServer((req, res) => {
    route(req, res).catch((e: Error) => {
      if (!res.headersSent) json(res, 500, { error: { message: e.message, type: "InternalServerError", param: null, code: 500 } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const allowed = ROUTES[path];
    if (!allowed) {
      req.resume();
      return json(res, 404, { detail: "Not Found" });
    }
    if (!allowed.includes(method === "HEAD" ? "GET" : method)) {
      req.resume();
      return json(res, 405, { detail: "Method Not Allowed" });
    }
    switch (path) {
      case "/health":
      case "/ping":
        req.resume();
        res.writeHead(200, { "content-length": 0 });
        res.end();
        return;
      case "/version":
        return json(res, 200, { version: "0.0.0-harmony-sidecar-simulator" });
      case "/metrics": {
        const text = await registry.metrics();
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(text);
        return;
      }
      case "/v1/models":
        return json(res, 200, models());
      case "/simulate/requests":
        return lookup(res, url);
    }
    // validate_json_request (api_utils.py)
    const ctype = String(req.headers["content-type"] ?? "")
      .split(";")[0]!
      .trim()
      .toLowerCase();
    if (ctype !== "application/json") {
      req.resume();
      return json(res, 400, errorBody(new HttpFail(400, "Unsupported Media Type: Only 'application/json' is allowed")));
    }
    const body = await readBody(req);
    if (!body.ok) return json(res, body.status, errorBody(new HttpFail(body.status, body.message)));
    if (!isObj(body.value)) return json(res, 400, errorBody(new HttpFail(400, "the request body must be a JSON object")));
    const b = body.value;
    switch (path) {
      case "/tokenize":
        return tokenize(res, b);
      case "/detokenize":
        if (!isIntList(b.tokens)) return json(res, 400, errorBody(new HttpFail(400, "tokens must be a list of token ids")));
        return json(res, 200, { prompt: decodeIds(vocab, b.tokens) });
      case "/v1/completions":
        return completions(req, res, b);
      case "/v1/chat/completions":
        return chat(req, res, b, "chat");
      case "/v1/responses":
        return chat(req, res, b, "responses");
    }
  }

  function models(): Obj {
    return {
      object: "list",
      data: [
        {
          id: o.servedModelName,
          object: "model",
          created: started,
          owned_by: "vllm",
          root: o.servedModelName,
          parent: null,
          max_model_len: o.maxModelLen,
          permission: [
            {
              id: `modelperm-${randomId()}`,
              object: "model_permission",
              created: started,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: "*",
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    };
  }

  function tokenize(res: http.ServerResponse, b: Obj): void {
    let text: string;
    if (typeof b.prompt === "string") text = b.prompt;
    else if (Array.isArray(b.messages)) text = b.messages.map((m) => (isObj(m) && typeof m.content === "string" ? m.content : "")).join("");
    else return json(res, 400, errorBody(new HttpFail(400, "prompt or messages must be provided")));
    const tokens = enc.encodeOrdinary(text);
    json(res, 200, {
      count: tokens.length,
      max_model_len: o.maxModelLen,
      tokens,
      token_strs: b.return_token_strs === true ? tokens.map(nameOf) : null,
    });
  }

  function lookup(res: http.ServerResponse, url: URL): void {
    const id = url.searchParams.get("id");
    const key = url.searchParams.get("key");
    const run = url.searchParams.get("run");
    if (id !== null || key !== null) {
      const r = id !== null ? records.get(id) : records.byRequestKey(key!);
      return r ? json(res, 200, r) : json(res, 404, { detail: "no record of that request (never seen, or no longer kept)" });
    }
    if (run !== null) return json(res, 200, { object: "list", run, data: records.run(run) });
    json(res, 400, { detail: "give id, key or run" });
  }

  // ---------------------------------------------------------------- /v1/completions
  function completions(req: http.IncomingMessage, res: http.ServerResponse, body: Obj): void {
    let pl: Plan;
    try {
      pl = plan(body, served, (t) => enc.encodeOrdinary(t));
    } catch (e) {
      if (e instanceof HttpFail) {
        requestsTotal.inc({ endpoint: "completions", status: String(e.status) });
        return json(res, e.status, errorBody(e));
      }
      throw e;
    }
    const id = `cmpl-${randomId()}`;
    const created = Math.floor(Date.now() / 1000);
    const stops = new Set(pl.eos === null ? pl.stopIds : [pl.eos, ...pl.stopIds]);
    // choice index = output.index + prompt_idx * n
    const runs: Run[] = [];
    const choicePrompt: number[] = [];
    const allGens: (Sample | null)[] = [];
    let key: string | null = null;
    let tools: ToolSpec[] | undefined;
    pl.prompts.forEach((ids, pi) => {
      const text = decodeIds(vocab, ids);
      const k = requestKey(lastMessage(text, "user"));
      const t = declaredTools(text);
      if (pi === 0) {
        key = k;
        tools = t;
      }
      const { sampled, gens } = samples(pl.n, t, pi === 0 ? k : k === null ? null : `${k}#${pi}`, stops);
      sampled.forEach((s, c) => {
        runs.push(runChoice(s, pl, ids.length, o.maxModelLen, pl.maxTokens[pi]!));
        choicePrompt.push(pi);
        allGens.push(gens[c]!);
      });
    });
    promptTokens.inc(
      labels,
      pl.prompts.reduce((a, p) => a + p.length, 0),
    );
    record(id, key, "completions", tools, allGens, runs);
    requestsTotal.inc({ endpoint: "completions", status: "200" });
    const states: ChoiceState[] = runs.map((run) => ({
      run,
      emitter: new Emitter(run, pl.interval, o.stepTokens),
      decoder: new TextDecoder("utf-8"),
      sentIds: 0,
      sentText: 0,
      prompted: false,
    }));
    const headers = { [REQUEST_ID_HEADER]: id };
    const promptLen = pl.prompts.reduce((a, p) => a + p.length, 0);
    const job: Job = {
      seqs: runs.length,
      closed: false,
      held: () => promptLen + states.reduce((a, s) => a + s.emitter.length, 0),
      step: () => false,
    };
    res.on("close", () => {
      if (!res.writableFinished) job.closed = true;
    });
    if (pl.stream) {
      res.writeHead(200, { ...SSE_HEADERS, ...headers });
      const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
      job.step = () => {
        for (const [i, st] of states.entries()) {
          const piece = st.emitter.step();
          if (!piece) continue;
          const promptIds = pl.prompts[choicePrompt[i]!]!;
          const end = piece.last ? st.run.end : null;
          const dropStop = !!end && end.kind === "finish" && end.stopToken && !pl.includeStop;
          const text = textOf(piece.ids, dropStop, pl.skipSpecial, bytesOf, st.decoder, piece.last);
          const first = !st.prompted;
          st.prompted = true;
          // "Chunked prefill case, don't return empty chunks"
          if (!text && piece.ids.length === 0 && st.sentIds === 0) continue;
          const choice: Obj = {
            index: i,
            text,
            logprobs: logprobsOf(piece.ids, pl, nameOf, st.sentText),
            finish_reason: end ? finishReason(end) : null,
            stop_reason: end && end.kind === "finish" ? end.stopReason : null,
            prompt_token_ids: first && pl.returnTokenIds ? promptIds : null,
            token_ids: pl.returnTokenIds ? piece.ids : null,
          };
          st.sentIds += piece.ids.length;
          st.sentText += text.length;
          const chunk: Obj = { id, object: "text_completion", created, model: o.servedModelName, choices: [choice] };
          if (pl.continuousUsage) chunk.usage = usageOf(promptIds.length, st.sentIds);
          send(chunk);
        }
        if (!states.every((s) => s.emitter.done)) return false;
        countFinish(runs);
        if (pl.includeUsage) {
          const completion = states.reduce((a, s) => a + s.sentIds, 0);
          send({ id, object: "text_completion", created, model: o.servedModelName, choices: [], usage: usageOf(promptLen, completion) });
        }
        res.end("data: [DONE]\n\n");
        return true;
      };
    } else {
      job.step = () => {
        for (const st of states) st.emitter.step();
        if (!states.every((s) => s.emitter.done)) return false;
        countFinish(runs);
        const choices = states.map((st, i) => {
          const end = st.run.end;
          const dropStop = end.kind === "finish" && end.stopToken && !pl.includeStop;
          const c: Obj = {
            index: i,
            text: textOf(st.run.ids, dropStop, pl.skipSpecial, bytesOf, st.decoder, true),
            logprobs: logprobsOf(st.run.ids, pl, nameOf, 0),
            finish_reason: finishReason(end),
            stop_reason: end.kind === "finish" ? end.stopReason : null,
            token_ids: pl.returnTokenIds ? st.run.ids : null,
            prompt_logprobs: null,
            prompt_token_ids: pl.returnTokenIds ? pl.prompts[choicePrompt[i]!] : null,
          };
          return c;
        });
        const completion = runs.reduce((a, r) => a + r.ids.length, 0);
        json(
          res,
          200,
          {
            id,
            object: "text_completion",
            created,
            model: o.servedModelName,
            choices,
            service_tier: null,
            system_fingerprint: null,
            usage: { ...usageOf(promptLen, completion), prompt_tokens_details: null },
            kv_transfer_params: null,
          },
          headers,
        );
        return true;
      };
    }
    void req;
    submit(job);
  }

  // ---------------------------------------------------------------- raw Chat Completions and Responses
  function chat(req: http.IncomingMessage, res: http.ServerResponse, body: Obj, endpoint: "chat" | "responses"): void {
    const fail = (status: number, message: string, param: string | null = null) => {
      requestsTotal.inc({ endpoint, status: String(status) });
      json(res, status, errorBody(new HttpFail(status, message, status === 404 ? "NotFoundError" : "BadRequestError", param)));
    };
    if (typeof body.model === "string" && body.model !== o.servedModelName) return fail(404, `The model \`${body.model}\` does not exist.`);
    const read = conversation(body, endpoint);
    if (typeof read === "string") return fail(400, read);
    const n = endpoint === "chat" && typeof body.n === "number" ? body.n : 1;
    if (!Number.isInteger(n) || n < 1 || n > 128) return fail(400, `n must be an integer from 1 to 128, got ${String(body.n)}.`, "n");
    const promptLen = enc.encodeOrdinary(read.text).length;
    const asked = endpoint === "chat" ? (body.max_completion_tokens ?? body.max_tokens) : body.max_output_tokens;
    if (asked !== undefined && asked !== null && (typeof asked !== "number" || !Number.isInteger(asked) || asked < 1))
      return fail(400, "max_tokens must be a positive integer", "max_tokens");
    const room = o.maxModelLen - promptLen;
    const maxTokens = typeof asked === "number" ? asked : room;
    if (maxTokens > room || room < 1)
      return fail(
        400,
        `This model's maximum context length is ${o.maxModelLen} tokens; the prompt has ${promptLen} and ${maxTokens} more were asked for.`,
      );
    const stream = body.stream === true;
    const skipSpecial = body.skip_special_tokens === true;
    // the chat template's stop: the generation config's EOS ids
    const pl: Plan = {
      prompts: [[]],
      n,
      stream,
      maxTokens: [maxTokens],
      minTokens: 0,
      eos: TOKENIZER_EOS,
      stopIds: GENERATION_CONFIG_EOS.filter((x) => x !== TOKENIZER_EOS),
      includeStop: false,
      skipSpecial,
      returnTokenIds: false,
      logprobs: null,
      asTokenIds: false,
      includeUsage: false,
      continuousUsage: false,
      interval: o.streamInterval,
      repetition: null,
      ignoreEos: false,
    };
    const stops = new Set([TOKENIZER_EOS, ...pl.stopIds]);
    const { sampled, gens } = samples(n, read.tools, read.key, stops);
    const runs = sampled.map((s) => runChoice(s, pl, promptLen, o.maxModelLen, maxTokens));
    const id = endpoint === "chat" ? `chatcmpl-${randomId()}` : `resp_${randomId()}`;
    record(id, read.key, endpoint, read.tools, gens, runs);
    promptTokens.inc(labels, promptLen);
    requestsTotal.inc({ endpoint, status: "200" });
    const created = Math.floor(Date.now() / 1000);
    const states: ChoiceState[] = runs.map((run) => ({
      run,
      emitter: new Emitter(run, pl.interval, o.stepTokens),
      decoder: new TextDecoder("utf-8"),
      sentIds: 0,
      sentText: 0,
      prompted: false,
    }));
    const texts = states.map(() => "");
    const headers = { [REQUEST_ID_HEADER]: id };
    const job: Job = {
      seqs: n,
      closed: false,
      held: () => promptLen + states.reduce((a, s) => a + s.emitter.length, 0),
      step: () => false,
    };
    res.on("close", () => {
      if (!res.writableFinished) job.closed = true;
    });
    const completionTokens = () => runs.reduce((a, r) => a + r.ids.length, 0);
    const chatFinish = (run: Run) => finishReason(run.end);
    let seq = 0;
    const event = (type: string, fields: Obj) => {
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
    };
    const msgId = `msg_${id.slice(5)}`;
    const response = (status: string, text: string | null): Obj => {
      const run = runs[0]!;
      const incomplete = status === "incomplete";
      return {
        id,
        object: "response",
        created_at: created,
        model: o.servedModelName,
        status,
        error: null,
        incomplete_details: incomplete ? { reason: run.end.kind === "abort" ? "abort" : "max_output_tokens" } : null,
        output:
          text === null
            ? []
            : [
                {
                  type: "message",
                  id: msgId,
                  status: incomplete ? "incomplete" : "completed",
                  role: "assistant",
                  content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
                },
              ],
        parallel_tool_calls: true,
        tool_choice: body.tool_choice ?? "auto",
        tools: Array.isArray(body.tools) ? body.tools : [],
        usage:
          text === null
            ? null
            : {
                input_tokens: promptLen,
                input_tokens_details: { cached_tokens: 0 },
                output_tokens: completionTokens(),
                output_tokens_details: { reasoning_tokens: 0 },
                total_tokens: promptLen + completionTokens(),
              },
      };
    };
    const responseStatus = () => (runs[0]!.end.kind === "finish" && runs[0]!.end.reason === "stop" ? "completed" : "incomplete");
    if (stream) {
      res.writeHead(200, { ...SSE_HEADERS, ...headers });
      if (endpoint === "chat") {
        const chunk = (choices: Obj[]) =>
          res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: o.servedModelName, choices })}\n\n`);
        chunk(states.map((_, i) => ({ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null })));
        job.step = () => {
          for (const [i, st] of states.entries()) {
            const piece = st.emitter.step();
            if (!piece) continue;
            const end = piece.last ? st.run.end : null;
            const dropStop = !!end && end.kind === "finish" && end.stopToken;
            const text = textOf(piece.ids, dropStop, skipSpecial, bytesOf, st.decoder, piece.last);
            if (text) chunk([{ index: i, delta: { content: text }, logprobs: null, finish_reason: null }]);
            if (end) chunk([{ index: i, delta: {}, logprobs: null, finish_reason: chatFinish(st.run) }]);
          }
          if (!states.every((s) => s.emitter.done)) return false;
          countFinish(runs);
          const so = body.stream_options;
          if (isObj(so) && so.include_usage === true)
            res.write(
              `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: o.servedModelName, choices: [], usage: usageOf(promptLen, completionTokens()) })}\n\n`,
            );
          res.end("data: [DONE]\n\n");
          return true;
        };
      } else {
        event("response.created", { response: response("in_progress", null) });
        event("response.in_progress", { response: response("in_progress", null) });
        let opened = false;
        job.step = () => {
          const st = states[0]!;
          const piece = st.emitter.step();
          if (piece) {
            const end = piece.last ? st.run.end : null;
            const dropStop = !!end && end.kind === "finish" && end.stopToken;
            const text = textOf(piece.ids, dropStop, skipSpecial, bytesOf, st.decoder, piece.last);
            if (!opened && (text || end)) {
              opened = true;
              event("response.output_item.added", {
                output_index: 0,
                item: { type: "message", id: msgId, status: "in_progress", role: "assistant", content: [] },
              });
              event("response.content_part.added", {
                item_id: msgId,
                output_index: 0,
                content_index: 0,
                part: { type: "output_text", text: "", annotations: [], logprobs: [] },
              });
            }
            if (text) {
              texts[0] += text;
              event("response.output_text.delta", { item_id: msgId, output_index: 0, content_index: 0, delta: text, logprobs: [] });
            }
          }
          if (!st.emitter.done) return false;
          countFinish(runs);
          const final = response(responseStatus(), texts[0]!);
          const item = (final.output as Obj[])[0]!;
          event("response.output_text.done", { item_id: msgId, output_index: 0, content_index: 0, text: texts[0], logprobs: [] });
          event("response.content_part.done", {
            item_id: msgId,
            output_index: 0,
            content_index: 0,
            part: { type: "output_text", text: texts[0], annotations: [], logprobs: [] },
          });
          event("response.output_item.done", { output_index: 0, item });
          event(final.status === "completed" ? "response.completed" : "response.incomplete", { response: final });
          res.end();
          return true;
        };
      }
    } else {
      job.step = () => {
        for (const st of states) st.emitter.step();
        if (!states.every((s) => s.emitter.done)) return false;
        countFinish(runs);
        const textsOf = states.map((st) => {
          const end = st.run.end;
          return textOf(st.run.ids, end.kind === "finish" && end.stopToken, skipSpecial, bytesOf, st.decoder, true);
        });
        if (endpoint === "chat")
          json(
            res,
            200,
            {
              id,
              object: "chat.completion",
              created,
              model: o.servedModelName,
              choices: states.map((st, i) => ({
                index: i,
                message: { role: "assistant", content: textsOf[i], refusal: null, tool_calls: [] },
                logprobs: null,
                finish_reason: chatFinish(st.run),
                stop_reason: st.run.end.kind === "finish" ? st.run.end.stopReason : null,
              })),
              usage: usageOf(promptLen, completionTokens()),
            },
            headers,
          );
        else json(res, 200, response(responseStatus(), textsOf[0]!), headers);
        return true;
      };
    }
    void req;
    submit(job);
  }

  /** A Chat or Responses request's text (for usage), declared function tools and load-test key; or why it cannot be read. */
  function conversation(
    body: Obj,
    endpoint: "chat" | "responses",
  ): { text: string; tools: ToolSpec[] | undefined; key: string | null } | string {
    const textOf = (content: unknown): string => {
      if (typeof content === "string") return content;
      if (!Array.isArray(content)) return "";
      return content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
    };
    let items: unknown[];
    if (endpoint === "chat") {
      if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages must be a non-empty list";
      items = body.messages;
    } else if (typeof body.input === "string") items = [{ role: "user", content: body.input }];
    else if (Array.isArray(body.input)) items = body.input;
    else return "input must be a string or a list of items";
    let text = typeof body.instructions === "string" ? body.instructions : "";
    let lastUser: string | null = null;
    for (const m of items) {
      if (!isObj(m)) continue;
      const t = textOf(m.content);
      text += t;
      if (m.role === "user") lastUser = t;
    }
    let tools: ToolSpec[] | undefined;
    if (Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== "none") {
      tools = [];
      for (const t of body.tools.slice(0, 128)) {
        if (!isObj(t) || t.type !== "function") continue;
        const f = endpoint === "chat" ? t.function : t;
        if (!isObj(f) || typeof f.name !== "string") continue;
        tools.push({ name: f.name, params: f.parameters === undefined || f.parameters === null ? null : shapeOfSchema(f.parameters) });
      }
      if (tools.length === 0) tools = undefined;
    }
    return { text, tools, key: requestKey(lastUser) };
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = o.host.includes(":") ? `[${o.host}]` : o.host;
  return {
    url: `http://${hostForUrl}:${port}`,
    port,
    records,
    script: (...s) => {
      scripts = s;
    },
    close: () =>
      new Promise((resolve) => {
        stopped = true;
        if (timer !== null) {
          clearTimeout(timer as NodeJS.Timeout);
          clearImmediate(timer as NodeJS.Immediate);
        }
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
