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
 */

/** How long the frames of one turn may take before the rest wait for the next (ms). */
export const TURN_MS = 5;

export class TurnBudget {
  private start = 0;
  private armed = false;
  private readonly over = (): void => {
    this.armed = false;
  };

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
}
