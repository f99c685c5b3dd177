/**
 * Remembered chains of thought, by the tool call id the service emitted.
 * Bounded by bytes and entries (least recently used goes first) and by age.
 * Stateless clients that drop the reasoning when they send history back get
 * it restored from here when the conversation is rendered.
 *
 * Layout, chosen for the garbage collector: a service remembers about a
 * thousand tool calls a second under load, and every object an entry
 * allocates is copied by the young-generation GC once or twice before it is
 * promoted, then churns the old generation when it is evicted. So an entry
 * is a slot in a few typed arrays (offset, length, cost, expiry, LRU links),
 * the reasoning's UTF-8 bytes are copied into one shared byte arena, and the
 * only per-entry objects are the id string and its map slot. Text is decoded
 * when recalled.
 *
 * The arena is a ring kept in recency order: an entry is appended at `head`,
 * and a recall moves its bytes to `head` too, so the least recently used
 * entry is always the physically oldest and eviction frees the ring's tail.
 * The ring is allocated once at twice the byte budget; its pages are only
 * committed as they are written, and the head wraps to the start as soon as
 * it passes 1.5 times the live bytes (and the start is free), so what is
 * touched follows what is held. Nothing is copied as the store grows; only when
 * recalls have left the ring without a gap are the live entries packed, in
 * order, into a new ring.
 */
import type { ReasoningStore } from "./store.js";
import { CodedError } from "../core/errors.js";

export interface CotStoreOptions {
  maxBytes: number;
  maxEntries: number;
  ttlMs: number;
  now?: () => number;
  /** Size of the byte ring (default: twice maxBytes, and 64 KiB); for tests. */
  arenaBytes?: number;
}

export interface CotStoreStats {
  entries: number;
  bytes: number;
  evictions: number;
  hits: number;
  misses: number;
}

/** Counted per entry beside its text and id: its map slot, typed-array slot and the id string's header. */
const ENTRY_OVERHEAD = 160;
const NONE = -1;
/** Below this many bytes an entry is copied by a loop (no subarray view). */
const SHORT_COPY = 256;
/** The ring wraps early once past 1.5 times the live bytes, but not below this. */
const MIN_EXTENT = 64 * 1024;
/**
 * The largest byte budget: the ring is sized at twice the budget, and a
 * typed array cannot pass 4 GiB on Node 20.
 */
export const MAX_STORE_BYTES = 1024 * 1024 * 1024;

const decoder = new TextDecoder();

/** The in-process reasoning store. */
export class CotStore implements ReasoningStore {
  private readonly map = new Map<string, number>();
  private bytes = 0;
  private readonly now: () => number;
  readonly stats: CotStoreStats = { entries: 0, bytes: 0, evictions: 0, hits: 0, misses: 0 };

  // slots: parallel arrays, grown by doubling; free slots on a stack
  private ids: (string | null)[] = [];
  private off = new Float64Array(0);
  private len = new Int32Array(0);
  private cost = new Float64Array(0);
  private expires = new Float64Array(0);
  private prev = new Int32Array(0);
  private next = new Int32Array(0);
  private free: number[] = [];
  /** Least and most recently used slot (NONE when empty). */
  private first = NONE;
  private last = NONE;

  /** The byte arena (a ring in recency order) and where the next entry goes. */
  private data: Uint8Array;
  private head = 0;
  /** Bytes of live entries in the arena. */
  private live = 0;
  /** The ring's size (allocated on first use). */
  private readonly ringBytes: number;
  /** The furthest the head has gone since the ring was allocated. */
  private reach = 0;

  constructor(readonly options: CotStoreOptions) {
    if (!(options.maxBytes <= MAX_STORE_BYTES)) {
      throw new CodedError("usage", `the reasoning store takes at most ${MAX_STORE_BYTES} bytes (1 GiB), not ${options.maxBytes}`);
    }
    this.now = options.now ?? Date.now;
    this.ringBytes = Math.max(1, Math.floor(options.arenaBytes ?? 2 * options.maxBytes + MIN_EXTENT));
    this.data = new Uint8Array(0);
  }

  get enabled(): boolean {
    return this.options.maxBytes > 0 && this.options.maxEntries > 0;
  }

  /** The ring's size (virtual: its pages are committed as they are written). */
  get arenaBytes(): number {
    return this.data.length;
  }

  /** How far into the ring bytes have been written since it was allocated (what it can hold resident). */
  get arenaReach(): number {
    return this.reach;
  }

  /** Remember `utf8` (the reasoning's UTF-8 bytes, copied) under `id`. */
  remember(id: string, utf8: Uint8Array): void {
    this.rememberRange(id, utf8, 0, utf8.length);
  }

  /** Remember `src[start, end)` (UTF-8, copied; `src` is not kept) under `id`. */
  rememberRange(id: string, src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    if (!this.enabled || n <= 0) return;
    const cost = n + 2 * id.length + ENTRY_OVERHEAD;
    if (cost > this.options.maxBytes) return;
    const old = this.map.get(id);
    if (old !== undefined) this.remove(old);
    // what evict() would drop after the insert anyway, dropped first: its bytes make room
    const now = this.now();
    this.evict(now, false);
    const slot = this.slot();
    this.ids[slot] = id;
    this.len[slot] = n;
    this.cost[slot] = cost;
    this.expires[slot] = now + this.options.ttlMs;
    this.append(slot, src, start, n);
    this.map.set(id, slot);
    this.bytes += cost;
    this.evict(now, true);
  }

  recall(id: string): string | undefined {
    const slot = this.map.get(id);
    if (slot === undefined || this.expires[slot]! <= this.now()) {
      if (slot !== undefined) this.remove(slot);
      this.stats.misses++;
      this.sync();
      return undefined;
    }
    const from = this.off[slot]!;
    const n = this.len[slot]!;
    const text = decoder.decode(this.data.subarray(from, from + n));
    if (slot !== this.last) {
      // most recently used goes to the back, and its bytes to the ring's head
      // (from the old ring, should placing them repack the others)
      this.unlink(slot);
      this.live -= n;
      this.append(slot, this.data, from, n);
    }
    this.stats.hits++;
    return text;
  }

  /** Put `slot`'s `n` bytes, `src[from, from + n)`, at the ring's head and make it the most recently used. */
  private append(slot: number, src: Uint8Array, from: number, n: number): void {
    const at = this.place(n);
    const data = this.data;
    if (data === src) data.copyWithin(at, from, from + n);
    else if (n < SHORT_COPY) for (let i = 0; i < n; i++) data[at + i] = src[from + i]!;
    else data.set(src.subarray(from, from + n), at);
    this.off[slot] = at;
    this.link(slot);
    this.head = at + n;
    this.live += n;
  }

  /**
   * Where `n` bytes go, clear of every live entry: at the head, or at the
   * ring's start once the head has passed 1.5 times the live bytes (or the end)
   * and the start is free; else the live entries are packed into a new ring.
   */
  private place(n: number): number {
    if (this.data.length === 0) this.data = new Uint8Array(this.ringBytes);
    const cap = this.data.length;
    if (this.first === NONE) {
      this.head = 0;
      if (n <= cap) return this.reached(0, n);
    } else {
      const head = this.head;
      const tail = this.off[this.first]!;
      if (head > tail) {
        // live bytes lie in [tail, head): free at the end and at the start
        const extent = Math.max(MIN_EXTENT, 1.5 * (this.live + n));
        if (tail >= n && (head + n > extent || cap - head < n)) return this.reached(0, n);
        if (cap - head >= n) return this.reached(head, n);
      } else if (head < tail && tail - head >= n) return this.reached(head, n);
    }
    this.repack(n);
    return this.reached(this.head, n);
  }

  private reached(at: number, n: number): number {
    if (at + n > this.reach) this.reach = at + n;
    return at;
  }

  /**
   * Copy the live entries, oldest first, to the start of a new ring (larger
   * if they and `n` more do not fit twice over). A synchronous copy of the
   * live bytes, needed only when recalls have left no gap.
   */
  private repack(n: number): void {
    const cap = Math.max(this.ringBytes, 2 * (this.live + n));
    const src = this.data;
    const dst = new Uint8Array(cap);
    let at = 0;
    for (let s = this.first; s !== NONE; s = this.next[s]!) {
      const from = this.off[s]!;
      const len = this.len[s]!;
      dst.set(src.subarray(from, from + len), at);
      this.off[s] = at;
      at += len;
    }
    this.data = dst;
    this.head = at;
    this.reach = at;
  }

  /** A free slot, growing the slot arrays when none is left. */
  private slot(): number {
    const s = this.free.pop();
    if (s !== undefined) return s;
    const used = this.ids.length;
    if (used === this.len.length) {
      const size = Math.max(64, used * 2);
      const grow = <T extends Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
        const b = make(size);
        b.set(a);
        return b;
      };
      this.off = grow(this.off, (k) => new Float64Array(k));
      this.len = grow(this.len, (k) => new Int32Array(k));
      this.cost = grow(this.cost, (k) => new Float64Array(k));
      this.expires = grow(this.expires, (k) => new Float64Array(k));
      this.prev = grow(this.prev, (k) => new Int32Array(k));
      this.next = grow(this.next, (k) => new Int32Array(k));
    }
    this.ids.push(null);
    return used;
  }

  /** Append `slot` as the most recently used. */
  private link(slot: number): void {
    this.prev[slot] = this.last;
    this.next[slot] = NONE;
    if (this.last === NONE) this.first = slot;
    else this.next[this.last] = slot;
    this.last = slot;
  }

  private unlink(slot: number): void {
    const p = this.prev[slot]!;
    const q = this.next[slot]!;
    if (p === NONE) this.first = q;
    else this.next[p] = q;
    if (q === NONE) this.last = p;
    else this.prev[q] = p;
  }

  private remove(slot: number): void {
    this.unlink(slot);
    this.map.delete(this.ids[slot]!);
    this.ids[slot] = null;
    this.bytes -= this.cost[slot]!;
    this.live -= this.len[slot]!;
    this.free.push(slot);
    if (this.first === NONE) {
      this.head = 0;
      // nothing left to keep: the ring and the pages a busy spell committed are let go
      if (this.reach > MIN_EXTENT) {
        this.data = new Uint8Array(0);
        this.reach = 0;
      }
    }
  }

  /** Drop the least recently used while expired at `now`, or (with `budget`) while over the byte or entry budget. */
  private evict(now: number, budget: boolean): void {
    const { maxBytes, maxEntries } = this.options;
    while (this.first !== NONE) {
      const over = budget && (this.bytes > maxBytes || this.map.size > maxEntries);
      if (!over && this.expires[this.first]! > now) break;
      this.remove(this.first);
      this.stats.evictions++;
    }
    this.sync();
  }

  private sync(): void {
    this.stats.entries = this.map.size;
    this.stats.bytes = this.bytes;
  }
}
