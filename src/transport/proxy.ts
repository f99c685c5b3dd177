/**
 * In a vLLM pod (the sidecar on the pod's public port, vLLM on localhost, as
 * llm-d and KServe lay it out) every path the sidecar does not serve itself
 * goes to the upstream unchanged: `/health`, `/tokenize`, `/v1/completions`,
 * `/v1/embeddings`, … streaming included, with the client's headers less
 * the hop-by-hop ones (RFC 9110 §7.6.1). (`/metrics`, the engine's series
 * ahead of the sidecar's, is ./engine-metrics.ts.)
 */
import type http from "node:http";
import { pipeline } from "node:stream/promises";
import { undici } from "../upstream/undici.js";
import { sendOpenAIError } from "./respond.js";

/** Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1), and the Host, which is the upstream's. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);

function forwardable(headers: http.IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const named = new Set<string>();
  const conn = headers.connection;
  for (const c of (Array.isArray(conn) ? conn.join(",") : (conn ?? "")).split(",")) named.add(c.trim().toLowerCase());
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    const key = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(key) || named.has(key)) continue;
    out[key] = v;
  }
  return out;
}

/**
 * Send a request on to the upstream at `base` and stream its answer back; a
 * failure is a 502 in OpenAI's error shape, as the engine's own errors are
 * (or ends a started answer). `path` is the target as the
 * edge read it (./target.ts: the path its authorization was decided by),
 * never the raw `req.url`. With the engine's key (`--upstream-api-key`) it
 * replaces the client's Authorization, which is the sidecar's token when
 * there is one.
 */
export async function proxy(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  base: string,
  timeoutMs: number,
  path: string,
  apiKey?: string,
): Promise<void> {
  const target = base.replace(/\/+$/, "") + path;
  const ctrl = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) ctrl.abort(); // the client went away
  });
  try {
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const up = await undici().request(target, {
      method: (req.method ?? "GET") as "GET",
      headers: apiKey ? { ...forwardable(req.headers), authorization: `Bearer ${apiKey}` } : forwardable(req.headers),
      body: hasBody ? req : null,
      signal: ctrl.signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    res.writeHead(up.statusCode, forwardable(up.headers as Record<string, string | string[] | undefined>));
    await pipeline(up.body, res);
  } catch (e) {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendOpenAIError(res, 502, "upstream_unreachable", `cannot reach the upstream: ${(e as Error).message}`.slice(0, 300));
  }
}
