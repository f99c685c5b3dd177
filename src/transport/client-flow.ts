/**
 * Flow control from a streamed HTTP answer's client back to the engine.
 * `res.write()` says when the client's socket buffer is over its high-water
 * mark; then `wait()` hands the generation a promise to await before it
 * reads the engine's next chunk, so the engine's SSE body is not read (and
 * TCP holds the engine back) until the client drains. A client that stays
 * unread for `timeoutMs` (`--slow-client-timeout-ms`) is dropped: its socket
 * is destroyed, which ends the generation and the engine's request.
 *
 * Writes coalesce. What a turn of the event loop writes to a client goes
 * in one write at that turn's end (a `setImmediate`: the check phase,
 * straight after the poll phase that read the engine's events, so no ready
 * token waits for anything but the rest of that turn's reading), or at once
 * past {@link TURN_MAX_CHARS}. So a front that reads 64 streams' events in
 * one turn parses them all back to back, then makes its 64 writes (each of
 * which may wake a client), rather than parsing between writes: bench/front,
 * 64 paced streams, the Chat front's CPU a token 0.92× of writing each chunk
 * at once, round by round in two runs of 3 rounds (2026-12-07), its user
 * time 0.87× with the same writes.
 * After a stream's first write, a due write waits once more, to the next
 * turn's end: what that turn's poll reads of the engine (already in the
 * sockets) goes in the same write. A loop that is not behind finds nothing
 * there and the write goes microseconds later; one that is (flat out) makes
 * half the writes, each a system call and a wake of the client: bench/front
 * (2026-12-07, 64 × 16 × 256 ids flat out, 9 rounds) 1.08× (Chat) and 1.07×
 * (Responses) the tokens/s of writing at the first turn's end; paced, the gap
 * p99 1.02× / 1.07× at 100 steps/s and 0.99× at 400.
 * And what is ready while the client's socket is over its mark is held and
 * goes out in one write when it drains. An answer's last writes (through
 * `res`) go after {@link flush}, or take the {@link rest} with them.
 *
 * A chunk goes straight to the client's socket as one HTTP/1.1 chunk (its
 * size line, its bytes and the CRLF in one string, one write), where node's
 * `res.write` corks the socket and writes the same three pieces in a writev
 * on the next tick: bench/front's paced Chat front took 45 µs of CPU a
 * token against 59 through `res.write` (5 rounds, 2026-12-04). That is done
 * only where node's own framing is HTTP/1.1's chunks and the response owns
 * its socket with its head already on it (see {@link directSocket}); an
 * HTTP/1.0 client's unchunked body, a pipelined response still waiting for
 * its socket, or a stand-in for `res` get `res.write`. What node writes
 * later (`res.write`, `res.end`) frames its own chunks after these.
 */
import type http from "node:http";
import type { Socket } from "node:net";

/**
 * The socket a streamed answer's chunks may be written to directly, or null:
 * `res`'s head is written (flushed now if it was only set) on the socket it
 * owns, and node frames its body as chunks. (`chunkedEncoding` is node's own
 * flag, set when the head is made: false for an HTTP/1.0 client, a
 * content-length, or no body.)
 */
export function directSocket(res: http.ServerResponse): Socket | null {
  const sock = res.socket as Socket | null;
  // a pipelined response has no socket until the ones before it have ended
  if (!res.headersSent || sock === null || (res as { chunkedEncoding?: unknown }).chunkedEncoding !== true) return null;
  res.flushHeaders();
  return sock;
}

/** `text` as one HTTP/1.1 chunk: its size in bytes (hex), CRLF, the text, CRLF. */
export function chunkOf(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}

/** What one turn's writes to a client may gather before they go at once: node's default high-water mark for a socket. */
const TURN_MAX_CHARS = 16 * 1024;

/** The flows with a write due at the end of this turn of the event loop (each once), and whether that end is scheduled. */
const due: ClientFlow[] = [];
let dueScheduled = false;

/** `flow` written at the end of this turn of the event loop. */
function dueAtTurnEnd(flow: ClientFlow): void {
  due.push(flow);
  if (!dueScheduled) {
    dueScheduled = true;
    setImmediate(writeDue);
  }
}

function writeDue(): void {
  dueScheduled = false;
  // (a flow written to while these go out is due again, at the next turn's end: only those here now)
  const n = due.length;
  for (let i = 0; i < n; i++) due[i]!.writeDue();
  due.splice(0, n);
}

export class ClientFlow {
  private blocked: Promise<void> | null = null;
  /** What was written in this turn of the event loop, not yet sent: it goes in one write at the turn's end. */
  private pending = "";
  private isDue = false;
  /** The due write waited one turn already. */
  private waited = false;
  /** Something was sent: the stream's first write (its first token) does not wait. */
  private wrote = false;
  private timer: NodeJS.Timeout | null = null;
  /** What is ready while the client is behind, written in one piece at its drain. */
  private held = "";
  /** Where chunks go: the socket itself ({@link directSocket}), null for `res.write`, undefined until the head is set. */
  private sock: Socket | null | undefined = undefined;

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
    this.pending += chunk;
    // a turn's writes past a socket buffer's worth go at once: the client's backpressure is heard now, not at the turn's end
    if (this.pending.length >= TURN_MAX_CHARS) return this.sendPending();
    if (this.isDue) return;
    this.isDue = true;
    dueAtTurnEnd(this);
  }

  /**
   * The turn's end (see {@link writeDue}): what this turn wrote, sent; or,
   * once, at the next turn's end, after its reading (see the module's
   * comment).
   */
  writeDue(): void {
    if (!this.waited && this.wrote && this.pending !== "" && this.pending.length < TURN_MAX_CHARS) {
      this.waited = true;
      return dueAtTurnEnd(this);
    }
    this.waited = false;
    this.isDue = false;
    this.sendPending();
  }

  private sendPending(): void {
    const text = this.pending;
    this.pending = "";
    // (an answer ended without flush(): nothing goes after its end, where the socket's next response would be)
    if (text === "" || this.res.destroyed || this.res.writableEnded) return;
    this.wrote = true;
    if (!this.send(text)) this.block();
  }

  /** One write of `text`; false once the client's buffer is over its mark. */
  private send(text: string): boolean {
    // (an empty chunk is the body's end in HTTP/1.1: nothing is written for nothing, as res.write does)
    if (text === "") return true;
    const res = this.res;
    if (this.sock === undefined && res.headersSent) this.sock = directSocket(res);
    const sock = this.sock;
    return sock ? sock.write(chunkOf(text)) : res.write(text);
  }

  /** Write what was held now (the answer's last writes go after it, in order). */
  flush(): void {
    const text = this.pending;
    this.pending = "";
    if (text !== "" && !this.res.destroyed) this.send(text);
    const held = this.held;
    this.held = "";
    if (held !== "" && !this.res.destroyed) this.send(held);
  }

  /**
   * What is ready and not yet sent (this turn's writes, then what was held
   * for a client behind), taken: for the answer's last write through `res`,
   * so that it goes with the answer's end in one write (node's writev).
   */
  rest(): string {
    const text = this.pending + this.held;
    this.pending = "";
    this.held = "";
    return text;
  }

  /** A promise to await before the engine's next chunk is read while the client is behind, else null. */
  wait(): Promise<void> | null {
    return this.blocked;
  }

  private block(): void {
    const res = this.res;
    // the socket's drain when chunks go to it (node's response says nothing of writes it did not make)
    const writer = this.sock ?? res;
    this.blocked = new Promise<void>((resolve) => {
      const done = () => {
        writer.off("drain", done);
        res.off("close", done);
        if (this.timer !== null) clearTimeout(this.timer);
        this.timer = null;
        this.blocked = null;
        const held = this.held;
        this.held = "";
        if (held !== "" && !res.destroyed && !this.send(held)) this.block();
        resolve();
      };
      writer.on("drain", done);
      res.on("close", done);
      this.timer = setTimeout(() => {
        this.timer = null;
        this.onDrop();
        res.destroy(); // 'close' follows: the generation is aborted and the wait ends
      }, this.timeoutMs);
    });
  }
}
