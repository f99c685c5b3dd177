/**
 * The engine's step loop: continuous batching of every running sequence (at
 * most `maxNumSeqs` at once, the rest waiting, admitted as others end), one
 * step each `stepMs` (0: as fast as the event loop turns).
 */
import { performance } from "node:perf_hooks";

/** One request in the engine: its choices advance one step per engine step. */
export interface Job {
  seqs: number;
  closed: boolean;
  /** Tokens held (prompt and generated), for the KV-cache gauge. */
  held(): number;
  /** One engine step; true when the request is done. */
  step(): boolean;
}

export class StepLoop {
  readonly running: Job[] = [];
  readonly waiting: Job[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | null = null;
  private nextAt = 0;
  private stopped = false;

  constructor(
    private readonly stepMs: number,
    private readonly maxNumSeqs: number,
  ) {}

  submit(job: Job): void {
    this.waiting.push(job);
    this.admitWaiting();
    this.schedule();
  }

  /** No more steps (the server is closing). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) {
      clearTimeout(this.timer as NodeJS.Timeout);
      clearImmediate(this.timer as NodeJS.Immediate);
    }
  }

  private runningSeqs(): number {
    return this.running.reduce((a, j) => a + j.seqs, 0);
  }

  private admitWaiting(): void {
    const { running, waiting } = this;
    while (waiting.length > 0 && (running.length === 0 || this.runningSeqs() + waiting[0]!.seqs <= this.maxNumSeqs))
      running.push(waiting.shift()!);
  }

  private schedule(): void {
    if (this.timer !== null || this.stopped || (this.running.length === 0 && this.waiting.length === 0)) return;
    if (this.stepMs === 0) {
      this.timer = setImmediate(this.tick);
      return;
    }
    const now = performance.now();
    if (this.nextAt < now - this.stepMs) this.nextAt = now; // idle, or far behind: start afresh
    this.nextAt += this.stepMs;
    this.timer = setTimeout(this.tick, Math.max(0, this.nextAt - now));
  }

  private readonly tick = (): void => {
    this.timer = null;
    this.admitWaiting();
    const running = this.running;
    for (let k = 0; k < running.length;) {
      const job = running[k]!;
      if (job.closed || job.step()) running.splice(k, 1);
      else k++;
    }
    this.admitWaiting();
    this.schedule();
  };
}
