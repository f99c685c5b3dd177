/**
 * An engine that misbehaves, for the hostile bench (bench/hostile/main.ts)
 * and the tests (test/e2e/hostile-engine.test.ts): it speaks vLLM's
 * `/v1/completions` stream (`token_ids` per choice, `data: [DONE]`) and
 * `/v1/models`, and then does what a buggy or hostile engine could do, one
 * behaviour per request as scripted:
 *   forever       ignore max_tokens: valid chunks of ids, without end
 *   huge_event    one event carrying `ids` (300,000 of them, say), then a clean end
 *   bad_id        one id that is not a token id (`bad`: -1, 1.5, "x", 2^32, null)
 *   bad_usage     a usage chunk whose counts are not counts (`bad`)
 *   bad_index     a choice index nobody asked for
 *   unterminated  one `data:` line that never ends, `totalBytes` of it in `pieceBytes` pieces
 *   comments      SSE comments every `intervalMs`, and nothing else
 *   no_progress   events with no choices every `intervalMs`, without end
 *   ok            `ids` (in events of `perEvent` ids, all in one by default), then a clean end
 * and `GET /metrics` answers `metricsBytes` bytes of valid-looking series.
 * Every loop stops when the sidecar goes away; writes wait for the socket to drain.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export type HostileKind =
  "forever" | "huge_event" | "bad_id" | "bad_usage" | "bad_index" | "unterminated" | "comments" | "no_progress" | "ok";

export interface HostileScript {
  kind: HostileKind;
  /** The ids of `ok` and `huge_event`; the repeating chunk of `forever`. */
  ids?: number[];
  /** `ok`: the ids in events of this many, each written once the socket has room (default: all in one). */
  perEvent?: number;
  /** The bad value of `bad_id` and `bad_usage`. */
  bad?: unknown;
  pieceBytes?: number;
  totalBytes?: number;
  intervalMs?: number;
}

export interface HostileEngine {
  url: string;
  script(s: HostileScript): void;
  /** The size of `/metrics` (0: a small valid text). */
  metricsBytes: number;
  /** Generation requests seen, how many ended with the sidecar going away first, and the ids the latest one has written. */
  stats: { requests: number; aborted: number; sent: number };
  close(): Promise<void>;
}

const MODEL = "openai/gpt-oss-20b";

export async function startHostileEngine(maxModelLen = 131072): Promise<HostileEngine> {
  let current: HostileScript = { kind: "ok", ids: [200002] };
  const stats = { requests: 0, aborted: 0, sent: 0 };
  const engine: HostileEngine = {
    url: "",
    script: (s) => {
      current = s;
    },
    metricsBytes: 0,
    stats,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  /** Write, and wait for the socket when it is full; false once the peer is gone. */
  const write = (res: http.ServerResponse, data: string | Buffer): Promise<boolean> =>
    new Promise((resolve) => {
      if (res.destroyed || res.writableEnded) return resolve(false);
      if (res.write(data)) return resolve(true);
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        resolve(!res.destroyed);
      };
      res.once("drain", done);
      res.once("close", done);
    });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const chunk = (choices: unknown[], usage: unknown = undefined) =>
    `data: ${JSON.stringify({ id: "cmpl-hostile", object: "text_completion", created: 0, model: MODEL, choices, ...(usage === undefined ? {} : { usage }) })}\n\n`;
  const choice = (ids: unknown[], finish: string | null = null, index: unknown = 0) => ({
    index,
    text: "",
    token_ids: ids,
    finish_reason: finish,
    stop_reason: null,
  });

  async function generate(res: http.ServerResponse, s: HostileScript): Promise<void> {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const ids = s.ids ?? [200002];
    const every = s.intervalMs ?? 100;
    stats.sent = 0;
    switch (s.kind) {
      case "ok":
      case "huge_event": {
        const per = s.kind === "ok" ? Math.max(1, s.perEvent ?? ids.length) : ids.length;
        for (let at = 0; at < ids.length || at === 0; at += per) {
          const last = at + per >= ids.length;
          if (!(await write(res, chunk([choice(ids.slice(at, at + per), last ? "stop" : null)])))) return;
          stats.sent = Math.min(ids.length, at + per);
        }
        await write(res, chunk([], { prompt_tokens: 10, completion_tokens: ids.length, total_tokens: 10 + ids.length }));
        break;
      }
      case "forever": {
        // a valid stream that never finishes, as fast as the socket takes it
        const piece = chunk([choice(ids)]);
        while (await write(res, piece)) stats.sent += ids.length;
        return;
      }
      case "bad_id":
        if (!(await write(res, chunk([choice([200005, s.bad, 200008])])))) return;
        await write(res, chunk([choice([200002], "stop")]));
        break;
      case "bad_usage":
        if (!(await write(res, chunk([choice(ids, "stop")])))) return;
        await write(res, chunk([], s.bad));
        break;
      case "bad_index":
        await write(res, chunk([choice(ids, "stop", 5)]));
        break;
      case "unterminated": {
        const size = s.pieceBytes ?? 4096;
        const piece = Buffer.alloc(size, "7");
        if (!(await write(res, 'data: {"choices":[{"index":0,"token_ids":['))) return;
        for (let sent = 0; sent < (s.totalBytes ?? 17 * 1024 * 1024); sent += size) if (!(await write(res, piece))) return;
        break;
      }
      case "comments":
        while (await write(res, ": keep-alive\n\n")) await sleep(every);
        return;
      case "no_progress":
        while (await write(res, chunk([]))) await sleep(every);
        return;
    }
    if (await write(res, "data: [DONE]\n\n")) res.end();
  }

  async function metrics(res: http.ServerResponse): Promise<void> {
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
    if (engine.metricsBytes <= 0) {
      res.end('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 0.0\n');
      return;
    }
    const line = Buffer.from(`vllm:hostile_series{model_name="${"m".repeat(200)}"} 1.0\n`);
    const lines = Buffer.concat(Array.from({ length: 256 }, () => line));
    for (let sent = 0; sent < engine.metricsBytes; sent += lines.length) if (!(await write(res, lines))) return;
    res.end();
  }

  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    req.resume();
    req.on("end", () => {
      if (req.method === "GET" && path === "/v1/models") {
        const body = JSON.stringify({
          object: "list",
          data: [{ id: MODEL, object: "model", owned_by: "vllm", root: MODEL, max_model_len: maxModelLen }],
        });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(body);
        return;
      }
      if (req.method === "GET" && path === "/health") return void res.writeHead(200).end();
      if (req.method === "GET" && path === "/version")
        return void res.writeHead(200, { "content-type": "application/json" }).end('{"version":"0.11.0"}');
      if (req.method === "GET" && path === "/metrics") return void metrics(res).catch(() => res.destroy());
      if (req.method === "POST" && path === "/v1/completions") {
        stats.requests++;
        res.on("close", () => {
          if (!res.writableFinished) stats.aborted++;
        });
        return void generate(res, current).catch(() => res.destroy());
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return engine;
}
