/**
 * Routing one client frame's ops to the parser sessions: ops of streams on
 * the main thread's inline slot are applied as they are read; the rest are
 * grouped into one task per worker slot, in frame order, each carrying only
 * that slot's token ids. `dispatch()` starts the tasks and gives the
 * results to wait for, the inline slot's first.
 */
import type { SessionHost, Session } from "./host.js";
import type { ParserPool } from "./pool.js";
import { K_CLOSE, K_OPEN, K_TOKENS, type OpenWith, type OpsResult, type OpsTask } from "./task.js";

/** Where a stream's ops go: its slot, its number on the connection, and its session when it lives on the main thread. */
export interface Routed {
  slot: number;
  sid: number;
  session: Session | null;
}

export type CloseReason = "eos" | "length" | "abort";

/** One worker slot's share of a frame, in frame order. */
interface Group {
  kinds: number[];
  sids: number[];
  offs: number[];
  extra: [number, OpenWith | string][];
  ids: number;
}

export interface Dispatched {
  /** The results to answer the frame with (the inline slot's, then one per worker task). */
  results: (Promise<OpsResult | null> | OpsResult | null)[];
  /** Whether any result is a worker's (to wait for). */
  pending: boolean;
}

export class FrameRoute {
  private host: SessionHost | null;
  private inlineUsed = false;
  /** The inline slot's answers to the frame's ops read before a pause, in order. */
  private inlineDone: OpsResult[] | null = null;
  private readonly perSlot: (Group | undefined)[] = [];
  private readonly inlineSlot: number;

  constructor(
    private readonly pool: ParserPool,
    private readonly conn: number,
    private readonly json: boolean,
    /** The frame's token ids (ops carry ranges of it). */
    private readonly ids: Uint32Array,
    /** Told when the inline sessions threw (a bug): their streams are then failed as in a worker crash. */
    private readonly onInlineFailure: (e: unknown) => void,
    /** Answer with event objects (an in-process client) rather than encoded events. */
    private readonly objects = false,
  ) {
    this.inlineSlot = pool.inlineSlot;
    this.host = pool.inlineHost;
  }

  tokens(st: Routed, start: number, end: number): void {
    if (st.slot === this.inlineSlot && this.host !== null) {
      // a main-thread stream got its session when its open was applied (if that
      // threw, the crash handler forgot the stream, so no later op finds it)
      const h = this.begin();
      try {
        h.tokensOf(st.session!, this.ids, start, end);
      } catch (e) {
        this.failed(e);
      }
      return;
    }
    const g = this.group(st.slot);
    g.kinds.push(K_TOKENS);
    g.sids.push(st.sid);
    g.offs.push(start, end);
    g.ids += end - start;
  }

  open(st: Routed, spec: OpenWith): void {
    if (st.slot !== this.inlineSlot || this.host === null) return this.control(st, K_OPEN, spec);
    const h = this.begin();
    try {
      st.session = h.openStream(st.sid, spec);
    } catch (e) {
      this.failed(e);
    }
  }

  close(st: Routed, reason: CloseReason): void {
    if (st.slot !== this.inlineSlot || this.host === null) return this.control(st, K_CLOSE, reason);
    const h = this.begin();
    try {
      h.closeStream(st.sid, reason);
    } catch (e) {
      this.failed(e);
    }
  }

  /**
   * The frame's reading stops until a later turn (src/service/turn.ts): the
   * inline sessions' answer so far is taken now, since another
   * connection's frame may use the main thread's host meanwhile; the
   * ops read after go into a batch of their own.
   */
  pause(): void {
    if (!this.inlineUsed) return;
    (this.inlineDone ??= []).push(this.host!.finish());
    this.inlineUsed = false;
  }

  /** Start one task per worker slot used; the results in the order they are to be answered. */
  dispatch(): Dispatched {
    const results: (Promise<OpsResult | null> | OpsResult | null)[] = [];
    if (this.inlineDone !== null) for (const r of this.inlineDone) results.push(r);
    if (this.inlineUsed) results.push(this.pool.inlineHost!.finish());
    let pending = false;
    for (let slot = 0; slot < this.perSlot.length; slot++) {
      const g = this.perSlot[slot];
      if (!g) continue;
      pending = true;
      results.push(
        this.pool.run(slot, this.task(g)).catch(() => {
          // the worker died under this task; the crash handler fails its streams
          return null;
        }),
      );
    }
    return { results, pending };
  }

  /** The inline host, its batch begun for this frame. */
  private begin(): SessionHost {
    const host = this.host!;
    if (!this.inlineUsed) {
      host.begin(this.conn, this.json, this.objects);
      this.inlineUsed = true;
    }
    return host;
  }

  /**
   * The inline sessions threw: a bug, not bad input. They are lost as in a
   * worker crash (their streams get worker_crashed); later ops go to a fresh host.
   */
  private failed(e: unknown): void {
    this.onInlineFailure(e);
    this.pool.inlineFailed();
    this.host = this.pool.inlineHost;
    this.inlineUsed = false;
  }

  private group(slot: number): Group {
    let g = this.perSlot[slot];
    if (!g) this.perSlot[slot] = g = { kinds: [], sids: [], offs: [], extra: [], ids: 0 };
    return g;
  }

  private control(st: Routed, kind: typeof K_OPEN | typeof K_CLOSE, what: OpenWith | string): void {
    const g = this.group(st.slot);
    g.extra.push([g.kinds.length, what]);
    g.kinds.push(kind);
    g.sids.push(st.sid);
    g.offs.push(0, 0);
  }

  /** A slot's task, carrying only that slot's ids. */
  private task(g: Group): OpsTask {
    const ids = new Uint32Array(g.ids);
    const offs = new Uint32Array(g.offs.length);
    let at = 0;
    for (let i = 0; i < g.kinds.length; i++) {
      if (g.kinds[i] !== K_TOKENS) continue;
      const s = g.offs[2 * i]!;
      const e = g.offs[2 * i + 1]!;
      ids.set(this.ids.subarray(s, e), at);
      offs[2 * i] = at;
      offs[2 * i + 1] = at += e - s;
    }
    return {
      t: "ops",
      conn: this.conn,
      json: this.json,
      ...(this.objects ? { objects: true } : {}),
      kinds: Uint8Array.from(g.kinds),
      sids: Uint32Array.from(g.sids),
      offs,
      ids,
      extra: g.extra,
    };
  }
}
