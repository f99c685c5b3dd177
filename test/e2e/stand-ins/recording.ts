/** What the engine stand-ins share: a loopback server that records every request before routing it. */
import http from "node:http";

type Obj = Record<string, unknown>;

/** gpt-oss's named specials (o200k_harmony), as their text. */
export const SPECIAL_TEXT: Readonly<Record<number, string>> = {
  199998: "<|startoftext|>",
  199999: "<|endoftext|>",
  200002: "<|return|>",
  200003: "<|constrain|>",
  200005: "<|channel|>",
  200006: "<|start|>",
  200007: "<|end|>",
  200008: "<|message|>",
  200012: "<|call|>",
};

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body parsed as a JSON object (undefined when empty, not JSON, or not an object). */
  body: Obj | undefined;
  /** The status answered. */
  status: number;
  /** For streams: each SSE `data:` payload sent, parsed ("[DONE]" as the string). */
  events: unknown[];
}

/** An http.Server that reads each request's body, records it in `received`, then calls `route`. */
export function recordingServer(
  received: Received[],
  route: (req: http.IncomingMessage, res: http.ServerResponse, rec: Received) => Promise<void>,
): http.Server {
  return http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: Obj | undefined;
      try {
        const v: unknown = raw ? JSON.parse(raw) : undefined;
        body = v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined;
      } catch {
        body = undefined;
      }
      const path = new URL(req.url ?? "/", "http://x").pathname;
      const rec: Received = { method: req.method ?? "", path, headers: req.headers, body, status: 0, events: [] };
      received.push(rec);
      route(req, res, rec).catch(() => res.destroy());
    });
  });
}
