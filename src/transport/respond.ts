/**
 * The HTTP edge's answers, each error shape built by one function:
 * - the service's own paths (`/v1/render`, `/v1/parse`, `/metrics`,
 *   `/inspect`, …): {@link sendError}, `{"error": {"code", "message", …}}`
 *   (src/core/errors.ts's `errorBody`, which the inspector's worker uses too);
 * - the OpenAI paths (the front, `/v1/models`, and in sidecar mode the paths
 *   passed on to the engine): {@link sendOpenAIError} and
 *   {@link openaiError}, OpenAI's shape (`message`, `type`, `param`, `code`);
 * - a refused WebSocket upgrade: {@link refuseUpgrade}, a status line and
 *   `code: message` as plain text.
 * Every code is one of src/core/errors.ts's tables (docs/errors.md).
 */
import http from "node:http";
import type { Duplex } from "node:stream";
import { errorBody, type ErrorCode } from "../core/errors.js";
import { parseJson } from "../core/json.js";

/** Answer with a JSON body. */
export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** An error answer on the service's own paths: `{"error": {"code", "message", …extra}}` (nothing once the answer has started). */
export function sendError(
  res: http.ServerResponse,
  status: number,
  code: ErrorCode,
  message: string,
  extra?: Readonly<Record<string, unknown>>,
): void {
  if (!res.headersSent) sendJson(res, status, errorBody(code, message, extra));
}

/** OpenAI's error types: the client's mistake, the server's, or the engine's behind it. */
export type OpenAIErrorType = "invalid_request_error" | "server_error" | "upstream_error";

/**
 * The type an OpenAI error body gets unless the caller names one: a 4xx is
 * the client's; a 5xx is the engine's when the code says so (`upstream_*`,
 * `parse_failed`: a generation that failed), else the server's.
 */
export function openaiErrorType(status: number, code: ErrorCode): OpenAIErrorType {
  if (status < 500) return "invalid_request_error";
  return code.startsWith("upstream_") || code === "parse_failed" ? "upstream_error" : "server_error";
}

export interface OpenAIErrorOptions {
  /** Default: {@link openaiErrorType} of the status and code. */
  type?: OpenAIErrorType;
  /** The request field at fault (`messages[2].content`, `n`), or null. */
  param?: string | null;
}

/**
 * OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`:
 * the whole answer of a failed request, or an event inside a stream that
 * has begun (Chat: `data: {"error": …}`).
 */
export function openaiError(
  status: number,
  code: ErrorCode,
  message: string,
  { type = openaiErrorType(status, code), param = null }: OpenAIErrorOptions = {},
): { error: { message: string; type: OpenAIErrorType; param: string | null; code: ErrorCode } } {
  return { error: { message, type, param, code } };
}

/** An error answer on the OpenAI paths, in OpenAI's shape (nothing once the answer has started). */
export function sendOpenAIError(
  res: http.ServerResponse,
  status: number,
  code: ErrorCode,
  message: string,
  opts?: OpenAIErrorOptions,
): void {
  if (!res.headersSent) sendJson(res, status, openaiError(status, code, message, opts));
}

/** Refuse a WebSocket upgrade: the status, and `code: message` as plain text for a person reading it; the socket is closed. */
export function refuseUpgrade(socket: Duplex, status: number, code: ErrorCode, message: string): void {
  const text = `${code}: ${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ""}\r\nconnection: close\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}

/** Read a JSON request body of at most `limit` bytes. */
export async function readJson(
  req: http.IncomingMessage,
  limit: number,
): Promise<{ ok: true; value: unknown } | { ok: false; status: number; code: "too_large" | "too_deep" | "bad_json"; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > limit) {
      req.resume(); // drain the rest unread, so the answer can be read
      return { ok: false, status: 413, code: "too_large", message: `the body is over ${limit} bytes` };
    }
    chunks.push(c as Buffer);
  }
  const parsed = parseJson(Buffer.concat(chunks).toString("utf8"));
  if (!parsed.ok) return { ok: false, status: 400, code: parsed.code, message: `the body is not usable JSON: ${parsed.message}` };
  return parsed;
}
