/**
 * The worker pool. Each slot is a single-thread piscina pool, so a stream
 * pinned to a slot always lands on the same thread (piscina's own balancer
 * only sees task names, not streams); piscina still does the spawning,
 * queueing and replacement of a dead thread.
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
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Piscina } from "piscina";
import type { VocabTable } from "../core/vocab.js";
import type { DropTask, OpsResult, OpsTask, WorkerData } from "./task.js";

/** The built worker file (tests running from src/ use the build in dist/). */
export function workerFile(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [
    path.join(here, "../../workers/parser-worker.js"), // dist/src/pool → dist/workers
    path.join(here, "../../dist/workers/parser-worker.js"), // src/pool → dist/workers
  ];
  const found = candidates.find((f) => existsSync(f));
  if (!found) throw new Error("workers/parser-worker.js is not built; run `make build`");
  return found;
}

export interface PoolOptions {
  workers: number;
  table: VocabTable;
}

interface Slot {
  piscina: Piscina;
  generation: number;
  streams: number;
  sessions: number;
}

export interface PoolEvents {
  crash: [slot: number, generation: number];
}

export class ParserPool extends EventEmitter<PoolEvents> {
  private readonly slots: Slot[] = [];
  private closing = false;
  restarts = 0;

  constructor(opts: PoolOptions) {
    super();
    const filename = workerFile();
    const workerData: WorkerData = { table: opts.table };
    for (let i = 0; i < Math.max(1, opts.workers); i++) {
      const piscina = new Piscina({
        filename,
        minThreads: 1,
        maxThreads: 1,
        concurrentTasksPerWorker: 1,
        // an undistributed task goes back to the head of the queue, never the tail
        stricterFIFO: true,
        idleTimeout: 2 ** 31 - 1,
        workerData,
      });
      const slot: Slot = { piscina, generation: 0, streams: 0, sessions: 0 };
      piscina.on("workerDestroy", () => {
        if (this.closing) return;
        slot.generation++;
        this.restarts++;
        this.emit("crash", i, slot.generation);
      });
      // a dead worker with no task in flight is reported as a pool error
      piscina.on("error", () => {});
      this.slots.push(slot);
    }
  }

  get size(): number {
    return this.slots.length;
  }

  generation(slot: number): number {
    return this.slots[slot]!.generation;
  }

  /** Pin a new stream: the slot holding the fewest streams. */
  assign(): number {
    let best = 0;
    for (let i = 1; i < this.slots.length; i++) if (this.slots[i]!.streams < this.slots[best]!.streams) best = i;
    this.slots[best]!.streams++;
    return best;
  }

  release(slot: number, n = 1): void {
    const s = this.slots[slot];
    if (s) s.streams = Math.max(0, s.streams - n);
  }

  async run(slot: number, task: OpsTask): Promise<OpsResult> {
    const s = this.slots[slot]!;
    const r = (await s.piscina.run(task)) as OpsResult;
    s.sessions = r.sessions;
    return r;
  }

  async drop(slot: number, conn: number): Promise<void> {
    const task: DropTask = { t: "drop", conn };
    try {
      const r = (await this.slots[slot]!.piscina.run(task)) as { sessions: number };
      this.slots[slot]!.sessions = r.sessions;
    } catch {
      // a dead worker has forgotten the connection already
    }
  }

  /** Open parser sessions across workers, as last reported. */
  sessions(): number {
    return this.slots.reduce((a, s) => a + s.sessions, 0);
  }

  /** Every slot has a live thread. */
  ready(): boolean {
    return !this.closing && this.slots.every((s) => s.piscina.threads.length > 0);
  }

  /** Fault drill: make a slot's thread exit as if it had crashed. */
  async crash(slot: number): Promise<void> {
    await this.slots[slot]!.piscina.run({ t: "crash" }).catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.slots.map((s) => s.piscina.destroy()));
  }
}
