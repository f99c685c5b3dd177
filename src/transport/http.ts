/**
 * The HTTP edge: WebSocket streams on /v1/stream, and the operations
 * endpoints /healthz, /readyz and /metrics, on one port.
 *
 * WebSocket close codes: 1001 server shutting down, 1002 a frame that breaks
 * the protocol, 1007 a text frame that is not UTF-8, 1008 too many fragments
 * or buffered parts of one message, 1009 a frame over the size limit (those
 * four from `ws`), 4408 idle timeout, 4409 a reader that left its answers
 * unread (docs/errors.md). A missing or wrong bearer token is refused at the upgrade with
 * HTTP 401.
 */
import http from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import type { Transport } from "../service/connection.js";
import type { Service } from "../service/service.js";
import { CLOSE_CODES, type ErrorCode } from "../core/errors.js";
import { frontRoute, type FrontRoute, type OpenAIFront } from "./openai-front.js";
import { Access, OPEN_ACCESS, type AccessPolicy } from "./access.js";
import { closeInspect, handleInspect, handleParse, inspectRoute, PARSE_PATH } from "./inspect.js";
import { engineSeries } from "./engine-metrics.js";
import { proxy } from "./proxy.js";
import { readTarget } from "./target.js";
import { readJson, refuseUpgrade, sendError, sendJson as json, sendOpenAIError } from "./respond.js";

export const STREAM_PATH = "/v1/stream";
/** The paths the sidecar answers itself (in sidecar mode every other one goes to the upstream). */
const OWN_PATHS: ReadonlySet<string> = new Set(["/metrics", "/v1/stream", "/healthz", "/readyz"]);
/** Upstream paths that need no token: its health probes. */
const OPEN_UPSTREAM_PATHS: ReadonlySet<string> = new Set(["/health", "/ping", "/version"]);
/** How long /metrics waits for the upstream's. */
const METRICS_TIMEOUT_MS = 2000;
export const RENDER_PATH = "/v1/render";
/** How long a slow reader's close frame (4409) may wait to be read before its socket is cut. */
export const SLOW_READER_CLOSE_MS = 1000;
/** How long a corked WebSocket answer may wait for later answers of the same tick to share its write (checked between frames: a frame being handled finishes first). */
export const MAX_CORK_MS = 0.5;

/**
 * Answers sent in one tick (the frames of one socket read, say) leave in
 * one write: a write per answer is a large share of the main thread at the
 * peak load, and corked, several answers share a write. But ws
 * hands over every frame of a read in one go, so after a burst (a client
 * that stalled, then sent what it owed) the first answers would wait for
 * the last frame's parsing: once the cork has held answers for
 * MAX_CORK_MS it is let go before the next frame is handled or the next
 * answer written, and at the end of the tick in any case.
 */
export class Cork {
  private corked = false;
  private since = 0;
  constructor(
    private readonly socket: { cork(): void; uncork(): void },
    private readonly now: () => number,
    private readonly atTickEnd: (f: () => void) => void,
  ) {}

  /** Call before handling each frame: lets go of answers that have waited MAX_CORK_MS. */
  check(): void {
    this.expire(this.now());
  }

  /** Call before each write. */
  beforeWrite(): void {
    const now = this.now(); // one clock read serves the age check and a new cork's start
    this.expire(now);
    if (!this.corked) {
      this.corked = true;
      this.since = now;
      this.socket.cork();
      this.atTickEnd(() => this.release());
    }
  }

  private expire(now: number): void {
    if (this.corked && now - this.since > MAX_CORK_MS) this.release();
  }

  /** Hand what is corked to the socket now. */
  release(): void {
    if (!this.corked) return;
    this.corked = false;
    this.socket.uncork();
  }
}

/** What GET / lists: each path with what it is. */
export function homeLinks(sidecar: boolean): { path: string; what: string }[] {
  return [
    { path: "/inspect", what: "the stream inspector: paste Harmony text, token ids or an SSE log and see what the parser makes of it" },
    { path: STREAM_PATH, what: "WebSocket streams of token ids in, events out (docs/protocol.md)" },
    { path: "/v1/parse", what: "POST {text | ids}: the events (docs/inspect.md)" },
    { path: RENDER_PATH, what: "POST a chat request: the Harmony prompt that continues it" },
    ...(sidecar
      ? [
          { path: "/v1/chat/completions", what: "the OpenAI-compatible front (POST)" },
          { path: "/v1/responses", what: "the OpenAI-compatible front (POST)" },
          { path: "/v1/models", what: "the engine's models" },
        ]
      : []),
    { path: "/healthz", what: "liveness" },
    { path: "/readyz", what: "readiness" },
    { path: "/metrics", what: "Prometheus metrics" },
  ];
}

function homePage(links: { path: string; what: string }[]): string {
  const esc = (t: string) => t.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
  const items = links
    .map(
      (l) =>
        `<li>${l.path.startsWith("/v1/") && l.path !== "/v1/models" ? `<code>${esc(l.path)}</code>` : `<a href="${esc(l.path)}"><code>${esc(l.path)}</code></a>`}: ${esc(l.what)}</li>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="light dark"><title>harmony-sidecar</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}code{font-size:.95em}li{margin:.3rem 0}</style></head>
<body><h1>harmony-sidecar</h1>
<p>Turns gpt-oss Harmony token streams into structured events. Start with the <a href="/inspect">inspector</a>.</p>
<ul>
${items}
</ul>
<p>The protocol, every setting and every code: <code>docs/protocol.md</code>, <code>docs/errors.md</code> and <code>docs/inspect.md</code> in the repository.</p>
</body></html>
`;
}

export interface HttpEdge {
  port: number;
  stopAccepting(): void;
  close(): Promise<void>;
}

/**
 * Listen on `host:port`; with a front (sidecar mode), its OpenAI paths are
 * served too.
 */
export async function startHttp(
  svc: Service,
  front: OpenAIFront | null,
  host: string,
  port: number,
  policy: AccessPolicy = OPEN_ACCESS,
): Promise<HttpEdge> {
  const access = new Access(policy, host);
  const limits = svc.limits;
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxFrameBytes, perMessageDeflate: false });
  let accepting = true;

  /** Whether a path speaks OpenAI's API (the front's paths, and in sidecar mode the engine's, passed on): its errors take OpenAI's shape. */
  const openaiPath = (path: string): boolean =>
    frontRoute(path) !== null || (front !== null && !OWN_PATHS.has(path) && path !== "/" && path !== RENDER_PATH && !inspectRoute(path));

  /** A refusal in the shape of the path's API: OpenAI's on the OpenAI paths, the service's own elsewhere. */
  function refuse(res: http.ServerResponse, path: string, status: number, code: ErrorCode, message: string): void {
    if (openaiPath(path)) sendOpenAIError(res, status, code, message);
    else sendError(res, status, code, message);
  }

  const server = http.createServer((req, res) => {
    // one reading of the target decides what is served, whether a token is needed, and what is forwarded
    const target = readTarget(req.url);
    if (!target.ok) return sendError(res, 400, "bad_request_target", target.message);
    const url = target.url;
    // probes stay open whatever sends them
    if (url.pathname === "/healthz") return json(res, 200, { status: "ok" });
    if (url.pathname === "/readyz") {
      const r = svc.readiness();
      return json(res, r.ready ? 200 : 503, r.body);
    }
    const refusal = access.check(req);
    if (refusal) return refuse(res, url.pathname, refusal.status, refusal.code, refusal.message);
    if (url.pathname === "/") return home(req, res, front !== null);
    if (url.pathname === RENDER_PATH) return render(req, res);
    if (inspectRoute(url.pathname)) return url.pathname === PARSE_PATH ? handleParse(svc, req, res) : handleInspect(req, res);
    const route = frontRoute(url.pathname);
    if (route) return openai(route, url, req, res);
    // in a vLLM pod, the paths the sidecar does not serve reach vLLM unchanged
    if (front && !OWN_PATHS.has(url.pathname)) return passOn(req, res, url.pathname, target.path);
    if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "method_not_allowed", `${url.pathname} takes GET`);
    switch (url.pathname) {
      case "/metrics":
        if (!policy.publicMetrics && !svc.authorized(req.headers.authorization)) {
          return sendError(res, 401, "unauthorized", "a valid bearer token is required (or start with --public-metrics true)");
        }
        // in sidecar mode the engine's series (vllm:*) come first when they are valid Prometheus text, then the sidecar's own
        // (the engine's first: a skip is counted in the same scrape that leaves it out)
        (front ? engineSeries(svc, front, METRICS_TIMEOUT_MS) : Promise.resolve(""))
          .then(async (theirs) => [theirs, await svc.metrics.registry.metrics()] as const)
          .then(([theirs, ours]) => {
            res.writeHead(200, { "content-type": svc.metrics.registry.contentType });
            res.end(theirs + ours);
          })
          .catch((e: Error) => sendError(res, 500, "internal", `the metrics could not be collected: ${e.message}`));
        return;
      case STREAM_PATH:
        return sendError(res, 426, "upgrade_required", `${STREAM_PATH} speaks WebSocket (ws://HOST:PORT${STREAM_PATH})`);
      default:
        return sendError(res, 404, "not_found", `nothing is served at ${url.pathname}; GET / lists what is`);
    }
  });

  /** GET /: what is served here (a page for a browser, JSON for anything else), in place of a bare 404. */
  function home(req: http.IncomingMessage, res: http.ServerResponse, sidecar: boolean): void {
    if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "method_not_allowed", "/ takes GET");
    const links = homeLinks(sidecar);
    if (!/text\/html/.test(req.headers.accept ?? "")) return json(res, 200, { service: "harmony-sidecar", endpoints: links });
    const body = Buffer.from(homePage(links));
    res.writeHead(200, {
      "content-type": "text/html; charset=utf-8",
      "content-length": body.length,
      "content-security-policy":
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      "x-content-type-options": "nosniff",
    });
    res.end(req.method === "HEAD" ? undefined : body);
  }

  /**
   * A path of the upstream's: passed on, with the token required as for the
   * front (when one is set) except for its health probes.
   */
  function passOn(req: http.IncomingMessage, res: http.ServerResponse, path: string, forward: string): void {
    if (!OPEN_UPSTREAM_PATHS.has(path) && !svc.authorized(req.headers.authorization)) {
      return sendOpenAIError(res, 401, "unauthorized", "a valid bearer token is required");
    }
    proxy(req, res, front!.url, front!.timeoutMs, forward, front!.cfg.apiKey).catch((e: unknown) => internal(res, e, path));
  }

  /** The OpenAI-compatible front (sidecar mode, with --upstream). */
  function openai(route: FrontRoute, url: URL, req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = url.pathname;
    if (!front) return sendOpenAIError(res, 404, "no_upstream", "sidecar mode is off: start the server with --upstream URL");
    if (!svc.authorized(req.headers.authorization)) return sendOpenAIError(res, 401, "unauthorized", "a valid bearer token is required");
    if (!route.methods.includes(req.method ?? ""))
      return sendOpenAIError(res, 405, "method_not_allowed", `${path} takes ${route.methods.join(" or ")}`);
    front.handle(route, url, req, res).catch((e: unknown) => internal(res, e, path));
  }

  /** A request that failed in a way that is not the client's (a bug): logged, answered 500 in its path's shape (or ended, once started). */
  function internal(res: http.ServerResponse, e: unknown, path: string): void {
    svc.logger.error({ err: e instanceof Error ? e.message : String(e), path }, "request failed");
    if (!res.headersSent) refuse(res, path, 500, "internal", "internal error");
    else res.end();
  }

  /** POST /v1/render: a chat request in, {ids, text, restored} out. */
  function render(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.method !== "POST") return sendError(res, 405, "method_not_allowed", "POST a chat request");
    if (!svc.authorized(req.headers.authorization)) return sendError(res, 401, "unauthorized", "a valid bearer token is required");
    const tenant = svc.tenantOf(req.headers.authorization);
    readJson(req, limits.maxFrameBytes)
      .then(async (read) => {
        if (!read.ok) return sendError(res, read.status, read.code, read.message, { path: "" });
        const r = await svc.renderBody(read.value, tenant);
        if (!r.ok)
          return sendError(res, r.error.code === "render_timeout" ? 503 : 400, r.error.code, r.error.message, { path: r.error.path });
        // made on the render thread: here it is only written out
        res.writeHead(200, { "content-type": "application/json", "content-length": r.body.byteLength });
        res.end(r.body);
      })
      .catch((e: unknown) => internal(res, e, RENDER_PATH));
  }

  server.on("upgrade", (req, socket, head) => {
    const target = readTarget(req.url);
    if (!target.ok) return refuseUpgrade(socket, 400, "bad_request_target", target.message);
    if (target.url.pathname !== STREAM_PATH)
      // say where the streams are (a client that left the path out of its ws:// URL reads this)
      return refuseUpgrade(
        socket,
        404,
        "not_found",
        `WebSocket streams are served at ${STREAM_PATH} (ws://HOST:PORT${STREAM_PATH}), not at ${target.url.pathname}`,
      );
    if (!accepting) return refuseUpgrade(socket, 503, "shutting_down", "the server is draining");
    const refusal = access.check(req);
    if (refusal) return refuseUpgrade(socket, refusal.status, refusal.code, refusal.message);
    if (!svc.authorized(req.headers.authorization)) return refuseUpgrade(socket, 401, "unauthorized", "a valid bearer token is required");
    const tenant = svc.tenantOf(req.headers.authorization);
    wss.handleUpgrade(req, socket, head, (ws) => accept(ws, socket, tenant));
  });

  function accept(ws: WebSocket, socket: Duplex, tenant: string): void {
    const cork = new Cork(
      socket,
      () => performance.now(),
      (f) => process.nextTick(f),
    );
    const transport: Transport = {
      kind: "ws",
      send(frame, done) {
        cork.beforeWrite();
        ws.send(frame, { binary: typeof frame !== "string" }, () => done());
      },
      pause: () => ws.pause(),
      resume: () => ws.resume(),
      end: (code, reason) => {
        // what is corked goes first: a stop may cut the socket before the next tick
        cork.release();
        ws.close(code, reason);
        // a reader that does not read would not read the close frame either: cut it soon after
        if (code === CLOSE_CODES.slow_reader) setTimeout(() => ws.terminate(), SLOW_READER_CLOSE_MS).unref();
      },
    };
    const conn = svc.newConnection(transport, tenant);
    let alive = true;
    const ping = setInterval(() => {
      if (!alive) {
        svc.logger.info({ conn: conn.id }, "peer missed a pong; dropping it");
        ws.terminate();
        return;
      }
      alive = false;
      ws.ping();
    }, limits.pingIntervalMs);
    ws.on("pong", () => {
      alive = true;
    });
    ws.on("message", (data, isBinary) => {
      alive = true;
      cork.check();
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      conn.onFrame(isBinary ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) : buf.toString("utf8"));
    });
    ws.on("close", () => {
      clearInterval(ping);
      conn.close();
    });
    ws.on("error", (e) => {
      svc.logger.info({ conn: conn.id, err: e.message }, "websocket error");
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    stopAccepting() {
      accepting = false;
      server.close();
    },
    async close() {
      accepting = false;
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await closeInspect();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * How `ws` unmasks client frames: natively, with the optional `bufferutil`
 * addon (many times faster than the loop on a step frame) or
 * a runtime's own `http.websocketMask` (ws prefers it), or with a JS loop:
 * ws's own when the addon is missing or WS_NO_BUFFER_UTIL is set, or the
 * addon's fallback when its binary does not load.
 */
export function wsMasking(): "native" | "js" {
  const require = createRequire(import.meta.url);
  if ((require("node:http") as { websocketMask?: unknown }).websocketMask) return "native";
  if (process.env.WS_NO_BUFFER_UTIL) return "js";
  try {
    const { mask } = require("bufferutil") as { mask: unknown };
    return typeof mask === "function" && Function.prototype.toString.call(mask).includes("[native code]") ? "native" : "js";
  } catch {
    return "js";
  }
}
