/**
 * The token window: the last `windowSize` ids of a stream, in a ring, for
 * the repairs that read back (rules 11, 14 and 16: a carried recipient, the
 * tokens held after a header's `<|end|>`, a repeated line compared with
 * its copy). It starts small and grows with the stream, so short streams
 * stay small; the windows a stream leaves behind go to its thread's spares.
 */
import { decodeLossy } from "../utf8.js";
import type { Vocabulary } from "../vocab.js";
import { NO_BYTES, NOT_A_TOKEN } from "./constants.js";

/** Ids a window holds at first; it grows (fourfold, or at once to what a write needs) up to `windowSize`. */
const INITIAL_WINDOW = 32;
/**
 * Spare windows of this thread, by size (32 << k ids, up to the default
 * 512): what a window leaves behind when it grows, or when restart() needs
 * another size. A window is a typed array of its own, and allocating one
 * costs more than parsing dozens of tokens: a parser made per completion
 * grew three of them. An ended stream keeps its window for restart(): a
 * service reusing its sessions then needs no spares at all (handing ended
 * windows over made its main thread slower).
 * What a spare still holds is never read (reads stay within [pos - size,
 * pos), all written by the stream holding it), as with restart(). At most
 * MAX_SPARE_WINDOWS of each size.
 */
const SPARE_WINDOWS: Uint8Array[][] = [[], [], [], [], []];
const MAX_SPARE_WINDOWS = 64;

/** The spare class of a window of `ids` ids, or -1 (not kept). */
function windowClass(ids: number): number {
  if (ids < INITIAL_WINDOW || (ids & (ids - 1)) !== 0) return -1;
  const k = Math.clz32(INITIAL_WINDOW) - Math.clz32(ids);
  return k < SPARE_WINDOWS.length ? k : -1;
}

function takeWindow(ids: number): Uint8Array {
  const k = windowClass(ids);
  if (k >= 0) {
    const spare = SPARE_WINDOWS[k]!.pop();
    if (spare !== undefined) return spare;
  }
  return new Uint8Array(3 * ids);
}

function giveWindow(w: Uint8Array): void {
  const k = windowClass(w.length / 3);
  if (k >= 0 && SPARE_WINDOWS[k]!.length < MAX_SPARE_WINDOWS) SPARE_WINDOWS[k]!.push(w);
}

/**
 * The ring of ids. Position `k` of the stream is at `3 * (k & mask)`, in 3
 * bytes (ids < 2^24; others are stored as NOT_A_TOKEN). The machine keeps
 * the stream's position and writes the ids itself in its hot loop; this
 * room owns the ring's storage, its growth and its reads.
 */
export class TokenWindow {
  /** The ring: 3 bytes per id. */
  ids: Uint8Array = NO_BYTES;
  /** Ids the ring holds now, minus one. */
  mask = 0;
  /** The mask of the full-size ring (`windowSize` ids). */
  maxMask = 0;

  /**
   * Begin a stream whose window grows to `size` ids (a power of two). A
   * ring grown by an earlier stream is kept if it fits this one's size
   * (what it still holds is never read: reads stay within [pos - size, pos)).
   */
  reset(size: number): void {
    this.maxMask = size - 1;
    const initial = Math.min(size, INITIAL_WINDOW);
    const held = this.ids.length / 3;
    const first = held >= initial && held <= size ? held : initial;
    if (first !== held) {
      giveWindow(this.ids);
      this.ids = takeWindow(first);
    }
    this.mask = first - 1;
  }

  /**
   * A larger ring, for a write that will have put `need` ids into the
   * stream: at least four times the size (a ring is a typed array of its
   * own, and allocating one costs more than parsing dozens of tokens), and
   * at once the size `need` calls for (a whole completion in one write
   * grows once), never past `windowSize`. What it held keeps its place:
   * every position so far is below the new size.
   */
  grow(need: number): Uint8Array {
    const ids = this.ids.length / 3;
    let size = 4 * ids;
    while (size < need) size <<= 1;
    size = Math.min(size, this.maxMask + 1);
    const grown = takeWindow(size);
    grown.set(this.ids);
    giveWindow(this.ids);
    this.ids = grown;
    this.mask = size - 1;
    return grown;
  }

  /** The id at stream position `k` (still in the window). */
  id(k: number): number {
    const w = 3 * (k & this.mask);
    const ids = this.ids;
    return ids[w]! | (ids[w + 1]! << 8) | (ids[w + 2]! << 16);
  }

  /** Whether position `from` is still in the window at stream position `pos`. */
  holds(from: number, pos: number): boolean {
    return from >= 0 && pos - from <= this.mask + 1;
  }

  /** Whether positions [a, a + len) and [b, b + len), a < b, are the same ids and still in the window (at stream position `pos`). */
  sameSpan(a: number, b: number, len: number, pos: number): boolean {
    if (!this.holds(a, pos)) return false;
    for (let k = 0; k < len; k++) if (this.id(a + k) !== this.id(b + k)) return false;
    return true;
  }

  /** Decode positions [from, to) at stream position `pos`, or null when they have left the window. */
  text(from: number, to: number, pos: number, vocab: Vocabulary, vocabLimit: number, scratch: Int32Array): string | null {
    if (!this.holds(from, pos)) return null;
    const parts: Uint8Array[] = [];
    let total = 0;
    for (let i = from; i < to; i++) {
      const id = this.id(i);
      if (id === NOT_A_TOKEN || id >= vocabLimit) continue;
      const b = vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id));
      parts.push(b);
      total += b.length;
    }
    const buf = new Uint8Array(total);
    let o = 0;
    for (const b of parts) {
      buf.set(b, o);
      o += b.length;
    }
    return decodeLossy(buf, 0, total, scratch);
  }
}
