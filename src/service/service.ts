/**
 * The service: one worker pool, one schema, one set of limits and metrics,
 * and the connections that use them. The edges (WebSocket/HTTP, gRPC, the
 * OpenAI front) are started around it by the composition root,
 * src/server.ts; nothing here knows a transport.
 */
import os from "node:os";
import { getHeapStatistics } from "node:v8";
import { createHash, timingSafeEqual } from "node:crypto";
import { parseJson } from "../core/json.js";
import { LOCAL_TENANT, memoScope } from "../store/store.js";
import { pino, type Logger } from "pino";
import { ParserPool } from "../pool/pool.js";
import type { OpsResult } from "../pool/task.js";
import { schema, type Schema } from "../protocol/schema.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";
import { restoreReasoning, type RenderOutcome } from "../openai/render.js";
import { Renderer } from "./renderer.js";
import { CotStore } from "../store/memory.js";
import { Connection, type ConnectionHost, type Transport } from "./connection.js";
import type { Limits } from "./limits.js";
import { createMetrics, type Metrics } from "./metrics.js";

export { DEFAULT_LIMITS, type Limits } from "./limits.js";

export interface ServiceOptions {
  /** Parser worker threads (0: parse on the main thread only). */
  workers: number;
  /** Streams the main thread parses itself before new ones go to workers (the pool's inline slot). */
  inline?: number;
  /** Bearer token required from clients, when set. */
  token?: string | undefined;
  limits: Limits;
  /** How long a graceful stop may take before connections are cut. */
  drainTimeoutMs: number;
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

/** The service; connections see it as their {@link ConnectionHost}. */
export class Service implements ConnectionHost {
  readonly schema: Schema = schema();
  readonly metrics: Metrics = createMetrics();
  readonly logger: Logger;
  readonly limits: Limits;
  readonly token: string | undefined;
  pool!: ParserPool;
  readonly cot: CotStore;
  private readonly connections = new Set<Connection>();
  private renderer?: Renderer;
  private budgetAt = -Infinity;
  private overBudgetNow = false;
  private stopping = false;
  private idleTimer?: NodeJS.Timeout;

  constructor(readonly options: ServiceOptions) {
    this.limits = options.limits;
    this.token = options.token || undefined;
    this.cot = new CotStore(options.cotStore ?? DEFAULT_COT_STORE);
    this.logger = options.logger ?? pino({ level: options.logLevel ?? "info", base: { service: "harmony-sidecar" } });
  }

  /** Build the vocabulary and start the workers. */
  start(): void {
    const enc = loadHarmonyEncoding({ shared: true });
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
    this.idleTimer = setInterval(() => this.closeIdle(), Math.min(this.limits.idleTimeoutMs, 5000)).unref();
    this.renderer = new Renderer();
  }

  ready(): boolean {
    return !this.stopping && this.pool?.ready() === true;
  }

  /** Bearer-token check shared by both edges. */
  authorized(header: string | undefined): boolean {
    if (!this.token) return true;
    if (header === undefined) return false;
    // compared in constant time: a timing difference must not reveal the token
    const a = Buffer.from(header);
    const b = Buffer.from(`Bearer ${this.token}`);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /**
   * The tenant a client belongs to, by its Authorization header: the hash of
   * its bearer token, or the one local tenant when the service has no token.
   * Remembered reasoning is scoped by it (docs/security.md).
   */
  tenantOf(authorization: string | undefined): string {
    if (!this.token) return LOCAL_TENANT;
    return createHash("sha256")
      .update(authorization ?? "")
      .digest("hex")
      .slice(0, 32);
  }

  newConnection(transport: Transport, tenant: string = LOCAL_TENANT): Connection {
    const c = new Connection(this, transport, tenant);
    this.connections.add(c);
    this.metrics.connections.inc({ transport: transport.kind });
    return c;
  }

  /**
   * Whether the V8 heap is past the memory budget (limits.memoryBudgetBytes,
   * else 75% of the heap limit): new streams are then refused with
   * `over_budget` until garbage collection brings it back, so that input
   * within the documented limits never runs the process out of memory.
   * Read at most every 50 ms (a heap-statistics call per open would cost).
   */
  overBudget(): boolean {
    const now = performance.now();
    if (now - this.budgetAt > 50) {
      this.budgetAt = now;
      const h = getHeapStatistics();
      const budget = this.limits.memoryBudgetBytes > 0 ? this.limits.memoryBudgetBytes : 0.75 * h.heap_size_limit;
      this.overBudgetNow = h.used_heap_size > budget;
    }
    return this.overBudgetNow;
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
  async renderJson(json: string, tenant: string): Promise<RenderOutcome> {
    const parsed = parseJson(json);
    if (!parsed.ok)
      return { ok: false, error: { code: parsed.code, message: `the request is not usable JSON: ${parsed.message}`, path: "" } };
    return this.render(parsed.value, tenant);
  }

  /**
   * Render for `tenant`: only reasoning that tenant's streams remembered is
   * restored (here, from the store), and the prompt is tokenized on the
   * render thread (./renderer.ts), never on this one.
   */
  async render(request: unknown, tenant: string): Promise<RenderOutcome> {
    const scope = memoScope(tenant);
    const { request: restoredRequest, restored } = restoreReasoning(request, (id) => this.cot.recall(scope + id));
    const r = await this.renderer!.render(restoredRequest, restored);
    this.metrics.renders.inc({ outcome: r.ok ? "ok" : "error" });
    if (r.ok && r.restored.length > 0) this.metrics.cotRestored.inc(r.restored.length);
    return r;
  }

  private closeIdle(): void {
    for (const c of this.connections) {
      if (c.idleMs > this.limits.idleTimeoutMs) c.idleTimeout();
    }
  }

  /** Connections open now. */
  get connectionCount(): number {
    return this.connections.size;
  }

  /**
   * The first half of a graceful stop: not ready any more, frames in flight
   * finish, every open stream ends (`error` shutting_down, then `done`).
   * Resolves "timeout" when connections are still open after
   * `drainTimeoutMs` (the edges then cut them).
   */
  async drain(): Promise<"drained" | "timeout"> {
    this.stopping = true;
    clearInterval(this.idleTimer);
    const drained = Promise.all([...this.connections].map((c) => c.drain()));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.options.drainTimeoutMs);
    });
    const outcome = await Promise.race([drained.then(() => "drained" as const), timeout]);
    clearTimeout(timer);
    return outcome;
  }

  /** The last half: stop the workers. */
  async close(): Promise<void> {
    clearInterval(this.idleTimer);
    await this.pool?.close();
    await this.renderer?.close();
  }
}
