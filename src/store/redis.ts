/**
 * The shared tier of the reasoning store: Redis (≥ 7) or Valkey, spoken to
 * in plain RESP2 through ioredis, so that every replica of the service can
 * put back the reasoning another replica remembered.
 *
 * Nothing here may slow a stream down or fail a request:
 * - writes are queued and sent as one pipeline per turn of the event loop
 *   (`SET key value PX ttl`), never awaited; while the store is unreachable
 *   they are dropped (and counted) instead of queued without bound;
 * - a render's misses are fetched in one `MGET` within a time budget; past
 *   it, or while the store is unreachable, the render goes on without them;
 * - every failure is counted by operation (the service's
 *   `harmony_cot_store_failures_total{op}`), and a warning is logged at most
 *   once per interval, with the failures since the last one;
 * - the store is a network peer (a proxy, a wrong database, another version,
 *   a hostile neighbour can answer anything): every reply is checked for the
 *   shape its command has, and one of another shape is a failure like any
 *   other, never an exception.
 *
 * Keys: `hs:v2:` (a layout version, so a later layout can share a store with
 * this one) + the kind (`cot:` remembered reasoning, `resp:` stored
 * responses: a key of one kind never names one of another) + the tenant's
 * scope (src/store/store.ts, `memoScope`) + the id. Values: the reasoning's
 * UTF-8 bytes; a stored response's JSON.
 */
import { createRequire } from "node:module";
import type { Redis, RedisOptions } from "ioredis";
import { CodedError } from "../core/errors.js";

/** ioredis, loaded when a shared store is first made: a process without one never pays its start-up. */
const loadIoredis = (): typeof import("ioredis") => createRequire(import.meta.url)("ioredis") as typeof import("ioredis");

/** The prefix of every key: the service, and the version of the key layout and value format. */
export const KEY_PREFIX = "hs:v2:";

/** What a key holds: remembered reasoning (by tool call id) or a stored response (by response id). */
export type StoreKind = "cot" | "resp";

/** The full key of `key` (the tenant's scope and the id) of kind `kind`. */
export function storeKey(kind: StoreKind, key: string): string {
  return `${KEY_PREFIX}${kind}:${key}`;
}

/** A short, flat description of a reply of the wrong shape, for the log (never the reply itself). */
function shapeOf(v: unknown): string {
  if (v === null) return "null";
  if (Buffer.isBuffer(v)) return `bytes(${v.length})`;
  if (Array.isArray(v)) return `array(${v.length})`;
  return typeof v;
}

/** MGET's reply: one value (bytes) or nil per key asked, in order. */
function isMgetReply(v: unknown, n: number): v is (Buffer | null)[] {
  if (!Array.isArray(v) || v.length !== n) return false;
  for (const x of v) if (x !== null && !Buffer.isBuffer(x)) return false;
  return true;
}

/** What a failure was doing: a render's fetch, or a remembered reasoning's write. */
export type StoreOp = "read" | "write";

/** Where the warnings go (a pino logger fits). */
export interface StoreLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface SharedStoreOptions {
  /** `redis://[user:password@]host[:port][/db]`, `rediss://…` (TLS) or `unix:///path/to.sock[?db=N&password=…]`. */
  url: string;
  /** How long a written reasoning is kept (PX). */
  ttlMs: number;
  /** The budget of a render's fetch, in ms. */
  timeoutMs: number;
  /** Bytes of writes queued or in flight past which new writes are dropped (default 16 MiB). */
  maxPendingBytes?: number;
  /** At most one warning per this many ms (default 30 s). */
  warnIntervalMs?: number;
  /** Called for every failure (n operations: keys for a write, 1 for a fetch). */
  onFailure?: (op: StoreOp, n: number) => void;
  logger?: StoreLogger;
  now?: () => number;
}

export interface SharedStoreStats {
  /** Keys written (acknowledged by the store). */
  written: number;
  /** Fetches answered within the budget, and the keys they found. */
  fetches: number;
  found: number;
  /** Failures by operation. */
  readFailures: number;
  writeFailures: number;
}

const STORE_URL = /^(rediss?|unix):\/\//;

/** Whether `url` names a shared store this module can reach (redis://, rediss://, unix://). */
export function isStoreUrl(url: string): boolean {
  return STORE_URL.test(url);
}

/** The URL with its password replaced by `***`, for logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/)([^@/]*)@/i, (_m, scheme: string, auth: string) =>
    auth.includes(":") ? `${scheme}${auth.slice(0, auth.indexOf(":"))}:***@` : `${scheme}***@`,
  );
}

/** ioredis's connection options for a store URL. */
export function connectionOptions(url: string): RedisOptions {
  if (url.startsWith("unix://")) {
    const rest = url.slice("unix://".length);
    const q = rest.indexOf("?");
    const path = decodeURIComponent(q === -1 ? rest : rest.slice(0, q));
    if (!path.startsWith("/"))
      throw new CodedError("usage", `a unix:// store URL names an absolute socket path (unix:///run/redis.sock), got ${redactUrl(url)}`);
    const params = new URLSearchParams(q === -1 ? "" : rest.slice(q + 1));
    const o: RedisOptions = { path };
    const db = params.get("db");
    if (db !== null) o.db = Number(db);
    const username = params.get("username") ?? params.get("user");
    const password = params.get("password");
    if (username !== null) o.username = username;
    if (password !== null) o.password = password;
    return o;
  }
  if (!/^rediss?:\/\//.test(url))
    throw new CodedError("usage", `the reasoning store is memory or a redis://, rediss:// or unix:// URL, got ${redactUrl(url)}`);
  const u = new URL(url);
  const o: RedisOptions = { host: u.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1", port: u.port === "" ? 6379 : Number(u.port) };
  if (u.username !== "") o.username = decodeURIComponent(u.username);
  if (u.password !== "") o.password = decodeURIComponent(u.password);
  if (u.pathname.length > 1) o.db = Number(u.pathname.slice(1));
  if (url.startsWith("rediss://")) o.tls = { servername: o.host as string };
  return o;
}

interface Pending {
  key: string;
  value: Buffer;
}

/** A store's reply to a render's fetch: the values by position (null: not there), or null when it failed. */
export type FetchResult = (Buffer | null)[] | null;

/** The shared tier: queued pipelined writes, budgeted batch reads. */
export class SharedStore {
  readonly stats: SharedStoreStats = { written: 0, fetches: 0, found: 0, readFailures: 0, writeFailures: 0 };
  private readonly client: Redis;
  private queue: Pending[] = [];
  /** Bytes queued or in flight (values only). */
  private pendingBytes = 0;
  private flushScheduled = false;
  private readonly maxPending: number;
  private readonly warnInterval: number;
  private readonly now: () => number;
  private lastWarn = -Infinity;
  /** Failures since the last warning, and the last error seen. */
  private unreported = 0;
  private lastError = "";
  /** A failure was seen since the store was last ready (an info line says when it is back). */
  private failing = false;
  private closed = false;

  constructor(readonly options: SharedStoreOptions) {
    this.maxPending = options.maxPendingBytes ?? 16 * 1024 * 1024;
    this.warnInterval = options.warnIntervalMs ?? 30_000;
    this.now = options.now ?? Date.now;
    const { Redis: Client } = loadIoredis();
    this.client = new Client({
      ...connectionOptions(options.url),
      // RESP2: what every Redis and Valkey speaks, with no HELLO handshake
      protocol: 2,
      lazyConnect: false,
      // while disconnected, commands fail at once rather than wait in a queue
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      connectTimeout: 2000,
      // a store that accepts but never answers: in-flight writes settle (and free their bytes) anyway
      commandTimeout: Math.max(1000, 20 * options.timeoutMs),
      // reconnect for ever, soon: restoring resumes as soon as the store is back
      retryStrategy: (times) => Math.min(50 * times, 1000),
      connectionName: "harmony-sidecar",
    });
    this.client.on("error", (e: unknown) => this.failed(null, 0, e));
    this.client.on("ready", () => {
      if (this.failing) this.options.logger?.info({ store: redactUrl(options.url) }, "reasoning store reachable again");
      this.failing = false;
    });
  }

  /** Whether the connection is up now. */
  get ready(): boolean {
    return this.client.status === "ready";
  }

  /** Resolves true once connected, false after `ms` without. */
  waitReady(ms: number): Promise<boolean> {
    if (this.ready) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.client.off("ready", onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      this.client.on("ready", onReady);
    });
  }

  /** Queue `value` (kept by reference until sent: the caller must not change it) under `key` (remembered reasoning). */
  write(key: string, value: Buffer): void {
    if (this.closed) return;
    if (this.pendingBytes + value.length > this.maxPending) {
      this.failed("write", 1, new Error("write queue full: the store is slower than the writes"));
      return;
    }
    this.queue.push({ key: storeKey("cot", key), value });
    this.pendingBytes += value.length;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Send the queued writes as one pipeline (or drop them while the store is unreachable). */
  flush(): void {
    this.flushScheduled = false;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    let bytes = 0;
    for (const p of batch) bytes += p.value.length;
    if (!this.ready) {
      this.pendingBytes -= bytes;
      this.failed("write", batch.length, new Error(`the store is not connected (${this.client.status})`));
      return;
    }
    const ttl = this.options.ttlMs;
    let sent: Promise<unknown>;
    try {
      const pipe = this.client.pipeline();
      for (const p of batch) pipe.set(p.key, p.value, "PX", ttl);
      sent = pipe.exec();
    } catch (e) {
      sent = Promise.reject(e);
    }
    sent.then(
      (results) => {
        this.pendingBytes -= bytes;
        // one [error, "OK"] per SET; anything else counts as a failed write
        let bad = 0;
        let err: Error | null = null;
        const list: unknown[] = Array.isArray(results) ? results : [];
        for (let i = 0; i < batch.length; i++) {
          const r = list[i];
          const e: unknown = Array.isArray(r) ? r[0] : null;
          if (e instanceof Error) err = e;
          else if (!Array.isArray(r) || r[1] !== "OK")
            err = new Error(`the store answered SET with ${shapeOf(Array.isArray(r) ? r[1] : r)}`);
          else continue;
          bad++;
        }
        this.stats.written += batch.length - bad;
        if (bad > 0) this.failed("write", bad, err!);
      },
      (e: unknown) => {
        this.pendingBytes -= bytes;
        this.failed("write", batch.length, e);
      },
    );
  }

  /**
   * The values of `keys` (remembered reasoning, without the prefix) in one
   * MGET, or null when the store is unreachable, has not answered within the
   * budget (the late answer is dropped) or answered with something that is
   * not one value or nil per key. Never rejects.
   */
  fetch(keys: readonly string[]): Promise<FetchResult> {
    if (keys.length === 0) return Promise.resolve([]);
    const full = keys.map((k) => storeKey("cot", k));
    return this.budgeted(
      "read",
      this.options.timeoutMs,
      () => this.client.mgetBuffer(full),
      (v) => isMgetReply(v, full.length),
      "MGET",
    ).then((r) => {
      if (r === null) return null;
      this.stats.fetches++;
      for (const v of r.value) if (v !== null) this.stats.found++;
      return r.value;
    });
  }

  /**
   * `SET key value PX ttlMs` now, awaited: true once the store has it, false
   * when it is unreachable or has not answered within `timeoutMs` (counted
   * as a failed write). For a record the next request may need on another
   * replica (a stored response), where a queued write could be too late.
   */
  put(kind: StoreKind, key: string, value: Buffer, ttlMs: number, timeoutMs: number): Promise<boolean> {
    const ok = (v: unknown) => v === "OK";
    return this.budgeted("write", timeoutMs, () => this.client.set(storeKey(kind, key), value, "PX", ttlMs), ok, "SET").then(
      (r) => r !== null,
    );
  }

  /** The value of `key`: a Buffer, null when it is not there, undefined when the store failed, was too slow or answered out of shape. */
  get(kind: StoreKind, key: string, timeoutMs: number): Promise<Buffer | null | undefined> {
    const ok = (v: unknown): v is Buffer | null => v === null || Buffer.isBuffer(v);
    return this.budgeted("read", timeoutMs, () => this.client.getBuffer(storeKey(kind, key)), ok, "GET").then((r) =>
      r === null ? undefined : r.value,
    );
  }

  /** Delete `key`: whether it was there, or undefined when the store failed, was too slow or answered out of shape. */
  remove(kind: StoreKind, key: string, timeoutMs: number): Promise<boolean | undefined> {
    const ok = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;
    return this.budgeted("write", timeoutMs, () => this.client.del(storeKey(kind, key)), ok, "DEL").then((r) =>
      r === null ? undefined : r.value > 0,
    );
  }

  /**
   * Run `command` within `timeoutMs`: its value, or null (counted as a
   * failure of `op`) when unreachable, failed, late, or answered with a
   * reply that `shaped` refuses. Never rejects, and never throws.
   */
  private budgeted<T>(
    op: StoreOp,
    timeoutMs: number,
    command: () => Promise<T>,
    shaped: (v: unknown) => boolean,
    name: string,
  ): Promise<{ value: T } | null> {
    if (this.closed || !this.ready) {
      this.failed(op, 1, new Error(`the store is not connected (${this.client.status})`));
      return Promise.resolve(null);
    }
    return new Promise((resolve) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        this.failed(op, 1, new Error(`no answer within ${timeoutMs} ms`));
        resolve(null);
      }, timeoutMs);
      let sent: Promise<T>;
      try {
        sent = command();
      } catch (e) {
        sent = Promise.reject(e instanceof Error ? e : new Error(String(e)));
      }
      sent.then(
        (value) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (shaped(value)) return resolve({ value });
          this.failed(op, 1, new Error(`the store answered ${name} with a reply of the wrong shape (${shapeOf(value)})`));
          resolve(null);
        },
        (e: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.failed(op, 1, e);
          resolve(null);
        },
      );
    });
  }

  /**
   * Count a failure (op null: a connection error, logged but not counted as
   * an operation) and warn, at most once per interval, with how many there
   * were since the last warning.
   */
  private failed(op: StoreOp | null, n: number, e: unknown): void {
    if (op === "read") this.stats.readFailures += n;
    else if (op === "write") this.stats.writeFailures += n;
    if (op !== null) this.options.onFailure?.(op, n);
    if (this.closed) return;
    this.failing = true;
    this.unreported += n;
    this.lastError = e instanceof Error ? e.message : `a non-error (${typeof e})`;
    const now = this.now();
    if (now - this.lastWarn < this.warnInterval) return;
    this.lastWarn = now;
    this.options.logger?.warn(
      {
        store: redactUrl(this.options.url),
        op,
        failures: this.unreported,
        error: this.lastError,
        status: this.client.status,
        warn_interval_ms: this.warnInterval,
      },
      "reasoning store failing: renders go on without restoring what it holds, and new reasoning is kept only in this process",
    );
    this.unreported = 0;
  }

  /** Send what is queued, then close the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    if (this.ready) {
      try {
        await this.client.quit();
        return;
      } catch {
        // fall through: cut it
      }
    }
    this.client.disconnect();
  }
}
