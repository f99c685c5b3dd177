/**
 * A bounded set of recently closed stream names or handles, for the precise
 * `stream_closed` error. A JS Set of them, where every close adds one and
 * drops the oldest, rebuilt its table every few hundred closes; at a few
 * thousand closes a second those tables outlived young-generation GCs and
 * ended as old-generation garbage. This one is a ring of the last
 * `capacity` keys and an open-addressing index into it, allocated once.
 *
 * Semantics: `add` remembers a key (nothing changes if it is already
 * there); the ring slot it takes forgets whatever the slot held, so the
 * keys remembered are those of the last `capacity` adds that were not
 * deleted since. `delete` forgets a key (a reopened stream).
 *
 * The ring starts at {@link FIRST_RING} slots and doubles (up to
 * `capacity`) when an add would otherwise forget a key: the front's
 * in-process connection (src/service/door.ts) is one per generation and
 * closes a stream or two, and a set of 1,024 made and used once took
 * 5–6.5 µs, against 0.2 µs for one of 8 (20,000 in a loop, 2026-12-04).
 */
export class RecentSet<K extends string | number> {
  // allocated at the first add (a connection that never closes a stream keeps none)
  /** Ring of keys in the order added; undefined: free (never used, or deleted). */
  private keys: (K | undefined)[] = [];
  /** Each ring slot's key hash (kept for the index's moves). */
  private hashes = EMPTY;
  /** Open-addressing index (linear probing): ring slot + 1, 0 = empty; at most half full. */
  private index = EMPTY;
  private mask = 0;
  private head = 0;

  constructor(readonly capacity = 1024) {
    if (!(capacity >= 1)) this.capacity = 1;
  }

  has(k: K): boolean {
    return this.index.length > 0 && this.find(k, hashOf(k)) >= 0;
  }

  add(k: K): void {
    if (this.index.length === 0) this.resize(Math.min(this.capacity, FIRST_RING));
    const h = hashOf(k);
    if (this.find(k, h) >= 0) return;
    // the slot's key would be forgotten before `capacity` adds: a larger ring first
    if (this.keys[this.head] !== undefined && this.keys.length < this.capacity) this.resize(Math.min(this.capacity, 2 * this.keys.length));
    const i = this.head;
    const old = this.keys[i];
    if (old !== undefined) this.unindex(this.find(old, this.hashes[i]!));
    this.keys[i] = k;
    this.hashes[i] = h;
    this.place(i, h);
    this.head = i + 1 === this.keys.length ? 0 : i + 1;
  }

  /** A ring of `slots` holding what this one holds, oldest first, the next add after them; its index rebuilt. */
  private resize(slots: number): void {
    const keys = new Array<K | undefined>(slots).fill(undefined);
    const hashes = new Int32Array(slots);
    const n = this.keys.length;
    for (let j = 0; j < n; j++) {
      const from = (this.head + j) % n;
      keys[j] = this.keys[from];
      hashes[j] = this.hashes[from]!;
    }
    this.keys = keys;
    this.hashes = hashes;
    this.head = n === slots ? 0 : n;
    let size = 8;
    while (size < 2 * slots) size <<= 1;
    this.index = new Int32Array(size);
    this.mask = size - 1;
    for (let j = 0; j < n; j++) if (keys[j] !== undefined) this.place(j, hashes[j]!);
  }

  /** Index ring slot `i` (hash `h`) at the first free slot of its probe run. */
  private place(i: number, h: number): void {
    const index = this.index;
    let s = h & this.mask;
    while (index[s] !== 0) s = (s + 1) & this.mask;
    index[s] = i + 1;
  }

  delete(k: K): void {
    if (this.index.length === 0) return;
    const s = this.find(k, hashOf(k));
    if (s < 0) return;
    this.keys[this.index[s]! - 1] = undefined;
    this.unindex(s);
  }

  /** The index slot that holds `k`, or -1. */
  private find(k: K, h: number): number {
    const index = this.index;
    let s = h & this.mask;
    for (;;) {
      const e = index[s]!;
      if (e === 0) return -1;
      if (this.keys[e - 1] === k) return s;
      s = (s + 1) & this.mask;
    }
  }

  /** Empty index slot `s`, moving later entries of its probe run back into the hole (no tombstones). */
  private unindex(s: number): void {
    const index = this.index;
    const mask = this.mask;
    let hole = s;
    let j = s;
    for (;;) {
      j = (j + 1) & mask;
      const e = index[j]!;
      if (e === 0) break;
      const home = this.hashes[e - 1]! & mask;
      // an entry may move back only if its home is not after the hole (cyclically)
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        index[hole] = e;
        hole = j;
      }
    }
    index[hole] = 0;
  }
}

const EMPTY = new Int32Array(0);

/** A set's first ring (grown as it fills, to its capacity). */
const FIRST_RING = 8;

/** FNV-1a over a string's UTF-16 units; an integer mix for numbers. */
function hashOf(k: string | number): number {
  if (typeof k === "number") {
    let h = Math.imul(k ^ (k >>> 16), 0x45d9f3b);
    h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
    return (h ^ (h >>> 16)) | 0;
  }
  let h = 0x811c9dc5;
  for (let i = 0; i < k.length; i++) h = Math.imul(h ^ k.charCodeAt(i), 0x01000193);
  return h | 0;
}
