/**
 * The OpenAI-compatible front of sidecar mode: clients talk Chat Completions
 * or Responses to us; we render their request into Harmony prompt ids (with
 * chain-of-thought restoration), drive the upstream (vLLM) by token ids, and
 * parse its output with the resilient parser on the worker pool. Malformed
 * model output is repaired, never an HTTP 500; upstream failures become
 * well-formed OpenAI-style errors or a clean end of stream.
 */
import type http from "node:http";
import { ChatCompletionAccumulator, type HarmonyChatCompletionChunk } from "../adapters/openai-chat.js";
import { LocalConnection } from "../service/local.js";
import type { Service } from "../service/service.js";
import { listModels, streamCompletions, UpstreamError, type UpstreamUsage } from "./vllm.js";

export interface UpstreamConfig {
  url: string;
  /** No byte from the upstream for this long ends the request. */
  idleTimeoutMs: number;
  /** Reasoning field of chat deltas unless the request says otherwise. */
  reasoningField: "reasoning" | "reasoning_content";
}

/** Harmony's sampling stop tokens: <|return|> and <|call|>. */
const STOP_TOKEN_IDS = [200002, 200012];

/** Request fields passed through to the upstream completion as they are. */
const PASSTHROUGH = [
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "stop",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "logit_bias",
  "user",
];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function sendError(
  res: http.ServerResponse,
  status: number,
  type: string,
  code: string,
  message: string,
  param: string | null = null,
): void {
  if (!res.headersSent) sendJson(res, status, { error: { message, type, param, code } });
}

async function readJson(
  req: http.IncomingMessage,
  limit: number,
): Promise<{ ok: true; value: unknown } | { ok: false; status: number; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > limit) return { ok: false, status: 413, message: `the body is over ${limit} bytes` };
    chunks.push(c as Buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
  } catch (e) {
    return { ok: false, status: 400, message: `the body is not JSON: ${(e as Error).message}` };
  }
}

/** One upstream generation parsed into n streams of OpenAI objects. */
interface Generation {
  /** Ends when every choice's stream has finished. */
  done: Promise<{ usage: UpstreamUsage | null; error: UpstreamError | null }>;
  abort(): void;
}

function generate(
  svc: Service,
  cfg: UpstreamConfig,
  body: Obj,
  n: number,
  open: Obj,
  onObject: (choice: number, obj: Obj, usage: UpstreamUsage | null) => void,
): Generation {
  const local = new LocalConnection(svc);
  const ctrl = new AbortController();
  const names = Array.from({ length: n }, () => local.name("gen"));
  let pending = n;
  // declared before any op is sent: answers may arrive while send() runs (streams on the main thread)
  let usage: UpstreamUsage | null = null;
  let finishAll!: () => void;
  const allFinished = new Promise<void>((resolve) => {
    finishAll = resolve;
  });
  names.forEach((name, choice) => {
    local.listen(name, (ev) => {
      if (ev.openai) onObject(choice, ev.openai as Obj, usage);
      else if (ev.error && (ev.error as Obj).code === "worker_crashed") onObject(choice, { harmony_error: ev.error }, usage);
      const last = ev.done !== undefined || isClosing(ev.openai as Obj | undefined);
      if (last && --pending === 0) finishAll();
    });
  });
  local.send(names.map((stream) => ({ open: { stream, ...open } })));
  // a choice's finish reason, applied when the upstream stream ends (after its usage chunk)
  const finished = new Map<number, string>();
  const done = (async () => {
    let error: UpstreamError | null = null;
    try {
      for await (const chunk of streamCompletions(body, { baseUrl: cfg.url, idleTimeoutMs: cfg.idleTimeoutMs, signal: ctrl.signal })) {
        if (chunk.usage) usage = chunk.usage;
        const ops: Obj[] = [];
        for (const c of chunk.choices) {
          const name = names[c.index];
          if (!name || finished.has(c.index)) continue;
          if (c.token_ids.length > 0) ops.push({ tokens: { stream: name, ids: c.token_ids } });
          if (c.finish_reason !== null) finished.set(c.index, c.finish_reason === "length" ? "length" : "eos");
        }
        if (ops.length > 0) local.send(ops);
      }
    } catch (e) {
      if (!(e instanceof UpstreamError)) throw e;
      error = e;
    }
    // whatever did not finish: a broken or aborted generation ends cut short
    const cut = ctrl.signal.aborted ? "abort" : error ? "length" : "eos";
    local.send(names.map((stream, i) => ({ close: { stream, reason: finished.get(i) ?? cut } })));
    await allFinished;
    local.close();
    return { usage, error };
  })();
  return { done, abort: () => ctrl.abort() };
}

function isClosing(o: Obj | undefined): boolean {
  if (!o) return false;
  if (o.object === "chat.completion.chunk") return ((o.choices as Obj[]) ?? []).some((c) => c.finish_reason);
  return o.type === "response.completed" || o.type === "response.incomplete" || o.type === "response.failed";
}

function upstreamBody(request: Obj, prompt: number[], n: number, maxTokens: unknown): Obj {
  const body: Obj = {
    model: request.model,
    prompt,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    skip_special_tokens: false,
    stop_token_ids: STOP_TOKEN_IDS,
    n,
  };
  if (typeof maxTokens === "number") body.max_tokens = maxTokens;
  for (const k of PASSTHROUGH) if (request[k] !== undefined) body[k] = request[k];
  return body;
}

function setupSse(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
}

// ---------------------------------------------------------------- chat

export async function handleChat(svc: Service, cfg: UpstreamConfig, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) return sendError(res, read.status, "invalid_request_error", "bad_json", read.message);
  const request = read.value;
  if (!isObj(request)) return sendError(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
  const n = request.n === undefined || request.n === null ? 1 : request.n;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 16) {
    return sendError(res, 400, "invalid_request_error", "bad_request", "n must be an integer from 1 to 16", "n");
  }
  const rendered = svc.render(request);
  if (!rendered.ok)
    return sendError(res, 400, "invalid_request_error", rendered.error.code, rendered.error.message, rendered.error.path || null);
  const h = isObj(request.harmony) ? request.harmony : {};
  const reasoningField =
    h.reasoning_field === "reasoning_content" || h.reasoning_field === "reasoning" ? h.reasoning_field : cfg.reasoningField;
  const model = typeof request.model === "string" ? request.model : "gpt-oss";
  const stream = request.stream === true;
  const includeUsage = isObj(request.stream_options) && request.stream_options.include_usage === true;
  const id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
  const created = Math.floor(Date.now() / 1000);
  const accumulators = Array.from(
    { length: n },
    (_, i) => new ChatCompletionAccumulator({ id, model, created, reasoningField, choiceIndex: i }),
  );
  const body = upstreamBody(request, rendered.ids, n, request.max_completion_tokens ?? request.max_tokens);
  let started = false;
  const gen = generate(svc, cfg, body, n, { format: "openai.chat", model, reasoning_field: reasoningField }, (choice, obj) => {
    if (obj.harmony_error) return;
    const chunk = obj as unknown as HarmonyChatCompletionChunk;
    // one completion id across choices; each choice its own index
    chunk.id = id;
    chunk.created = created;
    for (const c of chunk.choices) c.index = choice;
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
  const usageObj = usage && {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
  if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
  if (res.destroyed) return;
  if (!stream) {
    if (error) return sendError(res, error.status, "upstream_error", error.code, error.message);
    const results = accumulators.map((a) => a.result());
    sendJson(res, 200, { ...results[0]!, choices: results.flatMap((r) => r.choices), ...(usageObj ? { usage: usageObj } : {}) });
    return;
  }
  if (!started) {
    if (error) return sendError(res, error.status, "upstream_error", error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`data: ${JSON.stringify({ error: { message: error.message, type: "upstream_error", param: null, code: error.code } })}\n\n`);
  if (includeUsage && usageObj)
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage: usageObj })}\n\n`);
  res.end("data: [DONE]\n\n");
}

// ---------------------------------------------------------------- responses

/** Responses `input` (and `instructions`, `tools`) → a chat request for the renderer. */
export function responsesToChat(request: Obj): { ok: true; chat: Obj } | { ok: false; message: string; param: string } {
  const messages: Obj[] = [];
  if (typeof request.instructions === "string" && request.instructions !== "")
    messages.push({ role: "developer", content: request.instructions });
  const input = request.input;
  const textOf = (content: unknown): string | null => {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return null;
    return content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
  };
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else if (Array.isArray(input)) {
    let assistant: Obj | null = null;
    const flush = () => {
      if (assistant) messages.push(assistant);
      assistant = null;
    };
    const pending = (): Obj => (assistant ??= { role: "assistant", content: null });
    for (const [i, item] of input.entries()) {
      if (!isObj(item)) return { ok: false, message: "input items must be objects", param: `input[${i}]` };
      const type = item.type ?? "message";
      if (type === "message") {
        const text = textOf(item.content);
        if (text === null) return { ok: false, message: "message content must be text", param: `input[${i}].content` };
        if (item.role === "assistant") {
          const a = pending();
          a.content = ((a.content as string | null) ?? "") + text;
          flush();
        } else {
          flush();
          messages.push({ role: item.role, content: text });
        }
      } else if (type === "reasoning") {
        const parts = Array.isArray(item.content) ? item.content : Array.isArray(item.summary) ? item.summary : [];
        const a = pending();
        a.reasoning =
          ((a.reasoning as string | undefined) ?? "") + parts.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
      } else if (type === "function_call") {
        const a = pending();
        const calls = (a.tool_calls as Obj[] | undefined) ?? [];
        calls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } });
        a.tool_calls = calls;
      } else if (type === "function_call_output") {
        flush();
        messages.push({
          role: "tool",
          tool_call_id: item.call_id,
          content: typeof item.output === "string" ? item.output : JSON.stringify(item.output),
        });
      } else return { ok: false, message: `unsupported input item type ${JSON.stringify(type)}`, param: `input[${i}].type` };
    }
    flush();
  } else return { ok: false, message: "input must be a string or an array of items", param: "input" };
  const tools = Array.isArray(request.tools)
    ? request.tools
        .filter((t) => isObj(t) && t.type === "function")
        .map((t) => {
          const f = t as Obj;
          return { type: "function", function: { name: f.name, description: f.description, parameters: f.parameters } };
        })
    : undefined;
  const effort = isObj(request.reasoning) ? request.reasoning.effort : undefined;
  return {
    ok: true,
    chat: {
      messages,
      ...(tools ? { tools } : {}),
      ...(effort ? { reasoning_effort: effort } : {}),
      ...(isObj(request.harmony) ? { harmony: request.harmony } : {}),
    },
  };
}

export async function handleResponses(
  svc: Service,
  cfg: UpstreamConfig,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) return sendError(res, read.status, "invalid_request_error", "bad_json", read.message);
  const request = read.value;
  if (!isObj(request)) return sendError(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
  const conv = responsesToChat(request);
  if (!conv.ok) return sendError(res, 400, "invalid_request_error", "bad_request", conv.message, conv.param);
  const rendered = svc.render(conv.chat);
  if (!rendered.ok)
    return sendError(res, 400, "invalid_request_error", rendered.error.code, rendered.error.message, rendered.error.path || null);
  const model = typeof request.model === "string" ? request.model : "gpt-oss";
  const stream = request.stream === true;
  const body = upstreamBody(request, rendered.ids, 1, request.max_output_tokens);
  let started = false;
  let final: Obj | null = null;
  const gen = generate(svc, cfg, body, 1, { format: "openai.responses", model }, (_choice, obj, usage) => {
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
      return sendError(res, error.status, "upstream_error", error.code, error.message);
    sendJson(res, 200, response);
    return;
  }
  if (!started) {
    if (error) return sendError(res, error.status, "upstream_error", error.code, error.message);
    setupSse(res);
  }
  if (error)
    res.write(`event: error\ndata: ${JSON.stringify({ type: "error", code: error.code, message: error.message, param: null })}\n\n`);
  res.end();
}

function responsesUsage(usage: UpstreamUsage): Obj {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

export async function handleModels(cfg: UpstreamConfig, res: http.ServerResponse): Promise<void> {
  try {
    const r = await listModels(cfg.url, cfg.idleTimeoutMs);
    res.writeHead(r.status, { "content-type": "application/json", "content-length": Buffer.byteLength(r.body) });
    res.end(r.body);
  } catch (e) {
    const err = e as UpstreamError;
    sendError(res, err.status ?? 502, "upstream_error", err.code ?? "upstream_unreachable", err.message);
  }
}
