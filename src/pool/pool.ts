/**
 * The worker pool. Each worker slot is a single-thread piscina pool, so a
 * stream pinned to a slot always lands on the same thread (piscina's own
 * balancer only sees task names, not streams); piscina still does the
 * spawning, queueing and replacement of a dead thread.
 *
 * The pool may also have an inline slot: sessions held on the main thread
 * itself, answered synchronously with no thread hop. A hop costs tens of
 * microseconds (two thread wake-ups and a structured clone each way) while
 * parsing costs tens of nanoseconds per token, so small frames are cheaper
 * inline; big step frames gain from running on workers in parallel.
 * bench/RESULTS.md has the measurements behind the defaults.
 *
 * Ordering: a slot runs its tasks one at a time, first in first out, so the
 * ops of one stream are applied in the order they were submitted and its
 * events come back in that order. Tasks of different slots run in parallel.
 *
 * A thread that dies takes its sessions with it: the pool bumps the slot's
 * generation and emits `crash`; connections then fail the streams they had
 * pinned there with `worker_crashed`. piscina starts a fresh thread.
 */
import { EventEmitter } from "node:events";
import { Piscina } from "piscina";
import { Vocabulary, type VocabTable } from "../core/vocab.js";
import type { Schema } from "../protocol/schema.js";
import { builtWorker } from "./built-worker.js";
import { SessionHost } from "./host.js";
import type { MemoSink } from "../store/cot-buffer.js";
import type { DrillTask, DropTask, OpsResult, OpsTask, WorkerData } from "./task.js";

/** The parser worker's built entry point for piscina: CommonJS (workers/parser-entry.cts says why), loading workers/parser.ts. */
export function workerFile(): string {
  return builtWorker("parser", "commonjs");
}

/** The worker module's handler: a named export (see workers/parser.ts for why never the default). */
export const WORKER_HANDLER = "handle";

export interface PoolOptions {
  /** Worker threads (0: parse on the main thread only). */
  workers: number;
  /**
   * Streams the main thread holds itself (0: none; all of them when workers
   * is 0). New streams go there while it holds fewer, then to the workers.
   */
  inline: number;
  table: VocabTable;
  schema: Schema;
  /** The inline slot's sink for tool calls' reasoning (workers return theirs in results). */
  remember?: MemoSink;
}

interface Slot {
  /** A worker thread's pool, or null for the inline slot. */
  piscina: Piscina | null;
  generation: number;
  streams: number;
  /** A worker's sessions as it last reported them (the inline slot's are read from its host). */
  sessions: number;
}

export interface PoolEvents {
  crash: [slot: number, generation: number];
}

export class ParserPool extends EventEmitter<PoolEvents> {
  private readonly slots: Slot[] = [];
  private closing = false;
  /** The inline slot's index (after the workers), or -1. */
  readonly inlineSlot: number;
  private readonly inlineMax: number;
  private host: SessionHost | null = null;
  private readonly newHost: () => SessionHost;
  private readonly table: VocabTable;
  private vocab: Vocabulary | null = null;

  /**
   * The vocabulary on this (the main) thread, built on first use: for an
   * inline slot, and for whatever else reads tokens here. One, because its
   * string cache is per thread.
   */
  vocabulary(): Vocabulary {
    return (this.vocab ??= new Vocabulary(this.table));
  }

  constructor(opts: PoolOptions) {
    super();
    const workerData: WorkerData = { table: opts.table, schema: opts.schema.root.toJSON() };
    const workers = Math.max(0, opts.workers);
    const filename = workers > 0 ? workerFile() : "";
    for (let i = 0; i < workers; i++) {
      const piscina = new Piscina({
        filename,
        name: WORKER_HANDLER,
        minThreads: 1,
        maxThreads: 1,
        // tasks are posted ahead so the thread goes from one to the next
        // without waiting for a round trip; the handler is synchronous, so
        // they still run (and answer) one at a time, in order
        concurrentTasksPerWorker: 16,
        // an undistributed task goes back to the head of the queue, never the tail
        stricterFIFO: true,
        idleTimeout: 2 ** 31 - 1,
        workerData,
      });
      const slot: Slot = { piscina, generation: 0, streams: 0, sessions: 0 };
      piscina.on("workerDestroy", () => {
        if (this.closing) return;
        slot.generation++;
        this.emit("crash", i, slot.generation);
      });
      // a dead worker with no task in flight is reported as a pool error
      piscina.on("error", () => {});
      this.slots.push(slot);
    }
    this.inlineMax = workers === 0 ? Infinity : Math.max(0, opts.inline);
    this.table = opts.table;
    this.newHost = () => new SessionHost(this.vocabulary(), opts.schema, opts.remember ?? null, true);
    if (this.inlineMax > 0) {
      this.inlineSlot = this.slots.length;
      this.host = this.newHost();
      this.slots.push({ piscina: null, generation: 0, streams: 0, sessions: 0 });
    } else this.inlineSlot = -1;
  }

  /** Worker threads (the inline slot is not one). */
  get workers(): number {
    return this.inlineSlot < 0 ? this.slots.length : this.slots.length - 1;
  }

  generation(slot: number): number {
    return this.slots[slot]!.generation;
  }

  /**
   * Pin a new stream: the main thread while it holds fewer than its share
   * (a connection with a few streams never pays a thread hop), otherwise
   * the worker holding the fewest streams.
   */
  assign(): number {
    const inl = this.inlineSlot;
    let best = inl;
    if (inl < 0 || this.slots[inl]!.streams >= this.inlineMax) {
      best = 0;
      for (let i = 1; i < this.slots.length; i++) if (i !== inl && this.slots[i]!.streams < this.slots[best]!.streams) best = i;
    }
    this.slots[best]!.streams++;
    return best;
  }

  /** Count one more stream on a given slot (a stream that must live where another one did). */
  assignTo(slot: number): number {
    this.slots[slot]!.streams++;
    return slot;
  }

  release(slot: number, n = 1): void {
    const s = this.slots[slot];
    if (s) s.streams = Math.max(0, s.streams - n);
  }

  /** Run a task on a worker slot. */
  async run(slot: number, task: OpsTask): Promise<OpsResult> {
    const s = this.slots[slot]!;
    const r = (await s.piscina!.run(task)) as OpsResult;
    s.sessions = r.sessions;
    return r;
  }

  /** The inline slot's sessions (null without an inline slot); ops are fed to it directly. */
  get inlineHost(): SessionHost | null {
    return this.host;
  }

  /**
   * The inline host threw. The core never throws on input, so this is a
   * bug; its sessions are lost exactly as a crashed worker's would be: a
   * fresh host, a new generation and `crash`.
   */
  inlineFailed(): void {
    const s = this.slots[this.inlineSlot]!;
    this.host = this.newHost();
    s.generation++;
    this.emit("crash", this.inlineSlot, s.generation);
  }

  async drop(slot: number, conn: number): Promise<void> {
    const s = this.slots[slot]!;
    if (!s.piscina) {
      this.host!.drop(conn);
      return;
    }
    const task: DropTask = { t: "drop", conn };
    try {
      const r = (await s.piscina.run(task)) as { sessions: number };
      s.sessions = r.sessions;
    } catch {
      // a dead worker has forgotten the connection already
    }
  }

  /** Open parser sessions: the workers' as last reported, the main thread's as they are. */
  sessions(): number {
    return this.slots.reduce((a, s) => a + (s.piscina ? s.sessions : 0), this.host?.sessions ?? 0);
  }

  /** Every slot has a live thread. */
  ready(): boolean {
    return !this.closing && this.slots.every((s) => !s.piscina || s.piscina.threads.length > 0);
  }

  /** Fault drill: make a slot's thread exit as if it had crashed. */
  async crash(slot: number): Promise<void> {
    await this.thread(slot)
      .run({ t: "crash" } satisfies DrillTask)
      .catch(() => undefined);
  }

  /** Fault drill: make a slot's handler throw, as a bug in the session code would (the task rejects, the thread ends). */
  async throwIn(slot: number): Promise<void> {
    await this.thread(slot).run({ t: "throw" } satisfies DrillTask);
  }

  private thread(slot: number): Piscina {
    const p = this.slots[slot]!.piscina;
    if (!p) throw new Error("bug: the inline slot has no thread to crash");
    return p;
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.slots.map((s) => s.piscina?.destroy()));
  }
}
