/**
 * The stream inspector's HTTP side: `POST /v1/parse` (token ids or Harmony
 * text in, events out; docs/inspect.md) and the static page at
 * `GET /inspect` with its assets.
 *
 * /v1/parse takes the same bearer token and body limit (--max-frame-bytes)
 * as /v1/render, and at most --max-ids-per-frame tokens. The work (JSON,
 * encoding, parsing, the answer's JSON) runs on one worker thread of its
 * own, started on the first request; requests queue there, so the edge's
 * thread only reads bodies and writes answers.
 */
import { existsSync, readFileSync } from "node:fs";
import type http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PARSE_PATH } from "../inspect/parse.js";
import type { ParseDone, ParseJob } from "../inspect/parse.js";
import { builtWorker } from "../pool/built-worker.js";
import { DeadlineThread } from "../service/deadline-thread.js";
import type { Service } from "../service/service.js";
import { errorBody } from "../core/errors.js";
import { sendError } from "./respond.js";

export { PARSE_PATH };
export const INSPECT_PATH = "/inspect";

/** Whether the HTTP edge should hand this path to handleParse (PARSE_PATH) or handleInspect (the rest). */
export function inspectRoute(pathname: string): boolean {
  return pathname === PARSE_PATH || pathname === INSPECT_PATH || pathname.startsWith(INSPECT_PATH + "/");
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** The first of `candidates` that exists (the build beside this module in dist/, or dist/ seen from src/ in tests). */
function firstExisting(candidates: string[]): string {
  return candidates.find((p) => existsSync(p)) ?? candidates[0]!;
}

// ------------------------------------------------------------ POST /v1/parse

const parseThread = new DeadlineThread<ParseJob, ParseDone>(() => builtWorker("inspect"), "parse");

/** How long one POST /v1/parse may take on the worker before it is answered 503 `parse_timeout` (ms). */
export const PARSE_DEADLINE_MS = 10_000;

/**
 * Parse a request body on the inspector's worker thread. Past `deadlineMs`
 * the thread is stopped (what else it was parsing gets the same 503) and the
 * next request starts a fresh one; a thread that fails answers 500.
 */
export async function parseOnWorker(body: Uint8Array, maxIds: number, deadlineMs: number = PARSE_DEADLINE_MS): Promise<ParseDone> {
  const copy = new Uint8Array(body); // its own buffer, moved to the worker
  const late = `the parse took longer than ${deadlineMs} ms and was stopped`;
  const r = await parseThread.run({ body: copy, maxIds }, deadlineMs, late, [copy.buffer]);
  if (r.done !== null) return r.done;
  const code = r.timedOut ? "parse_timeout" : "internal";
  return { id: 0, status: r.timedOut ? 503 : 500, body: Buffer.from(JSON.stringify(errorBody(code, r.why))) };
}

/** Stop the worker thread (a server's close; the next request starts a new one). */
export function closeInspect(): Promise<void> {
  return parseThread.close("the server is stopping");
}

/** POST /v1/parse: `{text | ids, mode, role, tools, after_stop, tokens}` → `{events}` (docs/inspect.md). */
export function handleParse(svc: Service, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method !== "POST") return sendError(res, 405, "method_not_allowed", "POST {text} or {ids}");
  if (!svc.authorized(req.headers.authorization)) return sendError(res, 401, "unauthorized", "a valid bearer token is required");
  const limit = svc.limits.maxFrameBytes;
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) {
    req.resume();
    return sendError(res, 413, "too_large", `the body is over ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let refused = false;
  req.on("data", (c: Buffer) => {
    if (refused) return;
    size += c.length;
    if (size > limit) {
      refused = true;
      chunks.length = 0;
      sendError(res, 413, "too_large", `the body is over ${limit} bytes`);
      req.resume(); // read the rest unheld, so the answer is read
    } else chunks.push(c);
  });
  req.on("error", () => undefined);
  req.on("end", () => {
    if (refused) return;
    parseOnWorker(Buffer.concat(chunks), svc.limits.maxIdsPerFrame).then(
      (d) => {
        if (res.destroyed) return;
        res.writeHead(d.status, {
          "content-type": "application/json",
          "content-length": d.body.byteLength,
          "cache-control": "no-store",
        });
        res.end(d.body);
      },
      (e: Error) => {
        svc.logger.error({ err: e.message }, "parse request failed");
        sendError(res, 500, "internal", "internal error");
      },
    );
  });
}

// ------------------------------------------------------------ GET /inspect

/** The page's files: written as is in src/inspect/ (the HTML, style and script), and the script's logic as tsc built it. */
const PAGE_DIR = firstExisting(
  [path.join(here, "../inspect"), path.join(here, "../../../src/inspect")].filter((d) => existsSync(path.join(d, "index.html"))),
);
const LOGIC_FILE = firstExisting([path.join(here, "../inspect/logic.js"), path.join(here, "../../dist/src/inspect/logic.js")]);

const ASSETS: Record<string, { file: () => string; type: string }> = {
  "/inspect": { file: () => path.join(PAGE_DIR, "index.html"), type: "text/html; charset=utf-8" },
  "/inspect/": { file: () => path.join(PAGE_DIR, "index.html"), type: "text/html; charset=utf-8" },
  "/inspect/app.js": { file: () => path.join(PAGE_DIR, "app.js"), type: "text/javascript; charset=utf-8" },
  "/inspect/app.css": { file: () => path.join(PAGE_DIR, "app.css"), type: "text/css; charset=utf-8" },
  "/inspect/logic.js": { file: () => LOGIC_FILE, type: "text/javascript; charset=utf-8" },
};

/** Everything the page loads comes from this server; nothing else may run or be fetched. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const cache = new Map<string, Buffer>();

function asset(pathname: string): { body: Buffer; type: string } | null {
  const a = ASSETS[pathname];
  if (!a) return null;
  let body = cache.get(pathname);
  if (!body) {
    // the compiled logic ends with a source map comment for a file not served
    body = readFileSync(a.file());
    if (pathname.endsWith("logic.js")) body = Buffer.from(body.toString("utf8").replace(/\n\/\/# sourceMappingURL=.*\s*$/, "\n"));
    cache.set(pathname, body);
  }
  return { body, type: a.type };
}

/** GET /inspect and its assets (no token needed: the page holds no data; /v1/parse asks for the token). */
export function handleInspect(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "method_not_allowed", "GET the page");
  const pathname = new URL(req.url ?? "/", "http://localhost").pathname;
  let a: { body: Buffer; type: string } | null;
  try {
    a = asset(pathname);
  } catch {
    return sendError(res, 500, "internal", "the inspector's files are missing: build with `npx tsc -p tsconfig.json`");
  }
  if (!a) return sendError(res, 404, "not_found", `the inspector has no file ${pathname}`);
  if (a.type.startsWith("text/html")) parseThread.start(); // the page will parse soon: build the worker's vocabulary meanwhile
  res.writeHead(200, {
    "content-type": a.type,
    "content-length": a.body.length,
    "cache-control": "no-cache",
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  });
  res.end(req.method === "HEAD" ? undefined : a.body);
}
