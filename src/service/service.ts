/**
 * The service: one worker pool, one schema, one set of limits and metrics,
 * and the connections that use them. The edges (WebSocket/HTTP, gRPC, the
 * OpenAI front) are started around it by the composition root,
 * src/server.ts; nothing here knows a transport.
 */
import { readFileSync } from "node:fs";
import os from "node:os";
import { getHeapStatistics } from "node:v8";

import { createHash, timingSafeEqual } from "node:crypto";
import { COT_STORE_DEFAULTS, defaultWorkers, HEAP_BUDGET_SHARE, RESPONSE_STORE_DEFAULTS, SERVICE_DEFAULTS } from "../core/defaults.js";
import { parseJson } from "../core/json.js";
import { LOCAL_TENANT, memoScope } from "../store/store.js";
import { pino, type Logger } from "pino";
import { ParserPool } from "../pool/pool.js";
import type { OpsResult, RecoveryNote } from "../pool/task.js";
import { schema, type Schema } from "../protocol/schema.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";
import type { Vocabulary } from "../core/vocab.js";
import { missingReasoning, restoreReasoning, type RenderOutcome } from "../openai/render.js";
import { Renderer } from "./renderer.js";
import { CotStore } from "../store/memory.js";
import { SharedStore, type StoreOp } from "../store/redis.js";
import { TieredStore } from "../store/tiered.js";
import { AnswerChecker, type CheckOutcome } from "./checker.js";
import type { RenderBody } from "./renderer.js";
import { ResponseStore } from "../store/responses.js";
import { Connection, type ConnectionGroup, type ConnectionHost, type Transport } from "./connection.js";
import type { Limits } from "./limits.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { TurnBudget } from "./turn.js";

export { DEFAULT_LIMITS, type Limits } from "./limits.js";

export interface ServiceOptions {
  /** Parser worker threads (0: parse on the main thread only). */
  workers: number;
  /**
   * Streams the main thread parses itself before new ones go to workers (the
   * pool's inline slot). Left out: none, every stream goes to a worker when
   * there are workers; `serve` gives SERVICE_DEFAULTS.inline.
   */
  inline?: number;
  /** Bearer token required from clients, when set. */
  token?: string | undefined;
  limits: Limits;
  /** How long a graceful stop may take before connections are cut. */
  drainTimeoutMs: number;
  /** Reasoning remembered per tool call id, for restoration (0 bytes: off). */
  cotStore?: CotStoreSettings;
  /** Stored responses (Responses `store`, `previous_response_id`), in this process and the shared store when there is one. */
  responseStore?: ResponseStoreSettings;
  logger?: Logger;
  logLevel?: string;
  /** How long an answer check may take before the answer is said to be unchecked (default CHECK_DEADLINE_MS). */
  checkDeadlineMs?: number;
}

export interface CotStoreSettings {
  /** The in-process store's budget (with a shared store: its local cache's). */
  maxBytes: number;
  maxEntries: number;
  /** How long reasoning is remembered (both tiers). */
  ttlMs: number;
  /** A shared store (Redis/Valkey) behind the in-process one: its URL and a render's fetch budget. */
  shared?: { url: string; timeoutMs: number; warnIntervalMs?: number } | undefined;
}

export interface ResponseStoreSettings {
  /** This process's budget (0: storing is off). */
  maxBytes: number;
  ttlMs: number;
}

/** The defaults in the service's option shapes (src/core/defaults.ts). */
export const DEFAULT_RESPONSE_STORE: ResponseStoreSettings = RESPONSE_STORE_DEFAULTS;
export const DEFAULT_COT_STORE: CotStoreSettings = COT_STORE_DEFAULTS;

/** How long a Responses request waits for the shared store (one read, write or delete) before going on without it. */
export const RESPONSE_STORE_TIMEOUT_MS = 1000;

/** Recovery log lines per second, at most (each lists one batch's recoveries; docs/protocol.md). */
export const RECOVERY_LOG_LINES = 10;

export { defaultWorkers };

/** A file's text, or null when it cannot be read. */
function readText(file: string): string | null {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return null;
  }
}

/** Where the cgroup files are: the mount and this process's /proc/self/cgroup (tests point them elsewhere). */
export interface CgroupPaths {
  root?: string;
  self?: string;
}

/**
 * The directories of this process's cgroup for a controller, innermost
 * first up to the hierarchy's root: cgroup v2's unified hierarchy, or v1's
 * hierarchy of `controller`. A limit anywhere on the way applies.
 */
function cgroupDirs(v1controller: string, { root = "/sys/fs/cgroup", self = "/proc/self/cgroup" }: CgroupPaths): string[] {
  const dirs: string[] = [];
  const up = (base: string, p: string) => {
    const parts = p.split("/").filter((x) => x !== "" && x !== "..");
    for (let n = parts.length; n >= 0; n--) dirs.push([base, ...parts.slice(0, n)].join("/"));
  };
  for (const line of (readText(self) ?? "").split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === "0" && m[2] === "") up(root, m[3]!);
    else if (m[2]!.split(",").includes(v1controller)) {
      up(`${root}/${v1controller}`, m[3]!);
      up(`${root}/${m[2]}`, m[3]!);
    }
  }
  if (dirs.length === 0) dirs.push(root, `${root}/${v1controller}`);
  return [...new Set(dirs)];
}

/**
 * The container's CPU limit in CPUs (may be fractional), or null without
 * one: cgroup v2's cpu.max (`quota period`, or `max`), else v1's
 * cpu.cfs_quota_us / cpu.cfs_period_us (-1: none). The smallest on the way
 * to the root.
 */
export function cgroupCpuLimit(paths: CgroupPaths = {}): number | null {
  let limit: number | null = null;
  const take = (quota: number, period: number) => {
    if (quota > 0 && period > 0) limit = Math.min(limit ?? Infinity, quota / period);
  };
  for (const dir of cgroupDirs("cpu", paths)) {
    const max = readText(`${dir}/cpu.max`);
    if (max !== null) {
      const [q, p] = max.trim().split(/\s+/);
      if (q !== "max") take(Number(q), Number(p ?? 100000));
      continue;
    }
    const quota = readText(`${dir}/cpu.cfs_quota_us`);
    const period = readText(`${dir}/cpu.cfs_period_us`);
    if (quota !== null && period !== null) take(Number(quota.trim()), Number(period.trim()));
  }
  return limit;
}

/** Past this a v1 memory limit means none (the kernel's "unlimited" is the page-rounded 2^63 − 1). */
const NO_MEMORY_LIMIT = 2 ** 60;

/** The container's memory limit in bytes, or null: cgroup v2's memory.max, else v1's memory.limit_in_bytes. */
export function cgroupMemoryLimit(paths: CgroupPaths = {}): number | null {
  let limit: number | null = null;
  for (const dir of cgroupDirs("memory", paths)) {
    const text = readText(`${dir}/memory.max`) ?? readText(`${dir}/memory.limit_in_bytes`);
    if (text === null || text.trim() === "max") continue;
    const n = Number(text.trim());
    if (Number.isFinite(n) && n > 0 && n < NO_MEMORY_LIMIT) limit = Math.min(limit ?? Infinity, n);
  }
  return limit;
}

/**
 * The cores this process may use: the CPUs it is allowed to run on
 * (availableParallelism: the affinity mask), capped by the cgroup CPU limit,
 * which Node 20 does not read. A fractional limit rounds up (2.5 CPUs: 3
 * cores), as Go's runtime does for GOMAXPROCS: the part of a core is still
 * worth a thread.
 */
export function usableCores(cpuLimit: number | null = cgroupCpuLimit(), parallelism: number = os.availableParallelism()): number {
  if (cpuLimit === null) return parallelism;
  return Math.max(1, Math.min(parallelism, Math.ceil(cpuLimit)));
}

/** `serve`'s defaults for the service's options (src/core/defaults.ts), the worker threads counted on this machine's usable cores. */
export const DEFAULTS: Omit<ServiceOptions, "limits"> = {
  workers: defaultWorkers(usableCores()),
  inline: SERVICE_DEFAULTS.inline,
  drainTimeoutMs: SERVICE_DEFAULTS.drainTimeoutMs,
  logLevel: SERVICE_DEFAULTS.logLevel,
};

/** The service; connections see it as their {@link ConnectionHost}. */
export class Service implements ConnectionHost {
  readonly schema: Schema = schema();
  readonly metrics: Metrics = createMetrics();
  readonly logger: Logger;
  readonly limits: Limits;
  readonly token: string | undefined;
  pool!: ParserPool;
  /** The in-process store (with a shared store: the local cache in front of it). */
  readonly cot: CotStore;
  readonly turn = new TurnBudget();
  /** The o200k_harmony encoding (set by start): for the few ids the OpenAI front writes itself. */
  encoding!: HarmonyEncoding;

  /** The vocabulary on this thread (logprobs' token classification), the one the inline parser sessions use. */
  vocabulary(): Vocabulary {
    return this.pool.vocabulary();
  }
  /** Where reasoning is remembered and recalled: the in-process store, and the shared one when configured (set by start). */
  reasoning!: TieredStore;
  /** Stored responses (set by start). */
  responses!: ResponseStore;
  private readonly connections = new Set<Connection>();
  private renderer?: Renderer;
  private checker?: AnswerChecker;
  private budgetAt = -Infinity;
  /** Recovery log lines written in the current second, its start, and the recoveries left out since the last line. */
  private recoveryLines = 0;
  private recoveryLinesSince = -Infinity;
  private recoveriesUnlogged = 0;
  private overBudgetNow = false;
  private stopping = false;
  /** Readiness withdrawn (a SIGTERM): /readyz and gRPC health say not ready while connections are still served. */
  private unready = false;
  private readonly readinessParts: { name: string; ready: () => boolean; detail: () => Record<string, unknown> }[] = [];
  private idleTimer?: NodeJS.Timeout;

  constructor(readonly options: ServiceOptions) {
    this.limits = options.limits;
    this.token = options.token || undefined;
    this.cot = new CotStore(options.cotStore ?? DEFAULT_COT_STORE);
    this.logger = options.logger ?? pino({ level: options.logLevel ?? SERVICE_DEFAULTS.logLevel, base: { service: "harmony-sidecar" } });
  }

  /** Build the vocabulary and start the workers. */
  start(): void {
    const enc = loadHarmonyEncoding({ shared: true });
    this.encoding = enc;
    if (enc.source !== "file")
      this.logger.warn(
        { vocabulary_ms: Math.round(enc.loadMs), reason: enc.note },
        "the vocabulary table was built, not read from its file",
      );
    this.metrics.watchCotStore(this.cot);
    const failures = this.metrics.cotStoreFailures;
    const shared = this.options.cotStore?.shared;
    let store: SharedStore | null = null;
    const responseSettings = this.options.responseStore ?? DEFAULT_RESPONSE_STORE;
    if (shared && (this.cot.enabled || responseSettings.maxBytes > 0)) {
      for (const op of ["read", "write"] as const) failures.inc({ op }, 0);
      store = new SharedStore({
        url: shared.url,
        ttlMs: this.cot.options.ttlMs,
        timeoutMs: shared.timeoutMs,
        ...(shared.warnIntervalMs !== undefined ? { warnIntervalMs: shared.warnIntervalMs } : {}),
        onFailure: (op: StoreOp, n: number) => failures.inc({ op }, n),
        logger: this.logger,
      });
    }
    this.reasoning = new TieredStore(this.cot, this.cot.enabled ? store : null);
    this.responses = new ResponseStore({ ...responseSettings, timeoutMs: RESPONSE_STORE_TIMEOUT_MS }, store);
    const reasoning = this.reasoning;
    this.pool = new ParserPool({
      workers: this.options.workers,
      inline: this.options.inline ?? 0,
      table: enc.table,
      schema: this.schema,
      // main-thread streams remember straight into the store (workers' memos come back in their results)
      remember: this.cot.enabled ? (id, bytes, start, end) => reasoning.rememberRange(id, bytes, start, end) : undefined,
    });
    this.pool.on("crash", (slot, generation) => {
      this.metrics.workerRestarts.inc();
      this.logger.error({ slot, generation }, "worker thread died; its streams are failed and a new thread starts");
      for (const c of this.connections) c.onWorkerCrash(slot, generation);
    });
    const every = Math.min(this.limits.idleTimeoutMs, this.limits.slowClientTimeoutMs / 2, 5000);
    this.idleTimer = setInterval(() => this.closeIdle(), every).unref();
    this.renderer = new Renderer();
    this.checker = new AnswerChecker(this.options.checkDeadlineMs);
  }

  /** The service itself is ready (every worker up, not draining): gRPC health, and the start of /readyz. */
  ready(): boolean {
    return !this.stopping && !this.unready && this.pool?.ready() === true;
  }

  /**
   * Another condition of `/readyz` (sidecar mode: the engine, when
   * `--upstream-readiness` is on), with what `/readyz` says of it under
   * `name`. gRPC health does not wait on it: a pod's startup probe must not
   * wait on the engine a native sidecar starts before.
   */
  addReadiness(name: string, ready: () => boolean, detail: () => Record<string, unknown>): void {
    this.readinessParts.push({ name, ready, detail });
  }

  /** What `/readyz` answers: whether it is ready (the service, and each added condition), `status`, each condition's detail. */
  readiness(): { ready: boolean; body: Record<string, unknown> } {
    const ready = this.ready() && this.readinessParts.every((p) => p.ready());
    const body: Record<string, unknown> = { status: ready ? "ready" : "not ready" };
    for (const p of this.readinessParts) body[p.name] = p.detail();
    return { ready, body };
  }

  /**
   * Say not ready (/readyz 503, gRPC health NOT_SERVING) while still serving
   * everything: the first step of a graceful stop, so that load balancers
   * stop sending new work before the drain begins.
   */
  withdrawReadiness(): void {
    this.unready = true;
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

  /** A new connection; `group`: the budget it shares with others (the gRPC calls of one HTTP/2 connection). */
  newConnection(transport: Transport, tenant: string = LOCAL_TENANT, group: ConnectionGroup | null = null): Connection {
    const c = new Connection(this, transport, tenant, group);
    this.connections.add(c);
    this.metrics.connections.inc({ transport: transport.kind });
    return c;
  }

  /**
   * Whether the V8 heap is past the memory budget (limits.memoryBudgetBytes,
   * else HEAP_BUDGET_SHARE of the heap limit): new streams are then refused with
   * `over_budget` until garbage collection brings it back, so that input
   * within the documented limits never runs the process out of memory.
   * Read at most every 50 ms (a heap-statistics call per open would cost).
   */
  overBudget(): boolean {
    const now = performance.now();
    if (now - this.budgetAt > 50) {
      this.budgetAt = now;
      const h = getHeapStatistics();
      const budget = this.limits.memoryBudgetBytes > 0 ? this.limits.memoryBudgetBytes : HEAP_BUDGET_SHARE * h.heap_size_limit;
      this.overBudgetNow = h.used_heap_size > budget;
    }
    return this.overBudgetNow;
  }

  connectionClosed(c: Connection): void {
    if (this.connections.delete(c)) this.metrics.connections.dec({ transport: c.kind });
  }

  /**
   * Log a batch's recoveries: one warn line per batch, at most
   * RECOVERY_LOG_LINES a second; what is left out is counted in the next
   * line (`unlogged`). The metrics count every recovery. Unbounded, a
   * stream of malformed output is a stream of log lines: pino writes each
   * synchronously, on the service's thread, and a hostile engine could fill
   * the disk.
   */
  private logRecoveries(conn: number, notes: RecoveryNote[]): void {
    const now = performance.now();
    if (now - this.recoveryLinesSince >= 1000) {
      this.recoveryLinesSince = now;
      this.recoveryLines = 0;
    }
    if (this.recoveryLines >= RECOVERY_LOG_LINES) {
      this.recoveriesUnlogged += notes.length;
      return;
    }
    this.recoveryLines++;
    const unlogged = this.recoveriesUnlogged;
    this.recoveriesUnlogged = 0;
    this.logger.warn({ conn, recoveries: notes, ...(unlogged > 0 ? { unlogged } : {}) }, "recovered malformed model output");
  }

  /** Fold a batch's counts into the metrics; recoveries are also logged. */
  recordCounts(r: OpsResult, conn: number): void {
    const m = this.metrics;
    const c = r.counts;
    if (c.tokens > 0) m.countTokens(c.tokens);
    for (const type in c.events) m.countEvents(type, c.events[type]!);
    for (const kind in c.recoveries) m.recoveries.inc({ kind }, c.recoveries[kind]);
    for (const code in c.errors) m.errors.inc({ code }, c.errors[code]);
    if (r.notes.length > 0) this.logRecoveries(conn, r.notes);
    for (const memo of r.memos) this.reasoning.remember(memo.id, memo.bytes);
  }

  /** Render a chat request (JSON text) into a Harmony prompt, restoring dropped reasoning. */
  async renderJson(json: string, tenant: string): Promise<RenderOutcome> {
    const parsed = parseJson(json);
    if (!parsed.ok)
      return { ok: false, error: { code: parsed.code, message: `the request is not usable JSON: ${parsed.message}`, path: "" } };
    return this.render(parsed.value, tenant);
  }

  /**
   * Check an answer asked for as JSON against its schema, on the answer-check
   * thread (./checker.ts: a schema is untrusted, its patterns are regular
   * expressions, run on a linear-time engine), within its short deadline:
   * past it, unchecked. Never rejects.
   */
  checkAnswer(schema: unknown, text: string): Promise<CheckOutcome> {
    return this.checker!.check(schema, text);
  }

  /** A request that will need its answer checked is on its way: start the check thread now. */
  warmChecker(): void {
    this.checker?.warm();
  }

  /**
   * Render for `tenant`: only reasoning that tenant's streams remembered is
   * restored (here, from the store), and the prompt is tokenized on the
   * render thread (./renderer.ts), never on this one.
   */
  async render(request: unknown, tenant: string): Promise<RenderOutcome> {
    const { request: restoredRequest, restored } = await this.restore(request, tenant);
    const r = await this.renderer!.render(restoredRequest, restored);
    this.metrics.renders.inc({ outcome: r.ok ? "ok" : "error" });
    if (r.ok && r.restored.length > 0) this.metrics.cotRestored.inc(r.restored.length);
    return r;
  }

  /**
   * {@link render}, answered as `POST /v1/render`'s body (`{"ids", "text",
   * "restored"}`, UTF-8 JSON) made on the render thread: a 4 MiB prompt's
   * answer is megabytes of JSON, which this thread only writes out.
   */
  async renderBody(request: unknown, tenant: string): Promise<RenderBody> {
    const { request: restoredRequest, restored } = await this.restore(request, tenant);
    const r = await this.renderer!.renderBody(restoredRequest, restored);
    this.metrics.renders.inc({ outcome: r.ok ? "ok" : "error" });
    if (r.ok && restored.length > 0) this.metrics.cotRestored.inc(restored.length);
    return r;
  }

  /** The request with the reasoning `tenant`'s streams remembered put back (docs/protocol.md, "Rendering prompts, and restoring dropped reasoning"). */
  private async restore(request: unknown, tenant: string): Promise<ReturnType<typeof restoreReasoning>> {
    const scope = memoScope(tenant);
    let recall = (id: string): string | undefined => this.cot.recall(scope + id);
    if (this.reasoning.shared !== null) {
      // every id this render would look up, from the local cache, the misses in one fetch from the shared store
      const ids = missingReasoning(request);
      if (ids.length > 0) {
        let found: Map<string, string>;
        try {
          found = await this.reasoning.recallMany(ids.map((id) => scope + id));
        } catch (e) {
          // never expected (the shared store checks every reply): the render goes on without restoring
          this.metrics.cotStoreFailures.inc({ op: "read" });
          this.logger.error({ err: e instanceof Error ? e.message : String(e) }, "restoring reasoning failed");
          found = new Map();
        }
        recall = (id) => found.get(scope + id);
      }
    }
    return restoreReasoning(request, recall);
  }

  private closeIdle(): void {
    for (const c of this.connections) {
      if (c.stalledMs > this.limits.slowClientTimeoutMs) c.slowClient();
      else if (c.idleMs > this.limits.idleTimeoutMs) c.idleTimeout();
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
    await this.checker?.close();
    await this.reasoning?.close();
    await this.responses?.shared?.close();
  }
}
