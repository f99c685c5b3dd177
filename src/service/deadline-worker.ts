/**
 * One worker thread for jobs that must not run long: the render thread
 * (./renderer.ts) and the inspector's parse thread (src/transport/inspect.ts).
 *
 * - The thread starts on first use, and is unref'd while it has nothing to
 *   do (an idle one never keeps the process up).
 * - A job past its deadline stops the thread: every job on it is answered
 *   (no `done`, `timedOut`), and the next job starts a fresh thread. So a
 *   job built to be slow costs a restart, never the process's responsiveness.
 * - A thread that fails or exits answers its jobs the same way (not
 *   `timedOut`). A thread already replaced (after a deadline) is ignored:
 *   its end must not fail its successor's jobs.
 */
import { Worker, type Transferable } from "node:worker_threads";

/** A job's answer: what the thread sent back, or null and why (its deadline passed, or the thread stopped). */
export type Outcome<Done> = { done: Done; why: ""; timedOut: false } | { done: null; why: string; timedOut: boolean };

/** A job as posted, less the `id` the thread adds. */
export type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;

interface Pending<Done> {
  resolve(o: Outcome<Done>): void;
  timer: NodeJS.Timeout;
}

export class DeadlineWorker<Job extends { id: number }, Done extends { id: number }> {
  private worker: Worker | null = null;
  private next = 1;
  private readonly pending = new Map<number, Pending<Done>>();

  /** `file`: the built worker module; `name`: what the thread is called in the reasons given. */
  constructor(
    private readonly file: () => string,
    private readonly name: string,
  ) {}

  /** Post `job` (with an `id` added; `transfer`: buffers moved, not copied) and wait at most `deadlineMs` for its answer. */
  run(job: WithoutId<Job>, deadlineMs: number, late: string, transfer: readonly Transferable[] = []): Promise<Outcome<Done>> {
    const w = this.start();
    const id = this.next++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.restart(late), deadlineMs);
      this.pending.set(id, { resolve, timer });
      w.ref(); // a job in progress keeps it
      w.postMessage({ id, ...job }, [...transfer]);
    });
  }

  /** The thread, started if it is not (e.g. to build what it needs before the first job). */
  start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(this.file());
    w.unref();
    w.on("message", (d: Done) => {
      const p = this.pending.get(d.id);
      if (!p) return;
      this.pending.delete(d.id);
      clearTimeout(p.timer);
      p.resolve({ done: d, why: "", timedOut: false });
      if (this.pending.size === 0) w.unref();
    });
    const gone = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      this.failAll(why, false);
    };
    w.on("error", (e) => gone(`the ${this.name} worker failed: ${e.message}`));
    w.on("exit", () => gone(`the ${this.name} worker stopped`));
    this.worker = w;
    return w;
  }

  /** A job ran past its deadline: every job in progress is answered, and a fresh thread takes the next. */
  private restart(why: string): void {
    const w = this.worker;
    this.worker = null;
    this.failAll(why, true);
    void w?.terminate();
  }

  private failAll(why: string, timedOut: boolean): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.resolve({ done: null, why, timedOut });
    }
    this.pending.clear();
  }

  /** Stop the thread, answering what it had with `why` (the next job starts a new one). */
  async close(why: string): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.failAll(why, false);
    if (w) await w.terminate();
  }
}
