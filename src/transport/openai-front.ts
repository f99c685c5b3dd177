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
import { declaredToolNames } from "../openai/request.js";
import { checkSampling } from "../openai/sampling.js";
import { chatUsage, responsesToChat, responsesUsage } from "../openai/responses-input.js";
import { generate, isClosing } from "../service/generate.js";
import type { Service } from "../service/service.js";
import type { Engine, UpstreamConfig, UpstreamError } from "../upstream/engine.js";
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
 * Which calls the parser lets through: tool_choice "none" allows none (a
 * call the model writes anyway is read as text, with a call_not_allowed
 * recovery); parallel_tool_calls false allows one (the first complete call
 * ends the answer).
 */
function callsOf(request: Obj): "any" | "none" | "one" {
  if (request.tool_choice === "none") return "none";
  if (request.parallel_tool_calls === false) return "one";
  return "any";
}

/**
 * Request fields the sidecar cannot honour yet, refused by name rather than
 * dropped without a word: tool_choice "required" or a named function,
 * response_format other than text, logprobs.
 */
function unsupported(request: Obj): { param: string; message: string } | null {
  const choice = request.tool_choice;
  if (choice !== undefined && choice !== null && choice !== "auto" && choice !== "none") {
    return {
      param: "tool_choice",
      message: 'tool_choice "required" or a named function is not supported by the sidecar yet ("auto" and "none" are)',
    };
  }
  const format = request.response_format;
  if (isObj(format) && format.type !== undefined && format.type !== "text") {
    return { param: "response_format", message: "response_format json_schema or json_object is not supported by the sidecar yet" };
  }
  if (isObj(request.text) && isObj(request.text.format) && request.text.format.type !== undefined && request.text.format.type !== "text") {
    return { param: "text.format", message: "structured output (text.format) is not supported by the sidecar yet" };
  }
  if (
    (request.logprobs !== undefined && request.logprobs !== null && request.logprobs !== false) ||
    typeof request.top_logprobs === "number"
  ) {
    return { param: "logprobs", message: "logprobs are not supported by the sidecar yet" };
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
  req: http.IncomingMessage,
  res: http.ServerResponse,
  request: Obj,
  chat: unknown,
): Promise<{ tenant: string; rendered: { ids: number[] } } | null> {
  const bad = checkSampling(request) ?? unsupported(request);
  if (bad) {
    sendError(res, 400, "invalid_request_error", "bad_request", bad.message, bad.param);
    return null;
  }
  const tenant = svc.tenantOf(req.headers.authorization);
  const rendered = await svc.render(chat, tenant);
  if (!rendered.ok) {
    const e = rendered.error;
    sendError(res, renderStatus(e.code), "invalid_request_error", e.code, e.message, e.path || null);
    return null;
  }
  return { tenant, rendered };
}

/** OpenAI's error type for an upstream failure: the client's mistake (4xx) or the server's. */
function errorType(status: number): string {
  return status < 500 ? "invalid_request_error" : "upstream_error";
}

/** A render refused for its content is the client's 400; one stopped at its deadline is a 503. */
function renderStatus(code: string): number {
  return code === "render_timeout" ? 503 : 400;
}

function setupSse(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
}

// ---------------------------------------------------------------- chat

/** The front's paths: Chat Completions, Responses, and the engine's model list. */
export const OPENAI_PATHS: ReadonlySet<string> = new Set(["/v1/chat/completions", "/v1/responses", "/v1/models"]);

/** Sidecar mode's OpenAI-compatible endpoints, over one engine. */
export class OpenAIFront {
  constructor(
    private readonly svc: Service,
    private readonly engine: Engine,
    private readonly cfg: UpstreamConfig,
  ) {}

  /** The configured upstream URL. */
  get url(): string {
    return this.cfg.url;
  }

  /** How long the upstream may stay silent. */
  get timeoutMs(): number {
    return this.cfg.idleTimeoutMs;
  }

  /** Answer a request for one of {@link OPENAI_PATHS} (method checked by the caller). */
  handle(path: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (path === "/v1/models") return handleModels(this.engine, res);
    if (path === "/v1/chat/completions") return handleChat(this.svc, this.engine, this.cfg, req, res);
    return handleResponses(this.svc, this.engine, req, res);
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
  const prepared = await prepare(svc, req, res, request, request);
  if (!prepared) return;
  const { tenant, rendered } = prepared;
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
  const completion = { client: request, prompt: rendered.ids, n, maxTokens: request.max_completion_tokens ?? request.max_tokens };
  let started = false;
  const open = {
    format: "openai.chat",
    model,
    reasoning_field: reasoningField,
    tools: declaredToolNames(request),
    calls: callsOf(request),
  };
  const gen = generate(svc, engine, completion, open, tenant, (choice, obj) => {
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
    if (
      !includeReasoning &&
      chunk.choices.length > 0 &&
      chunk.choices.every((c) => Object.keys(c.delta).length === 0 && !c.finish_reason)
    ) {
      return; // a chunk that only carried reasoning
    }
    if (chunk.harmony) {
      // a call's whole (maybe repaired) arguments: for the non-streaming answer only
      chunk.harmony.tool_call_end.choice = choice;
      if (!stream) accumulators[choice]!.addChunk(chunk);
      return;
    }
    if (stream) {
      if (!started) {
        setupSse(res);
        started = true;
      }
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    } else accumulators[choice]!.addChunk(chunk);
  });
  res.on("close", () => {
    if (!res.writableFinished) gen.abort(); // the client went away: stop the upstream, free the sessions
  });
  const { usage, error } = await gen.done;
  const usageObj = usage && chatUsage(usage);
  if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
  if (res.destroyed) return;
  if (!stream) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    const results = accumulators.map((a) => a.result());
    sendJson(res, 200, { ...results[0]!, choices: results.flatMap((r) => r.choices), ...(usageObj ? { usage: usageObj } : {}) });
    return;
  }
  if (!started) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`data: ${JSON.stringify({ error: { message: error.message, type: "upstream_error", param: null, code: error.code } })}\n\n`);
  if (includeUsage && usageObj)
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage: usageObj })}\n\n`);
  res.end("data: [DONE]\n\n");
}

// ---------------------------------------------------------------- responses

async function handleResponses(svc: Service, engine: Engine, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) return sendError(res, read.status, "invalid_request_error", read.code, read.message);
  const request = read.value;
  if (!isObj(request)) return sendError(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
  const conv = responsesToChat(request);
  if (!conv.ok) return sendError(res, 400, "invalid_request_error", "bad_request", conv.message, conv.param);
  const prepared = await prepare(svc, req, res, request, conv.chat);
  if (!prepared) return;
  const { tenant, rendered } = prepared;
  const model = typeof request.model === "string" ? request.model : "gpt-oss";
  const stream = request.stream === true;
  const completion = { client: request, prompt: rendered.ids, n: 1, maxTokens: request.max_output_tokens };
  let started = false;
  let final: Obj | null = null;
  const open = { format: "openai.responses", model, tools: declaredToolNames(conv.chat), calls: callsOf(request) };
  const gen = generate(svc, engine, completion, open, tenant, (_choice, obj, usage) => {
    if (obj.harmony_error) return;
    if (isClosing(obj)) {
      final = obj;
      if (usage && isObj(obj.response)) obj.response.usage = responsesUsage(usage);
    }
    if (stream) {
      if (!started) {
        setupSse(res);
        started = true;
      }
      res.write(`event: ${obj.type as string}\ndata: ${JSON.stringify(obj)}\n\n`);
    }
  });
  res.on("close", () => {
    if (!res.writableFinished) gen.abort();
  });
  const { error } = await gen.done;
  if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
  if (res.destroyed) return;
  const finished = final as Obj | null;
  const response = finished && isObj(finished.response) ? finished.response : null;
  if (!stream) {
    if (error && (!response || response.status !== "completed"))
      return sendError(res, error.status, errorType(error.status), error.code, error.message);
    sendJson(res, 200, response);
    return;
  }
  if (!started) {
    if (error) return sendError(res, error.status, errorType(error.status), error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`event: error\ndata: ${JSON.stringify({ type: "error", code: error.code, message: error.message, param: null })}\n\n`);
  res.end();
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
