/**
 * Byte-pair merge for long pieces in O(n log n): a port of tiktoken's
 * `_byte_pair_merge_large` (openai/tiktoken src/lib.rs at
 * 4e71bbe0c078468e00fefbf94b39849389f346e5, release 0.14.0), which yields the
 * same merges as the O(n·m) `_byte_pair_merge` that the `tiktoken` npm
 * package's WASM runs (dqbd/tiktoken core/src/lib.rs at
 * 4c8b748e07992c00386f3180af5c574b27b65139): repeatedly merge the adjacent
 * pair whose concatenated bytes have the lowest rank, the leftmost on ties,
 * until no adjacent pair is a token. For o200k_base a token's rank is its id.
 */
import type { VocabTable } from "../core/vocab.js";

const NONE = 0x7fffffff;
const PAIR_SHIFT = 16; // 2^16 cache entries, 768 KiB
const PAIR_CACHE = 1 << (32 - PAIR_SHIFT);

/** A lookup's hash slots as built once (kept in the vocabulary's table file, see table-file.ts). */
export interface RankSlots {
  /** Open-addressing slots, a power of two long: an id, or -1 for none. */
  readonly slots: Int32Array;
  /** The longest token's byte length. */
  readonly maxTokenBytes: number;
}

/** The slot count for `limit` ranks: the least power of two of at least twice as many. */
export function slotCount(limit: number): number {
  let size = 1;
  while (size < limit * 2) size <<= 1;
  return size;
}

/**
 * bytes → rank, an open-addressing hash over the vocabulary table's own byte
 * store (no copy): one Int32Array of slots, 2 MiB for o200k_base. The slots
 * are built here, or given as a table file holds them.
 */
export class ByteRanks implements RankSlots {
  readonly slots: Int32Array;
  readonly maxTokenBytes: number;
  private readonly mask: number;
  private readonly offsets: Uint32Array;
  private readonly bytes: Uint8Array;

  /** Ranks are ids [0, limit) of `table` (ordinary tokens); `built`: slots made before for the same table and limit. */
  constructor(table: VocabTable, limit: number, built?: RankSlots) {
    this.offsets = table.offsets;
    this.bytes = table.bytes;
    const size = slotCount(limit);
    this.mask = size - 1;
    if (built && built.slots.length === size) {
      this.slots = built.slots;
      this.maxTokenBytes = built.maxTokenBytes;
    } else {
      this.slots = new Int32Array(size).fill(-1);
      let max = 0;
      for (let id = 0; id < limit; id++) {
        const start = this.offsets[id]!;
        const end = this.offsets[id + 1]!;
        if (end - start > max) max = end - start;
        let i = hash(this.bytes, start, end) & this.mask;
        while (this.slots[i] !== -1) {
          if (this.equals(this.slots[i]!, this.bytes, start, end)) break; // duplicate bytes: keep the lower rank
          i = (i + 1) & this.mask;
        }
        if (this.slots[i] === -1) this.slots[i] = id;
      }
      this.maxTokenBytes = max;
    }
    this.bytesTokens = new Int32Array(256);
    for (let b = 0; b < 256; b++) {
      const id = this.get(Uint8Array.of(b), 0, 1);
      if (id < 0) throw new Error(`bug: byte ${b} is not a token`);
      this.bytesTokens[b] = id;
    }
  }
  private readonly bytesTokens: Int32Array;

  /** Bytes held by the lookup itself (hash slots and the pair cache). */
  get byteLength(): number {
    return this.slots.byteLength + this.pairLeft.byteLength + this.pairRight.byteLength + this.pairRank.byteLength;
  }

  // A direct-mapped cache (left id, right id) → rank of their concatenation
  // (-1: not a token), so most merges skip hashing bytes.
  private readonly pairLeft = new Int32Array(PAIR_CACHE).fill(-1);
  private readonly pairRight = new Int32Array(PAIR_CACHE);
  private readonly pairRank = new Int32Array(PAIR_CACHE);

  /** Rank of token `left` followed by token `right`, whose bytes are b[start, end); -1 if none. */
  pair(left: number, right: number, b: Uint8Array, start: number, end: number): number {
    const i = (Math.imul(left, 0x9e3779b1) ^ Math.imul(right, 0x85ebca77)) >>> PAIR_SHIFT;
    if (this.pairLeft[i] === left && this.pairRight[i] === right) return this.pairRank[i]!;
    const r = this.get(b, start, end);
    this.pairLeft[i] = left;
    this.pairRight[i] = right;
    this.pairRank[i] = r;
    return r;
  }

  /** The token of one byte (every byte is one). */
  byteToken(byte: number): number {
    return this.bytesTokens[byte]!;
  }

  /** Rank of b[start, end), or -1 when it is not a token. */
  get(b: Uint8Array, start: number, end: number): number {
    if (end - start > this.maxTokenBytes) return -1;
    let i = hash(b, start, end) & this.mask;
    for (;;) {
      const id = this.slots[i]!;
      if (id === -1) return -1;
      if (this.equals(id, b, start, end)) return id;
      i = (i + 1) & this.mask;
    }
  }

  private equals(id: number, b: Uint8Array, start: number, end: number): boolean {
    const o = this.offsets[id]!;
    if (this.offsets[id + 1]! - o !== end - start) return false;
    const bytes = this.bytes;
    for (let k = start; k < end; k++) if (bytes[o + k - start] !== b[k]) return false;
    return true;
  }
}

/** FNV-1a, 32 bits. */
function hash(b: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let k = start; k < end; k++) h = Math.imul(h ^ b[k]!, 0x01000193);
  return h >>> 0;
}

// Scratch space for the merge, grown to the longest piece seen and reused:
// a merge runs start to end without yielding, so one set per thread is enough.
let cap = 0;
let end = new Int32Array(0);
let nextEnd = new Int32Array(0);
let prev = new Int32Array(0);
let cur = new Int32Array(0);
let nextRank = new Int32Array(0);
/** Min-heap of rank * 2^32 + start: lowest rank first, leftmost on ties. */
let heap = new Float64Array(0);
let size = 0;

function reserve(n: number): void {
  if (n <= cap) return;
  cap = Math.max(n, cap * 2, 64);
  end = new Int32Array(cap);
  nextEnd = new Int32Array(cap);
  prev = new Int32Array(cap);
  cur = new Int32Array(cap);
  nextRank = new Int32Array(cap);
  heap = new Float64Array(3 * cap + 1);
}

function push(key: number): void {
  let i = size++;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const pk = heap[parent]!;
    if (pk <= key) break;
    heap[i] = pk;
    i = parent;
  }
  heap[i] = key;
}

function pop(): number {
  const top = heap[0]!;
  const last = heap[--size]!;
  let i = 0;
  for (;;) {
    let child = 2 * i + 1;
    if (child >= size) break;
    if (child + 1 < size && heap[child + 1]! < heap[child]!) child++;
    if (heap[child]! >= last) break;
    heap[i] = heap[child]!;
    i = child;
  }
  heap[i] = last;
  return top;
}

/**
 * The ids of bytes b[from, to) (one piece), appended to `out`. Cost
 * O(n log n) in the piece's length n (each merge pushes at most two heap
 * entries).
 */
export function bytePairEncode(b: Uint8Array, ranks: ByteRanks, out: number[], from = 0, to = b.length): void {
  const n = to - from;
  if (n <= 0) return;
  const whole = ranks.get(b, from, to);
  if (whole >= 0) {
    out.push(whole);
    return;
  }
  reserve(n);
  size = 0;
  // Indexes are relative to `from`. The part starting at i ends at end[i]
  // and is token cur[i]; the part after it ends at nextEnd[i]; nextRank[i]
  // is the rank of merging the two (NONE if not a token, or if i is no
  // longer a part start); prev[i] is the previous part's start.
  for (let i = 0; i < n; i++) {
    end[i] = i + 1;
    nextEnd[i] = i + 2;
    prev[i] = i - 1;
    nextRank[i] = NONE;
    cur[i] = ranks.byteToken(b[from + i]!);
  }
  for (let i = 0; i + 1 < n; i++) {
    const r = ranks.pair(cur[i]!, cur[i + 1]!, b, from + i, from + i + 2);
    if (r >= 0) {
      nextRank[i] = r;
      push(r * 4294967296 + i);
    }
  }
  while (size > 0) {
    const key = pop();
    const rank = Math.floor(key / 4294967296);
    const left = key - rank * 4294967296;
    if (rank !== nextRank[left]) continue; // stale: the part changed since this was pushed
    const rightStart = end[left]!;
    const rightEnd = nextEnd[left]!;
    const rightNextEnd = nextEnd[rightStart]!;
    end[left] = rightEnd;
    cur[left] = rank;
    potential(b, from, n, ranks, left, rightNextEnd);
    if (rightEnd < n) prev[rightEnd] = left;
    if (left > 0) potential(b, from, n, ranks, prev[left]!, rightEnd);
    nextRank[rightStart] = NONE;
  }
  for (let i = 0; i < n; i = end[i]!) out.push(cur[i]!);
}

/** The part at `start` now reaches `nextEndItem` with its neighbour: the rank of merging them, pushed if a token. */
function potential(b: Uint8Array, from: number, n: number, ranks: ByteRanks, start: number, nextEndItem: number): void {
  nextEnd[start] = nextEndItem;
  nextRank[start] = NONE;
  if (nextEndItem <= n) {
    const r = ranks.pair(cur[start]!, cur[end[start]!]!, b, from + start, from + nextEndItem);
    if (r >= 0) {
      nextRank[start] = r;
      push(r * 4294967296 + start);
    }
  }
}
