/** The simulator's HTTP plumbing: JSON answers, the bounded body reader, the stream headers. */
import type http from "node:http";
import { parseJson } from "../core/json.js";

export const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };
/** The header naming each generating answer's id (its record at `GET /simulate/requests?id=`). */
export const REQUEST_ID_HEADER = "x-simulator-request-id";

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** The request's body parsed as JSON (undefined when empty); a 413 past `maxBodyBytes`, a 400 when not JSON. */
export async function readBody(
  req: http.IncomingMessage,
  maxBodyBytes: number,
): Promise<{ ok: true; value: unknown } | { ok: false; status: number; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > maxBodyBytes) {
      req.resume();
      return { ok: false, status: 413, message: `the body is over ${maxBodyBytes} bytes` };
    }
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return { ok: true, value: undefined };
  const parsed = parseJson(text);
  return parsed.ok ? parsed : { ok: false, status: 400, message: parsed.message };
}
