/**
 * The service: one worker pool, one schema, one set of limits and metrics,
 * shared by the WebSocket/HTTP edge and the gRPC edge.
 */
import { createRequire } from "node:module";
import os from "node:os";
import { pino, type Logger } from "pino";
import { ParserPool } from "../pool/pool.js";
import type { OpsResult } from "../pool/task.js";
import { schema, type Schema } from "../protocol/schema.js";
import { startGrpc, type GrpcEdge } from "../transport/grpc.js";
import { startHttp, type HttpEdge } from "../transport/http.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";
import { renderRequest, type RenderOutcome } from "../render/request.js";
import { CotStore } from "./cot-store.js";
import type { UpstreamConfig } from "../upstream/front.js";
import { Connection, type Transport } from "./connection.js";
import { createMetrics, type Metrics } from "./metrics.js";

export interface Limits {
  /** Largest client frame, bytes (WebSocket message or gRPC message). */
  maxFrameBytes: number;
  maxStreamsPerConnection: number;
  /** Token ids in one frame, over all its ops. */
  maxIdsPerFrame: number;
  /** A connection that sends nothing for this long is closed. */
  idleTimeoutMs: number;
  /** WebSocket ping interval; a peer that misses a pong is dropped. gRPC keepalive uses it too. */
  pingIntervalMs: number;
  /** Frames being parsed per connection before it stops being read. */
  maxInflightFrames: number;
  /** Answer bytes waiting for a slow reader before it stops being read. */
  maxBufferedBytes: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFrameBytes: 4 * 1024 * 1024,
  maxStreamsPerConnection: 16384,
  maxIdsPerFrame: 262144,
  idleTimeoutMs: 300_000,
  pingIntervalMs: 30_000,
  maxInflightFrames: 64,
  maxBufferedBytes: 8 * 1024 * 1024,
};

export interface ServiceOptions {
  host: string;
  /** HTTP + WebSocket port (0: any free port). */
  port: number;
  /** gRPC port (0: any free port, -1: no gRPC). */
  grpcPort: number;
  /** Parser worker threads (0: parse on the main thread only). */
  workers: number;
  /** Streams the main thread parses itself before new ones go to workers (the pool's inline slot). */
  inline?: number;
  /** Bearer token required from clients, when set. */
  token?: string | undefined;
  limits: Limits;
  /** How long a graceful stop may take before connections are cut. */
  drainTimeoutMs: number;
  /** Sidecar mode: the inference server to drive by token ids. */
  upstream?: UpstreamConfig | undefined;
  /** Reasoning remembered per tool call id, for restoration (0 bytes: off). */
  cotStore?: { maxBytes: number; maxEntries: number; ttlMs: number };
  logger?: Logger;
  logLevel?: string;
}

export const DEFAULT_COT_STORE = { maxBytes: 64 * 1024 * 1024, maxEntries: 100_000, ttlMs: 30 * 60_000 };

/** Worker threads for a machine with `cores` cores (see DEFAULTS). */
export function defaultWorkers(cores: number): number {
  return cores <= 2 ? 0 : Math.min(cores - 1, 8);
}

export const DEFAULTS: Omit<ServiceOptions, "limits"> = {
  host: "127.0.0.1",
  port: 8765,
  grpcPort: 8766,
  // With 3+ cores: one core for the main thread (frames, sockets, the first
  // --inline streams), the rest parse on workers. With 2 or fewer, a thread
  // hop costs more CPU than it saves: paced at half of the peak, a
  // 256-stream frame took 0.43-0.48 ms of service CPU all on the main thread
  // against 0.53-0.82 ms with one worker, with a p99 about 4x lower
  // (bench/service-bench.ts; bench/RESULTS.md has the runs).
  workers: defaultWorkers(os.availableParallelism()),
  inline: 16,
  drainTimeoutMs: 10_000,
  logLevel: "info",
};

export class Service {
  readonly schema: Schema = schema();
  readonly metrics: Metrics = createMetrics();
  readonly logger: Logger;
  readonly limits: Limits;
  readonly token: string | undefined;
  pool!: ParserPool;
  readonly cot: CotStore;
  private enc?: HarmonyEncoding;
  private readonly connections = new Set<Connection>();
  private http?: HttpEdge;
  private grpc?: GrpcEdge;
  private stopping?: Promise<void>;
  private idleTimer?: NodeJS.Timeout;

  constructor(readonly options: ServiceOptions) {
    this.limits = options.limits;
    this.token = options.token || undefined;
    this.cot = new CotStore(options.cotStore ?? DEFAULT_COT_STORE);
    this.logger = options.logger ?? pino({ level: options.logLevel ?? "info", base: { service: "harmony-sidecar" } });
  }

  /** Build the vocabulary, start the workers and both edges. */
  async start(): Promise<{ port: number; grpcPort: number | null }> {
    const t0 = performance.now();
    const enc = loadHarmonyEncoding({ shared: true });
    this.enc = enc;
    this.metrics.watchCotStore(this.cot);
    this.pool = new ParserPool({
      workers: this.options.workers,
      inline: this.options.inline ?? 0,
      table: enc.table,
      schema: this.schema,
      // main-thread streams remember straight into the store (workers' memos come back in their results)
      remember: this.cot.enabled ? (id, bytes, start, end) => this.cot.rememberRange(id, bytes, start, end) : undefined,
    });
    this.pool.on("crash", (slot, generation) => {
      this.metrics.workerRestarts.inc();
      this.logger.error({ slot, generation }, "worker thread died; its streams are failed and a new thread starts");
      for (const c of this.connections) c.onWorkerCrash(slot, generation);
    });
    this.http = await startHttp(this, this.options.host, this.options.port);
    if (this.options.grpcPort >= 0) this.grpc = await startGrpc(this, this.options.host, this.options.grpcPort);
    this.idleTimer = setInterval(() => this.closeIdle(), Math.min(this.limits.idleTimeoutMs, 5000)).unref();
    const ports = { port: this.http.port, grpcPort: this.grpc?.port ?? null };
    // where it listens is always worth saying, even when info lines are off
    this.logger[this.logger.isLevelEnabled("info") ? "info" : "warn"](
      {
        ...ports,
        host: this.options.host,
        workers: this.pool.workers,
        inline: this.options.workers === 0 ? "all" : (this.options.inline ?? 0),
        startup_ms: Math.round(performance.now() - t0),
        auth: !!this.token,
        upstream: this.options.upstream?.url ?? null,
        ws_masking: wsMasking(),
      },
      "harmony-sidecar serving",
    );
    return ports;
  }

  ready(): boolean {
    return !this.stopping && this.pool?.ready() === true;
  }

  /** Bearer-token check shared by both edges. */
  authorized(header: string | undefined): boolean {
    if (!this.token) return true;
    return header === `Bearer ${this.token}`;
  }

  newConnection(transport: Transport): Connection {
    const c = new Connection(this, transport);
    this.connections.add(c);
    this.metrics.connections.inc({ transport: transport.kind });
    return c;
  }

  connectionClosed(c: Connection): void {
    if (this.connections.delete(c)) this.metrics.connections.dec({ transport: c.kind });
  }

  /** Fold a batch's counts into the metrics; recoveries are also logged. */
  recordCounts(r: OpsResult, conn: number): void {
    const m = this.metrics;
    const c = r.counts;
    if (c.tokens > 0) m.countTokens(c.tokens);
    for (const type in c.events) m.countEvents(type, c.events[type]!);
    for (const kind in c.recoveries) m.recoveries.inc({ kind }, c.recoveries[kind]);
    for (const code in c.errors) m.errors.inc({ code }, c.errors[code]);
    for (const note of r.notes) this.logger.warn({ conn, ...note }, "recovered malformed model output");
    for (const memo of r.memos) this.cot.remember(memo.id, memo.bytes);
  }

  /** Render a chat request (JSON text) into a Harmony prompt, restoring dropped reasoning. */
  renderJson(json: string): RenderOutcome {
    let request: unknown;
    try {
      request = JSON.parse(json);
    } catch (e) {
      return { ok: false, error: { code: "bad_json", message: `the request is not JSON: ${(e as Error).message}`, path: "" } };
    }
    return this.render(request);
  }

  render(request: unknown): RenderOutcome {
    const enc = this.enc!;
    const r = renderRequest(request, { encodeOrdinary: enc.encodeOrdinary, recall: (id) => this.cot.recall(id) });
    this.metrics.renders.inc({ outcome: r.ok ? "ok" : "error" });
    if (r.ok && r.restored.length > 0) this.metrics.cotRestored.inc(r.restored.length);
    return r;
  }

  private closeIdle(): void {
    for (const c of this.connections) {
      if (c.idleMs > this.limits.idleTimeoutMs) c.idleTimeout();
    }
  }

  /**
   * Graceful stop: stop accepting, let frames in flight finish, end every
   * open stream (`error` shutting_down, then `done`), close connections, stop
   * the workers. Connections still open after `drainTimeoutMs` are cut.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.logger.info({ connections: this.connections.size }, "draining");
      clearInterval(this.idleTimer);
      this.http?.stopAccepting();
      this.grpc?.stopAccepting();
      const drained = Promise.all([...this.connections].map((c) => c.drain()));
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), this.options.drainTimeoutMs);
      });
      const outcome = await Promise.race([drained.then(() => "drained" as const), timeout]);
      clearTimeout(timer);
      if (outcome === "timeout") this.logger.warn("drain timed out; cutting the remaining connections");
      await this.http?.close();
      await this.grpc?.close();
      await this.pool?.close();
      this.logger.info({ outcome }, "stopped");
    })();
    return this.stopping;
  }
}

/**
 * How `ws` unmasks client frames: natively, with the optional `bufferutil`
 * addon (about 25x faster on a 2.7 KB step frame, ~5 µs saved per frame) or
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
