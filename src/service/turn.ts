/**
 * The clients' share of one event-loop turn on the main thread.
 *
 * libuv reads a readable socket up to 32 times (64 KiB each) before it looks
 * at any other socket, and every frame in those reads is decoded and parsed
 * in the read's callback. A client that writes faster than its frames are
 * parsed (600 frames of 5,000 ids at once) thereby held the main thread for
 * 250–330 ms in one poll phase, measured: /healthz and new connections were
 * not read until it ended (bench/hostile (l)). So the frames read in one turn
 * share a budget: past it, a connection's next frames wait for the turn's
 * check phase (`setImmediate`) with its socket paused, which also ends
 * libuv's read loop on it; the other sockets are read first.
 *
 * The waiting connections then share one queue, not a setImmediate each:
 * each check phase reads from them in turn while a fresh budget lasts (one
 * frame at least, so every queue moves), and those with frames left go to
 * the back. With a callback of their own, every waiting connection read a
 * frame in the same check phase: eight gRPC calls of 2,000 opens each held
 * the loop for 54–69 ms per turn, measured (bench/hostile (n)).
 */

/** How long the frames of one turn may take before the rest wait for the next (ms). */
export const TURN_MS = 5;

export class TurnBudget {
  private start = 0;
  private armed = false;
  private readonly over = (): void => {
    this.armed = false;
  };

  /** Work waiting for a later turn, in order; each returns whether it has more left. */
  private waiting: (() => boolean)[] = [];
  private scheduled = false;

  constructor(private readonly ms = TURN_MS) {}

  /**
   * Whether this turn's frames have had their budget, as of `now`
   * (performance.now()). The first call in a turn starts it; the turn ends
   * at the loop's next check phase.
   */
  spent(now: number): boolean {
    if (!this.armed) {
      this.armed = true;
      this.start = now;
      setImmediate(this.over);
      return false;
    }
    return now - this.start >= this.ms;
  }

  /**
   * Run `work` in a later turn, after the work already waiting. Each check
   * phase starts a budget of its own and runs the waiting work in order
   * while it lasts, the first at least; work that says it has more left
   * goes to the back, for this turn's budget if some is left, else the next.
   */
  defer(work: () => boolean): void {
    this.waiting.push(work);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.runWaiting);
    }
  }

  private readonly runWaiting = (): void => {
    this.scheduled = false;
    // a fresh budget for the check phase (the poll phase's, if any, ended here)
    this.armed = false;
    let queue = this.waiting;
    this.waiting = [];
    let at = 0;
    for (let first = true; at < queue.length && (first || !this.spent(performance.now())); first = false) {
      const work = queue[at]!;
      queue[at++] = NOTHING;
      if (work()) queue.push(work);
    }
    // what is left goes first next turn, ahead of work deferred since
    if (at < queue.length) {
      queue = queue.slice(at);
      for (const w of this.waiting) queue.push(w);
      this.waiting = queue;
    }
    if (this.waiting.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(this.runWaiting);
    }
  };
}

const NOTHING = (): boolean => false;
