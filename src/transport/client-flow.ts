/**
 * Flow control from a streamed HTTP answer's client back to the engine.
 * `res.write()` says when the client's socket buffer is over its high-water
 * mark; then `wait()` hands the generation a promise to await before it
 * reads the engine's next chunk, so the engine's SSE body is not read (and
 * TCP holds the engine back) until the client drains. A client that stays
 * unread for `timeoutMs` (`--slow-client-timeout-ms`) is dropped: its socket
 * is destroyed, which ends the generation and the engine's request.
 *
 * Writes coalesce while the client is behind: what is ready while its
 * socket is over the mark is held and goes out in one write when it drains;
 * a client that keeps up gets each chunk in its own write at once.
 */
import type http from "node:http";

export class ClientFlow {
  private blocked: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** What is ready while the client is behind, written in one piece at its drain. */
  private held = "";

  constructor(
    private readonly res: http.ServerResponse,
    private readonly timeoutMs: number,
    /** Called once when the client is dropped for not reading. */
    private readonly onDrop: () => void,
  ) {}

  /** Write `chunk` (held for one write at the drain while the client is behind); past the socket's high-water mark the next `wait()` holds the engine back. */
  write(chunk: string): void {
    if (this.res.destroyed) return;
    if (this.blocked !== null) {
      this.held += chunk;
      return;
    }
    if (!this.res.write(chunk)) this.block();
  }

  /** Write what was held now (the answer's last writes go after it, in order). */
  flush(): void {
    const held = this.held;
    this.held = "";
    if (held !== "" && !this.res.destroyed) this.res.write(held);
  }

  /** A promise to await before the engine's next chunk is read while the client is behind, else null. */
  wait(): Promise<void> | null {
    return this.blocked;
  }

  private block(): void {
    const res = this.res;
    this.blocked = new Promise<void>((resolve) => {
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        if (this.timer !== null) clearTimeout(this.timer);
        this.timer = null;
        this.blocked = null;
        const held = this.held;
        this.held = "";
        if (held !== "" && !res.destroyed && !res.write(held)) this.block();
        resolve();
      };
      res.on("drain", done);
      res.on("close", done);
      this.timer = setTimeout(() => {
        this.timer = null;
        this.onDrop();
        res.destroy(); // 'close' follows: the generation is aborted and the wait ends
      }, this.timeoutMs);
    });
  }
}
