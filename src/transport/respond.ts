/** Small HTTP answers shared by the HTTP edge and the OpenAI front. */
import type http from "node:http";

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
