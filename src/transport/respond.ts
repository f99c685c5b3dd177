/** Small HTTP answers shared by the HTTP edge and the OpenAI front. */
import type http from "node:http";
import { parseJson } from "../core/json.js";

/** Answer with a JSON body. */
export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
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
