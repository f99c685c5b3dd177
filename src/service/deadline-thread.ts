/**
 * One worker thread for jobs that must not run long: the render thread
 * (./renderer.ts) and the inspector's parse thread (src/transport/inspect.ts).
 *
 * - The thread starts on first use, and is unref'd while it has nothing to
 *   do (an idle one never keeps the process up).
 * - A thread says it is ready by posting `{ id: 0 }` once its module has
 *   loaded (READY). A job's deadline counts from then: a thread's cold start
 *   (loading its modules and tables) is not the job's time. The start has a
 *   bound of its own (START_DEADLINE_MS); a thread not ready by then is
 *   stopped, and its jobs are answered as if their deadline had passed.
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

/** What a thread posts once it is ready for jobs (job ids start at 1). */
export const READY = { id: 0 } as const;

/** How long a thread may take to become ready before it is stopped. */
export const START_DEADLINE_MS = 30_000;

interface Pending<Done> {
  resolve(o: Outcome<Done>): void;
  /** Armed once the thread is ready. */
  timer: NodeJS.Timeout | null;
  deadlineMs: number;
  late: string;
}

export class DeadlineThread<Job extends { id: number }, Done extends { id: number }> {
  private worker: Worker | null = null;
  private ready = false;
  private startTimer: NodeJS.Timeout | null = null;
  private next = 1;
  private readonly pending = new Map<number, Pending<Done>>();

  /**
   * `file`: the built worker module; `name`: what the thread is called in
   * the reasons given; `startDeadlineMs`: how long it may take to be ready.
   */
  constructor(
    private readonly file: () => string,
    private readonly name: string,
    private readonly startDeadlineMs: number = START_DEADLINE_MS,
  ) {}

  /**
   * Post `job` (with an `id` added; `transfer`: buffers moved, not copied)
   * and wait for its answer at most `deadlineMs` from when the thread is
   * ready (now, if it is).
   */
  run(job: WithoutId<Job>, deadlineMs: number, late: string, transfer: readonly Transferable[] = []): Promise<Outcome<Done>> {
    const w = this.start();
    const id = this.next++;
    return new Promise((resolve) => {
      const p: Pending<Done> = { resolve, timer: null, deadlineMs, late };
      if (this.ready) this.arm(p);
      this.pending.set(id, p);
      w.ref(); // a job in progress keeps it
      w.postMessage({ id, ...job }, [...transfer]);
    });
  }

  /** The thread, started if it is not (e.g. to build what it needs before the first job). */
  start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(this.file());
    w.unref();
    this.ready = false;
    this.startTimer = setTimeout(() => {
      if (this.worker === w) this.restart(`the ${this.name} worker did not start within ${this.startDeadlineMs} ms`);
    }, this.startDeadlineMs);
    this.startTimer.unref();
    w.on("message", (d: Done) => {
      if (this.worker !== w) return;
      if (d.id === READY.id) {
        this.ready = true;
        this.clearStart();
        for (const p of this.pending.values()) this.arm(p);
        return;
      }
      const p = this.pending.get(d.id);
      if (!p) return;
      this.pending.delete(d.id);
      if (p.timer !== null) clearTimeout(p.timer);
      p.resolve({ done: d, why: "", timedOut: false });
      if (this.pending.size === 0) w.unref();
    });
    const gone = (why: string) => {
      if (this.worker !== w) return;
      this.worker = null;
      this.clearStart();
      this.failAll(why, false);
    };
    w.on("error", (e) => gone(`the ${this.name} worker failed: ${e.message}`));
    w.on("exit", () => gone(`the ${this.name} worker stopped`));
    this.worker = w;
    return w;
  }

  /** Whether the thread is running and has said it is ready (for tests and metrics). */
  get isReady(): boolean {
    return this.worker !== null && this.ready;
  }

  /** Start `p`'s deadline (once). */
  private arm(p: Pending<Done>): void {
    if (p.timer === null) p.timer = setTimeout(() => this.restart(p.late), p.deadlineMs);
  }

  private clearStart(): void {
    if (this.startTimer !== null) clearTimeout(this.startTimer);
    this.startTimer = null;
  }

  /** A job ran past its deadline (or the thread never got ready): every job in progress is answered, and a fresh thread takes the next. */
  private restart(why: string): void {
    const w = this.worker;
    this.worker = null;
    this.clearStart();
    this.failAll(why, true);
    void w?.terminate();
  }

  private failAll(why: string, timedOut: boolean): void {
    for (const p of this.pending.values()) {
      if (p.timer !== null) clearTimeout(p.timer);
      p.resolve({ done: null, why, timedOut });
    }
    this.pending.clear();
  }

  /** Stop the thread, answering what it had with `why` (the next job starts a new one). */
  async close(why: string): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.clearStart();
    this.failAll(why, false);
    if (w) await w.terminate();
  }
}
