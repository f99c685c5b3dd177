/**
 * A connection's stream bookkeeping: its open streams by name and by handle,
 * and the names and handles closed lately (bounded), so that a late op gets
 * a precise error. What to do with a stream's ops is the connection's and the
 * pool's business; this only knows which streams there are.
 */
import { describeValue } from "../core/json.js";
import type { StreamRef } from "../protocol/events.js";
import type { Routed } from "../pool/route.js";
import { STREAM_BYTES } from "./limits.js";
import { RecentSet } from "./recent.js";

export interface StreamState extends Routed {
  name: string;
  /** Its handle (0: none); its events then carry the handle instead of the name. */
  handle: number;
  generation: number;
}

/** Closed stream names, and handles, remembered per connection for the `stream_closed` error. */
const RECENTLY_CLOSED = 1024;

/** Handles below this live in the array (at most 8192 slots per connection). */
const SMALL_HANDLES = 8192;

/**
 * How an error about an op names the stream: by the name the op gave, or by
 * its handle when it gave none (a handle the op gave may belong to another
 * stream, whose events a client sorts by it).
 */
export function opRef(name: string, handle: number): StreamRef {
  return name !== "" || handle === 0 ? { stream: name } : { handle };
}

/** How a stream's events name it. */
export function refOf(st: StreamState): StreamRef {
  return st.handle !== 0 ? { handle: st.handle } : { stream: st.name };
}

/**
 * Open streams by handle: small handles (the usual 1..N of an engine's
 * sequence slots) index an array, larger ones a Map: a Map lookup per op
 * is a visible share of the main thread on step frames of many streams.
 */
class HandleTable {
  private readonly small: (StreamState | undefined)[] = [];
  private readonly large = new Map<number, StreamState>();

  get(h: number): StreamState | undefined {
    return h < SMALL_HANDLES ? this.small[h] : this.large.get(h);
  }

  set(h: number, st: StreamState): void {
    if (h < SMALL_HANDLES) {
      // filled up to h (no holes: a sparse array would fall back to a dictionary)
      while (this.small.length <= h) this.small.push(undefined);
      this.small[h] = st;
    } else this.large.set(h, st);
  }

  delete(h: number): void {
    if (h < SMALL_HANDLES) this.small[h] = undefined;
    else this.large.delete(h);
  }
}

/** Why an op names no open stream: the code and message of its error. */
export interface LateOp {
  code: "unknown_stream" | "stream_closed";
  message: string;
}

export class StreamBook {
  private readonly byName = new Map<string, StreamState>();
  /** Open streams that have a handle, by handle. */
  private readonly handles = new HandleTable();
  /** Recently closed stream names and handles (bounded), for a precise error on late ops. */
  private readonly closed = new RecentSet<string>(RECENTLY_CLOSED);
  private readonly closedHandles = new RecentSet<number>(RECENTLY_CLOSED);
  private nextSid = 1;
  private nameChars = 0;
  /**
   * The stream find() last found by name: an in-process generation's
   * connection has one stream, named by every step (no hash table a token,
   * whose entries are cold after the other streams' steps).
   */
  private last: StreamState | undefined = undefined;

  get size(): number {
    return this.byName.size;
  }

  /** What the open streams hold by the connection budget's count: STREAM_BYTES each, plus their names. */
  get bytes(): number {
    return this.byName.size * STREAM_BYTES + 2 * this.nameChars;
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The open stream holding `handle`, if any. */
  holder(handle: number): StreamState | undefined {
    return this.handles.get(handle);
  }

  /** A snapshot of the open streams (safe to forget them while iterating). */
  all(): StreamState[] {
    return [...this.byName.values()];
  }

  /** Record a stream opened on `slot`. */
  open(name: string, handle: number, slot: number, generation: number): StreamState {
    const st: StreamState = { name, handle, slot, generation, sid: this.nextSid++, session: null };
    this.byName.set(name, st);
    if (this.last?.name === name) this.last = undefined;
    this.nameChars += name.length;
    this.closed.delete(name);
    if (handle !== 0) {
      this.handles.set(handle, st);
      this.closedHandles.delete(handle);
    }
    return st;
  }

  /** The open stream an op names (by handle when it gives one), if it names one consistently. */
  find(name: string, handle: number): StreamState | undefined {
    if (handle === 0) {
      const last = this.last;
      if (last !== undefined && last.name === name) return last;
      const st = this.byName.get(name);
      if (st !== undefined) this.last = st;
      return st;
    }
    const st = this.handles.get(handle);
    return !st || (name !== "" && st.name !== name) ? undefined : st;
  }

  /** Why `find(name, handle)` found nothing: whyNot's code alone, no message made (most such ops are not listed in the answer). */
  lateCode(name: string, handle: number): LateOp["code"] {
    if (handle !== 0 && this.handles.get(handle)) return "unknown_stream";
    return (handle === 0 ? this.closed.has(name) : this.closedHandles.has(handle)) ? "stream_closed" : "unknown_stream";
  }

  /** Why `find(name, handle)` found nothing: lateCode's code, and what it means for this op. */
  whyNot(name: string, handle: number): LateOp {
    const code = this.lateCode(name, handle);
    const byName = handle === 0;
    const st = byName ? undefined : this.handles.get(handle);
    let message: string;
    if (st) message = `handle ${handle} is stream ${describeValue(st.name)}, not ${describeValue(name)}`;
    else if (code === "stream_closed")
      message = byName ? `stream ${describeValue(name)} is closed` : `the stream with handle ${handle} is closed`;
    else message = byName ? `no open stream ${describeValue(name)}` : `no open stream with handle ${handle}`;
    return { code, message };
  }

  /** The stream is closed (or lost): forget it, and remember its name and handle as closed. */
  forget(st: StreamState): void {
    if (this.byName.delete(st.name)) this.nameChars -= st.name.length;
    if (this.last?.name === st.name) this.last = undefined;
    this.closed.add(st.name);
    if (st.handle !== 0) {
      this.handles.delete(st.handle);
      this.closedHandles.add(st.handle);
    }
  }
}
