/**
 * The OpenAI-compatible front of sidecar mode: clients talk Chat Completions
 * or Responses to us; we render their request into Harmony prompt ids (with
 * chain-of-thought restoration), drive the upstream engine by token ids, and
 * parse its output with the resilient parser on the worker pool. Malformed
 * model output is repaired, never an HTTP 500; upstream failures become
 * well-formed OpenAI-style errors or a clean end of stream.
 */
import type http from "node:http";
import type { HttpErrorCode, RenderErrorCode, RequestErrorCode } from "../core/errors.js";
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { ChatCompletionAccumulator, type HarmonyChatCompletionChunk } from "../openai/chat.js";
import { ContentLogprobs } from "../openai/logprobs.js";
import {
  answerFormat,
  declaredToolNames,
  forcedCallPieces,
  toolChoiceOf,
  type AnswerFormat,
  type HarmonyPiece,
} from "../openai/request.js";
import { checkSampling } from "../openai/sampling.js";
import { StopStrings } from "../openai/stop.js";
import {
  chatUsage,
  continuedInput,
  findItem,
  itemReferences,
  responseIdOfItem,
  responsesToChat,
  responsesToolChoice,
  responsesUsage,
  storedInputItems,
  type PreviousResponse,
} from "../openai/responses-input.js";
import { ResponsesOutput } from "../openai/responses-output.js";
import { generate, isClosing, type ForcedCall } from "../service/generate.js";
import type { Service } from "../service/service.js";
import { MAX_RESPONSE_ID, type Lookup } from "../store/responses.js";
import { MAX_TOP_LOGPROBS, type Engine, type UpstreamConfig, type UpstreamError, type UpstreamUsage } from "../upstream/engine.js";
import { ClientFlow } from "./client-flow.js";
import { GeneratedIds, logRepaired } from "./repair-log.js";
import { readJson, sendJson } from "./respond.js";

function sendError(
  res: http.ServerResponse,
  status: number,
  type: string,
  code: HttpErrorCode | RequestErrorCode | RenderErrorCode,
  message: string,
  param: string | null = null,
): void {
  if (!res.headersSent) sendJson(res, status, { error: { message, type, param, code } });
}

/**
 * Which calls the parser lets through: tool_choice "none", or a request
 * that declares no tools (and no built-in tool), allows none (a call the
 * model writes anyway is dropped with a call_not_allowed recovery, and the
 * answer says so: src/openai/dropped-calls.ts); parallel_tool_calls false
 * allows one (the first complete call ends the answer).
 */
function callsOf(request: Obj, tools: readonly string[]): "any" | "none" | "one" {
  if (request.tool_choice === "none") return "none";
  const builtin = isObj(request.harmony) && isObj(request.harmony.builtin_tools) ? request.harmony.builtin_tools : {};
  if (tools.length === 0 && builtin.browser !== true && builtin.python !== true) return "none";
  if (request.parallel_tool_calls === false) return "one";
  return "any";
}

/**
 * Request fields the sidecar cannot honour yet, refused by name rather than
 * dropped without a word: logprobs.
 */
function unsupported(request: Obj, endpoint: "chat" | "responses"): { param: string; message: string } | null {
  if (endpoint === "responses") {
    const include = Array.isArray(request.include) ? request.include : [];
    if (typeof request.top_logprobs === "number" || include.includes("message.output_text.logprobs"))
      return { param: "top_logprobs", message: "logprobs are not supported by the sidecar's Responses yet (Chat Completions has them)" };
    return null;
  }
  const lp = request.logprobs;
  if (lp !== undefined && lp !== null && typeof lp !== "boolean") return { param: "logprobs", message: "logprobs must be true or false" };
  const top = request.top_logprobs;
  if (top !== undefined && top !== null) {
    if (typeof top !== "number" || !Number.isInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS)
      return { param: "top_logprobs", message: `top_logprobs must be an integer from 0 to ${MAX_TOP_LOGPROBS}` };
    if (lp !== true) return { param: "top_logprobs", message: "top_logprobs needs logprobs: true" };
  }
  return null;
}

/**
 * What both endpoints do before the engine: check the sampling fields and
 * refuse what is not supported, then render `chat` (the request as a chat
 * request) for the client's tenant. Null when an error was answered.
 */
async function prepare(
  svc: Service,
  tenant: string,
  res: http.ServerResponse,
  request: Obj,
  chat: unknown,
  endpoint: "chat" | "responses",
): Promise<{ ids: number[] } | null> {
  const bad = checkSampling(request) ?? unsupported(request, endpoint);
  if (bad) {
    sendError(res, 400, "invalid_request_error", "bad_request", bad.message, bad.param);
    return null;
  }
  const rendered = await svc.render(chat, tenant);
  if (!rendered.ok) {
    const e = rendered.error;
    sendError(res, renderStatus(e.code), "invalid_request_error", e.code, e.message, e.path || null);
    return null;
  }
  return rendered;
}

/**
 * `tool_choice` checked against the declared tools, and for "required" or a
 * named function the call to force (generate's two steps), as token ids.
 */
function forcing(
  svc: Service,
  res: http.ServerResponse,
  choice: unknown,
  tools: readonly string[],
  n: number,
): { force: ForcedCall | null } | null {
  const c = toolChoiceOf(choice, tools);
  if (!c.ok) {
    sendError(res, 400, "invalid_request_error", "bad_request", c.message, "tool_choice");
    return null;
  }
  const pieces = forcedCallPieces(c.choice);
  if (pieces === null) return { force: null };
  if (n > 1) {
    sendError(res, 400, "invalid_request_error", "bad_request", 'tool_choice "required" or a named function takes n = 1', "n");
    return null;
  }
  const enc = svc.encoding;
  const ids = (parts: HarmonyPiece[]) =>
    parts.flatMap((p) => ("special" in p ? [enc.preset.specials[p.special]!] : enc.encodeOrdinary(p.text)));
  return { force: { prefix: ids(pieces.prefix), header: ids(pieces.header) } };
}

/** A structured answer that is not what `response_format` asked for (the answer itself is delivered as generated). */
interface SchemaMismatch {
  kind: "schema_mismatch";
  /** The choice (Chat; 0 for Responses). */
  choice: number;
  detail: string;
}

/** A structured answer whose check did not finish within its deadline (or could not run): delivered, and said to be unchecked. */
interface Unchecked {
  choice: number;
  reason: string;
}

/** What the answer's `harmony` says of its checks: the mismatches and the answers left unchecked; null when neither. */
type CheckNote = { recoveries?: SchemaMismatch[]; unchecked?: Unchecked[] } | null;

/**
 * Check each answer (by choice; null: none to check, e.g. a tool call)
 * against the requested format, on the answer-check thread; what does not
 * match, or could not be checked in time, is counted, logged and returned,
 * to be said in the answer's `harmony`.
 */
async function checkAnswers(svc: Service, format: AnswerFormat, answers: (string | null)[], response: string): Promise<CheckNote> {
  const checks = await Promise.all(answers.map((text) => (text === null ? Promise.resolve(null) : svc.checkAnswer(format.schema, text))));
  const out: SchemaMismatch[] = [];
  const unchecked: Unchecked[] = [];
  checks.forEach((c, choice) => {
    if (c === null) return;
    if ("unchecked" in c) {
      unchecked.push({ choice, reason: c.unchecked });
      svc.metrics.answerChecks.inc({ outcome: "unchecked" });
      svc.logger.warn({ response, format: format.name, choice, reason: c.unchecked }, "a structured answer could not be checked in time");
    } else {
      svc.metrics.answerChecks.inc({ outcome: c.ok ? "ok" : "mismatch" });
      if (!c.ok) out.push({ kind: "schema_mismatch", choice, detail: c.reason });
    }
  });
  if (out.length > 0) {
    svc.metrics.recoveries.inc({ kind: "schema_mismatch" }, out.length);
    for (const m of out)
      svc.logger.warn({ response, format: format.name, choice: m.choice, detail: m.detail }, "recovered malformed model output");
  }
  if (out.length === 0 && unchecked.length === 0) return null;
  return { ...(out.length > 0 ? { recoveries: out } : {}), ...(unchecked.length > 0 ? { unchecked } : {}) };
}

/** The answer's `harmony`: its recoveries (calls dropped where none were allowed, schema mismatches) and the answers left unchecked; null when there are none. */
function harmonyOf(dropped: readonly unknown[], note: CheckNote): Obj | null {
  const recoveries = [...dropped, ...(note?.recoveries ?? [])];
  const unchecked = note?.unchecked ?? [];
  if (recoveries.length === 0 && unchecked.length === 0) return null;
  return { ...(recoveries.length > 0 ? { recoveries } : {}), ...(unchecked.length > 0 ? { unchecked } : {}) };
}

/** OpenAI's error type for an upstream failure: the client's mistake (4xx) or the server's. */
function errorType(status: number): string {
  return status < 500 ? "invalid_request_error" : "upstream_error";
}

/** A render refused for its content is the client's 400; one stopped at its deadline is a 503. */
function renderStatus(code: string): number {
  return code === "render_timeout" ? 503 : 400;
}

/** A streamed answer's flow control (./client-flow.ts): its client dropped, counted and logged, once unread for the bound. */
function clientFlow(svc: Service, res: http.ServerResponse): ClientFlow {
  const ms = svc.limits.slowClientTimeoutMs;
  return new ClientFlow(res, ms, () => {
    svc.metrics.slowClients.inc({ transport: "http" });
    svc.logger.info({ slow_client_timeout_ms: ms }, "a client left its streamed answer unread; dropping it");
  });
}

function setupSse(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
}

// ---------------------------------------------------------------- chat

/** One of the front's paths, the methods it takes, and the response id it names. */
export interface FrontRoute {
  kind: "chat" | "responses" | "models" | "response" | "input_items";
  methods: readonly string[];
  /** `response` and `input_items`: the id in the path. */
  id: string;
}

const RESPONSE_PATH = /^\/v1\/responses\/([^/]+)(\/input_items)?$/;

/** The front's route for `path` (Chat Completions, Responses and stored responses, the engine's model list), or null. */
export function frontRoute(path: string): FrontRoute | null {
  if (path === "/v1/chat/completions") return { kind: "chat", methods: ["POST"], id: "" };
  if (path === "/v1/responses") return { kind: "responses", methods: ["POST"], id: "" };
  if (path === "/v1/models") return { kind: "models", methods: ["GET"], id: "" };
  const m = RESPONSE_PATH.exec(path);
  if (m === null) return null;
  let id = m[1]!;
  try {
    id = decodeURIComponent(id);
  } catch {
    // not percent-encoded UTF-8: looked up as it is (and not found)
  }
  return m[2] ? { kind: "input_items", methods: ["GET"], id } : { kind: "response", methods: ["GET", "DELETE"], id };
}

/** Sidecar mode's OpenAI-compatible endpoints, over one engine. */
export class OpenAIFront {
  constructor(
    private readonly svc: Service,
    readonly engine: Engine,
    readonly cfg: UpstreamConfig,
  ) {}

  /** The configured upstream URL. */
  get url(): string {
    return this.cfg.url;
  }

  /** How long the upstream may stay silent. */
  get timeoutMs(): number {
    return this.cfg.idleTimeoutMs;
  }

  /** Answer a request for a {@link frontRoute} (method checked by the caller). */
  handle(route: FrontRoute, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    switch (route.kind) {
      case "models":
        return handleModels(this.engine, res);
      case "chat":
        return handleChat(this.svc, this.engine, this.cfg, req, res);
      case "responses":
        return handleResponses(this.svc, this.engine, req, res);
      case "response":
        return req.method === "DELETE" ? deleteResponse(this.svc, route.id, req, res) : getResponse(this.svc, route.id, url, req, res);
      case "input_items":
        return listInputItems(this.svc, route.id, url, req, res);
    }
  }
}

async function handleChat(
  svc: Service,
  engine: Engine,
  cfg: UpstreamConfig,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) return sendError(res, read.status, "invalid_request_error", read.code, read.message);
  const request = read.value;
  if (!isObj(request)) return sendError(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
  const n = request.n === undefined || request.n === null ? 1 : request.n;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 16) {
    return sendError(res, 400, "invalid_request_error", "bad_request", "n must be an integer from 1 to 16", "n");
  }
  const tools = declaredToolNames(request);
  const forced = forcing(svc, res, request.tool_choice, tools, n);
  if (!forced) return;
  const tenant = svc.tenantOf(req.headers.authorization);
  const rendered = await prepare(svc, tenant, res, request, request, "chat");
  if (!rendered) return;
  const h = isObj(request.harmony) ? request.harmony : {};
  const reasoningField =
    h.reasoning_field === "reasoning_content" || h.reasoning_field === "reasoning" ? h.reasoning_field : cfg.reasoningField;
  const model = typeof request.model === "string" ? request.model : "gpt-oss";
  const stream = request.stream === true;
  const includeUsage = isObj(request.stream_options) && request.stream_options.include_usage === true;
  const includeReasoning = request.include_reasoning !== false;
  const id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
  const created = Math.floor(Date.now() / 1000);
  const accumulators = Array.from(
    { length: n },
    (_, i) => new ChatCompletionAccumulator({ id, model, created, reasoningField, choiceIndex: i }),
  );
  // logprobs: asked of the engine for every id; the content tokens' kept, per choice (./../openai/logprobs.ts)
  const topN = typeof request.top_logprobs === "number" ? request.top_logprobs : 0;
  const logprobs = request.logprobs === true ? Array.from({ length: n }, () => new ContentLogprobs(svc.vocabulary(), topN)) : null;
  const completion = {
    client: request,
    prompt: rendered.ids,
    n,
    maxTokens: request.max_completion_tokens ?? request.max_tokens,
    ...(logprobs ? { logprobs: topN } : {}),
  };
  let started = false;
  let reasoningTokens = 0;
  // each choice's ids and repairs, for the log line of a repaired answer (./repair-log.ts)
  const generated = new GeneratedIds();
  const repaired: (Record<string, number> | undefined)[] = [];
  /** A chunk of the front's own (logprobs, a schema mismatch, usage): no choices unless `fields` has some. */
  const extraChunk = (fields: object) => ({ id, object: "chat.completion.chunk", created, model, choices: [], ...fields });
  const flow = clientFlow(svc, res);
  const send = (chunk: object) => {
    if (!started) {
      setupSse(res);
      started = true;
    }
    flow.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  // response_format (already checked by the render): each choice's streamed answer, to check at the end
  const format = answerFormat(request);
  if (format !== null) svc.warmChecker();
  // `stop`: each choice's answer ends before its first stop string (src/openai/stop.ts); the engine is never asked
  const stops = StopStrings.of(request.stop) ? Array.from({ length: n }, () => StopStrings.of(request.stop)!) : null;
  const streamed: (string | null)[] = Array.from({ length: n }, () => null);
  const called: boolean[] = Array.from({ length: n }, () => false);
  // calls dropped where none were allowed, by choice: said in the answer
  const dropped: Obj[] = [];
  const open = {
    format: "openai.chat",
    model,
    reasoning_field: reasoningField,
    tools,
    calls: callsOf(request, tools),
  };
  const gen = generate(
    svc,
    engine,
    completion,
    open,
    tenant,
    (choice, obj) => {
      if (obj.harmony_error) return;
      const chunk = obj as unknown as HarmonyChatCompletionChunk;
      // one completion id across choices; each choice its own index
      chunk.id = id;
      chunk.created = created;
      for (const c of chunk.choices) {
        c.index = choice;
        if (!includeReasoning) {
          // include_reasoning: false (vLLM's field): the chain of thought stays with the sidecar
          delete c.delta.reasoning;
          delete c.delta.reasoning_content;
        }
      }
      const stop = stops?.[choice];
      if (stop) {
        // after the stop string nothing of the answer goes out; the parser's reasoning count still does
        if (stop.stopped && !(chunk.harmony && !chunk.harmony.tool_call_end)) return;
        for (const c of chunk.choices) {
          if (stop.stopped) break;
          if (c.delta.content) c.delta.content = stop.push(c.delta.content);
          if (stop.stopped) {
            delete c.delta.tool_calls;
            c.finish_reason = "stop";
            gen.endChoice(choice);
          } else if (c.finish_reason || c.delta.tool_calls) {
            // the answer's text ends here (a call follows, or the choice ends): what was held goes out first
            const rest = stop.flush();
            if (rest) c.delta.content = (c.delta.content ?? "") + rest;
          }
          if (c.delta.content === "") delete c.delta.content;
        }
        if (!chunk.harmony && chunk.choices.length > 0 && chunk.choices.every((c) => Object.keys(c.delta).length === 0 && !c.finish_reason))
          return; // all of it held back for now
      }
      if (
        !includeReasoning &&
        chunk.choices.length > 0 &&
        chunk.choices.every((c) => Object.keys(c.delta).length === 0 && !c.finish_reason)
      ) {
        return; // a chunk that only carried reasoning
      }
      const h = chunk.harmony;
      if (h) {
        if (h.tool_call_end) {
          // a call's whole (maybe repaired) arguments: for the non-streaming answer only
          h.tool_call_end.choice = choice;
          if (!stream) accumulators[choice]!.addChunk(chunk);
          return;
        }
        // the choice's reasoning tokens, for usage, and its repairs, for the log (not sent on)
        reasoningTokens += h.reasoning_tokens ?? 0;
        for (const r of h.recoveries ?? []) dropped.push({ ...r, choice });
        repaired[choice] = h.repairs;
        return;
      }
      if (stream) {
        if (format !== null)
          for (const c of chunk.choices) {
            if (c.delta.content) streamed[choice] = (streamed[choice] ?? "") + c.delta.content;
            if (c.finish_reason === "tool_calls") called[choice] = true; // no answer to check
          }
        send(chunk);
      } else accumulators[choice]!.addChunk(chunk);
    },
    {
      force: forced.force,
      ...(stream ? { backpressure: () => flow.wait() } : {}),
      onIds: (choice, ids, lps) => {
        generated.add(choice, ids);
        if (!logprobs) return;
        const content = logprobs[choice]?.push(ids, lps) ?? [];
        // streamed: the content tokens' logprobs in a chunk of their own (an empty delta), as they arrive
        if (stream && content.length > 0)
          send(extraChunk({ choices: [{ index: choice, delta: {}, logprobs: { content, refusal: null }, finish_reason: null }] }));
      },
    },
  );
  res.on("close", () => {
    if (!res.writableFinished) gen.abort(); // the client went away: stop the upstream, free the sessions
  });
  const { usage, error } = await gen.done;
  const usageObj = usage && chatUsage(usage, reasoningTokens);
  if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
  for (let choice = 0; choice < n; choice++)
    logRepaired(svc, { response: id, choice, recoveries: repaired[choice], tools, calls: open.calls }, generated);
  if (res.destroyed) return;
  if (!stream) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    const results = accumulators.map((a) => a.result());
    const note =
      format === null
        ? null
        : await checkAnswers(
            svc,
            format,
            results.map((r) => (r.choices[0]!.finish_reason === "tool_calls" ? null : r.choices[0]!.message.content)),
            id,
          );
    if (res.destroyed) return;
    const choices = results.flatMap((r) => r.choices);
    if (logprobs) choices.forEach((c, i) => ((c as { logprobs: unknown }).logprobs = { content: logprobs[i]!.content, refusal: null }));
    const harmony = harmonyOf(dropped, note);
    sendJson(res, 200, {
      ...results[0]!,
      choices,
      ...(usageObj ? { usage: usageObj } : {}),
      ...(harmony !== null ? { harmony } : {}),
    });
    return;
  }
  const note =
    format === null || error
      ? null
      : await checkAnswers(
          svc,
          format,
          streamed.map((text, i) => (called[i] ? null : (text ?? ""))),
          id,
        );
  if (res.destroyed) return;
  if (!started) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`data: ${JSON.stringify({ error: { message: error.message, type: "upstream_error", param: null, code: error.code } })}\n\n`);
  const harmony = harmonyOf(dropped, note);
  if (harmony !== null) res.write(`data: ${JSON.stringify(extraChunk({ harmony }))}\n\n`);
  if (includeUsage && usageObj) res.write(`data: ${JSON.stringify(extraChunk({ usage: usageObj }))}\n\n`);
  res.end("data: [DONE]\n\n");
}

// ---------------------------------------------------------------- responses

async function handleResponses(svc: Service, engine: Engine, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) return sendError(res, read.status, "invalid_request_error", read.code, read.message);
  const request = read.value;
  if (!isObj(request)) return sendError(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
  const tenant = svc.tenantOf(req.headers.authorization);
  const store = svc.responses;
  // store defaults to true, as in OpenAI's API; with storing off it is ignored, as vLLM does without its store
  const storing = store.enabled && request.store !== false;
  const previousId = request.previous_response_id ?? null;
  let previous: PreviousResponse | null = null;
  if (previousId !== null) {
    if (typeof previousId !== "string" || previousId === "")
      return sendError(
        res,
        400,
        "invalid_request_error",
        "bad_request",
        "previous_response_id must be a response id",
        "previous_response_id",
      );
    if (!store.enabled)
      return sendError(
        res,
        400,
        "invalid_request_error",
        "bad_request",
        "this server does not store responses (--response-store-bytes 0): send the whole conversation as input",
        "previous_response_id",
      );
    const found = await lookup(svc, tenant, previousId);
    if (!found.ok) {
      return found.reason === "unavailable"
        ? sendError(
            res,
            503,
            "server_error",
            "store_unavailable",
            "the response store did not answer in time; try again",
            "previous_response_id",
          )
        : sendError(
            res,
            404,
            "invalid_request_error",
            "previous_response_not_found",
            `Previous response with id '${previousId.slice(0, MAX_RESPONSE_ID)}' not found.`,
            "previous_response_id",
          );
    }
    previous = found.record;
  }
  const input = continuedInput(previous, request.input);
  if (!input.ok) return sendError(res, 400, "invalid_request_error", "bad_request", input.message, input.param);
  const items = await referencedItems(svc, tenant, input.items, previous);
  if (!items.ok)
    return items.code === "store_unavailable"
      ? sendError(res, 503, "server_error", "store_unavailable", items.message, items.param)
      : sendError(res, 404, "invalid_request_error", "item_not_found", items.message, items.param);
  const conv = responsesToChat({ ...request, input: items.items });
  if (!conv.ok)
    return sendError(res, conv.code === "item_not_found" ? 404 : 400, "invalid_request_error", conv.code, conv.message, conv.param);
  const tools = declaredToolNames(conv.chat);
  const forced = forcing(svc, res, responsesToolChoice(request.tool_choice), tools, 1);
  if (!forced) return;
  const rendered = await prepare(svc, tenant, res, request, conv.chat, "responses");
  if (!rendered) return;
  const model = typeof request.model === "string" ? request.model : "gpt-oss";
  const stream = request.stream === true;
  const completion = { client: request, prompt: rendered.ids, n: 1, maxTokens: request.max_output_tokens };
  let started = false;
  let final: Obj | null = null;
  const generated = new GeneratedIds();
  let repaired: Record<string, number> | undefined;
  const flow = clientFlow(svc, res);
  const write = (obj: Obj) => {
    if (!started) {
      setupSse(res);
      started = true;
    }
    flow.write(`event: ${obj.type as string}\ndata: ${JSON.stringify(obj)}\n\n`);
  };
  const format = answerFormat(conv.chat);
  if (format !== null) svc.warmChecker();
  const open = { format: "openai.responses", model, tools, calls: callsOf(request, tools) };
  // the output in the client's terms: custom and namespaced tools, reasoning in summary / encrypted_content when asked
  const reasoningAsked = isObj(request.reasoning) ? (request.reasoning.summary ?? request.reasoning.generate_summary) : undefined;
  const output = new ResponsesOutput({
    routes: conv.routes,
    summary: typeof reasoningAsked === "string" && reasoningAsked !== "none",
    carry: Array.isArray(request.include) && request.include.includes("reasoning.encrypted_content"),
  });
  let dropped: unknown[] = [];
  const onEvent = (obj: Obj, usage: UpstreamUsage | null): void => {
    if (isObj(obj.response)) {
      obj.response.previous_response_id = previousId;
      obj.response.store = storing;
    }
    if (isClosing(obj)) {
      final = obj;
      const reasoningTokens = isObj(obj.harmony) && typeof obj.harmony.reasoning_tokens === "number" ? obj.harmony.reasoning_tokens : 0;
      if (isObj(obj.harmony) && Array.isArray(obj.harmony.recoveries)) dropped = obj.harmony.recoveries;
      if (isObj(obj.harmony) && isObj(obj.harmony.repairs)) repaired = obj.harmony.repairs as Record<string, number>;
      delete obj.harmony;
      if (usage && isObj(obj.response)) obj.response.usage = responsesUsage(usage, reasoningTokens);
      // a stored response is announced complete only once it is stored (the next turn may go to another
      // replica), a structured one once its answer is checked
      if (storing || format !== null) return;
    }
    if (stream) write(obj);
  };
  const gen = generate(
    svc,
    engine,
    completion,
    open,
    tenant,
    (_choice, obj, usage) => {
      if (obj.harmony_error) return;
      if (!output.active) return onEvent(obj, usage);
      for (const ev of output.event(obj)) onEvent(ev, usage);
    },
    { force: forced.force, ...(stream ? { backpressure: () => flow.wait() } : {}), onIds: (choice, ids) => generated.add(choice, ids) },
  );
  res.on("close", () => {
    if (!res.writableFinished) gen.abort();
  });
  const { error } = await gen.done;
  if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
  const finished = final as Obj | null;
  const response = finished && isObj(finished.response) ? finished.response : null;
  const responseId = response && typeof response.id === "string" ? response.id : "";
  logRepaired(svc, { response: responseId, choice: 0, recoveries: repaired, tools, calls: open.calls }, generated);
  let note: CheckNote = null;
  if (format !== null && response && response.status === "completed") {
    // a response that only calls functions has no answer to check
    const text = typeof response.output_text === "string" && response.output_text !== "" ? response.output_text : null;
    note = await checkAnswers(svc, format, [text], responseId);
  }
  const harmony = response ? harmonyOf(dropped, note) : null;
  if (response && harmony !== null) response.harmony = harmony;
  if (storing && response && typeof response.id === "string") {
    const id = response.id;
    const outcome = await store.put(tenant, id, { response, input: storedInputItems(items.items, id.replace(/^resp_/, "")) });
    svc.metrics.responses.inc({ op: "store", outcome });
    if (outcome === "too_large") {
      response.store = false;
      svc.logger.warn({ response: id }, "a response's conversation is over the stored size bound: answered, not stored");
    }
  }
  if (res.destroyed) return;
  if (!stream) {
    if (error && (!response || response.status !== "completed"))
      return sendError(res, error.status, errorType(error.status), error.code, error.message);
    sendJson(res, 200, response);
    return;
  }
  if ((storing || format !== null) && finished) write(finished);
  if (!started) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`event: error\ndata: ${JSON.stringify({ type: "error", code: error.code, message: error.message, param: null })}\n\n`);
  res.end();
}

// ---------------------------------------------------------------- stored responses

/**
 * `items` with each `item_reference` replaced by the item it names, read
 * from the response store within the tenant: the response an id of the
 * sidecar's names (`rs_<base>_0` → `resp_<base>`), else the previous
 * response's items. One read per response.
 */
async function referencedItems(
  svc: Service,
  tenant: string,
  items: unknown[],
  previous: PreviousResponse | null,
): Promise<{ ok: true; items: unknown[] } | { ok: false; code: "item_not_found" | "store_unavailable"; message: string; param: string }> {
  const refs = itemReferences(items);
  if (refs.length === 0) return { ok: true, items };
  const records = new Map<string, PreviousResponse | null>();
  const out = [...items];
  for (const { index, id } of refs) {
    const param = `input[${index}].id`;
    const notFound = { ok: false as const, code: "item_not_found" as const, message: "", param };
    if (typeof id !== "string" || id === "" || id.length > MAX_RESPONSE_ID)
      return { ...notFound, message: "an item_reference needs the id of a stored item" };
    let found = previous ? findItem(previous, id) : null;
    const responseId = found === null ? responseIdOfItem(id) : null;
    if (found === null && responseId !== null && svc.responses.enabled) {
      if (!records.has(responseId)) {
        const got = await lookup(svc, tenant, responseId);
        if (!got.ok && got.reason === "unavailable")
          return { ok: false, code: "store_unavailable", message: "the response store did not answer in time; try again", param };
        records.set(responseId, got.ok ? got.record : null);
      }
      const record = records.get(responseId);
      found = record ? findItem(record, id) : null;
    }
    if (found === null || found.type === "item_reference")
      return {
        ...notFound,
        message: svc.responses.enabled
          ? `Item with id '${id}' not found.`
          : `Item with id '${id}' not found: this server does not store responses (--response-store-bytes 0)`,
      };
    out[index] = found;
  }
  return { ok: true, items: out };
}

/** The response stored under `id` for `tenant`, the outcome counted. */
async function lookup(svc: Service, tenant: string, id: string): Promise<Lookup> {
  const found = await svc.responses.get(tenant, id);
  svc.metrics.responses.inc({ op: "get", outcome: found.ok ? "found" : found.reason });
  return found;
}

function notFound(res: http.ServerResponse, id: string): void {
  // vLLM's words and status (vllm/entrypoints/openai/serving_responses.py, _make_not_found_error)
  sendError(
    res,
    404,
    "invalid_request_error",
    "response_not_found",
    `Response with id '${id.slice(0, MAX_RESPONSE_ID)}' not found.`,
    "response_id",
  );
}

function storeUnavailable(res: http.ServerResponse): void {
  sendError(res, 503, "server_error", "store_unavailable", "the response store did not answer in time; try again");
}

/** GET /v1/responses/{id}: the stored response (this tenant's only). */
async function getResponse(svc: Service, id: string, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (url.searchParams.get("stream") === "true")
    return sendError(
      res,
      400,
      "invalid_request_error",
      "bad_request",
      "a stored response is not streamed again: GET it without stream",
      "stream",
    );
  const found = await lookup(svc, svc.tenantOf(req.headers.authorization), id);
  if (found.ok) return sendJson(res, 200, found.record.response);
  if (found.reason === "unavailable") return storeUnavailable(res);
  notFound(res, id);
}

/** DELETE /v1/responses/{id}. */
async function deleteResponse(svc: Service, id: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const deleted = await svc.responses.delete(svc.tenantOf(req.headers.authorization), id);
  svc.metrics.responses.inc({ op: "delete", outcome: deleted === "unavailable" ? "unavailable" : deleted ? "deleted" : "not_found" });
  if (deleted === "unavailable") return storeUnavailable(res);
  if (!deleted) return notFound(res, id);
  sendJson(res, 200, { id, object: "response", deleted: true });
}

/** GET /v1/responses/{id}/input_items: a page of the stored input items (`limit` 1–100, default 20; `order` desc by default; `after` an item id). */
async function listInputItems(svc: Service, id: string, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const q = url.searchParams;
  const limit = q.has("limit") ? Number(q.get("limit")) : 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    return sendError(res, 400, "invalid_request_error", "bad_request", "limit must be an integer from 1 to 100", "limit");
  const order = q.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc")
    return sendError(res, 400, "invalid_request_error", "bad_request", "order must be asc or desc", "order");
  const found = await lookup(svc, svc.tenantOf(req.headers.authorization), id);
  if (!found.ok) return found.reason === "unavailable" ? storeUnavailable(res) : notFound(res, id);
  const items = order === "asc" ? found.record.input : [...found.record.input].reverse();
  const after = q.get("after");
  let start = 0;
  if (after !== null) {
    const at = items.findIndex((item) => item.id === after);
    if (at === -1)
      return sendError(res, 400, "invalid_request_error", "bad_request", "after names no input item of this response", "after");
    start = at + 1;
  }
  const data = items.slice(start, start + limit);
  sendJson(res, 200, {
    object: "list",
    data,
    first_id: data.length > 0 ? data[0]!.id : null,
    last_id: data.length > 0 ? data[data.length - 1]!.id : null,
    has_more: start + limit < items.length,
  });
}

async function handleModels(engine: Engine, res: http.ServerResponse): Promise<void> {
  try {
    const r = await engine.models();
    res.writeHead(r.status, { "content-type": "application/json", "content-length": Buffer.byteLength(r.body) });
    res.end(r.body);
  } catch (e) {
    const err = e as UpstreamError;
    sendError(res, err.status ?? 502, "upstream_error", err.code ?? "upstream_unreachable", err.message);
  }
}
