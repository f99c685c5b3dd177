/** The reasoning a stream keeps so that a tool call can remember its chain of thought. */
import type { HarmonyEvent } from "../core/events.js";

/** Reasoning kept per stream for restoration, in UTF-8 bytes (the rest of a longer CoT is dropped). */
export const MAX_COT_BYTES = 32 * 1024;

const utf8 = new TextDecoder();
/** Read through the builtin itself: deltas come in many string representations, and `text.charCodeAt` per character went megamorphic. */
const charCodeAt = String.prototype.charCodeAt;
const utf8Encoder = new TextEncoder();

/** A tool call's reasoning, to be remembered by its id. */
export interface ReasoningMemo {
  id: string;
  /** The reasoning, trimmed, in UTF-8 (see CotBuffer.memo). */
  bytes: Uint8Array;
}

/** Where a tool call's reasoning goes: `bytes[start, end)`, UTF-8, valid only during the call. */
export type MemoSink = (id: string, bytes: Uint8Array, start: number, end: number) => void;

/** The white space String.prototype.trim removes that is one ASCII byte (tab, LF, VT, FF, CR, space). */
function asciiSpace(b: number): boolean {
  return b === 0x20 || (b >= 0x09 && b <= 0x0d);
}

/**
 * A stream's reasoning as UTF-8 bytes. Kept off the JS heap: appending a
 * string per token would keep one string object alive per reasoning token,
 * and the young-generation GC copies every live one.
 */
export class CotBuffer {
  private buf: Buffer | null = null;
  private len = 0;
  /** The limit was reached: nothing more is kept this turn (no gaps in the middle). */
  private full = false;

  get empty(): boolean {
    return this.len === 0;
  }

  append(text: string): void {
    const room = MAX_COT_BYTES - this.len;
    if (this.full || text.length === 0) return;
    const buf = this.room(this.len + Math.min(3 * text.length, room));
    let at = this.len;
    const n = text.length;
    let i = 0;
    if (n <= room) {
      for (; i < n; i++) {
        const c = charCodeAt.call(text, i);
        if (c >= 0x80) break;
        buf[at++] = c;
      }
    }
    // the rest (non-ASCII, or not fitting): whole characters only
    if (i < n) {
      const rest = i === 0 ? text : text.slice(i);
      const wrote = buf.write(rest, at, buf.length - at, "utf8");
      at += wrote;
      if (wrote < Buffer.byteLength(rest, "utf8")) this.full = true;
    }
    this.len = at;
  }

  /** Append UTF-8 bytes `bytes[start, end)` (whole characters: one token's bytes). */
  appendBytes(bytes: Uint8Array, start: number, end: number): void {
    let n = end - start;
    if (this.full || n === 0) return;
    const room = MAX_COT_BYTES - this.len;
    if (n > room) {
      // as append does: the whole characters that fit, then nothing more this turn
      n = room;
      while (n > 0 && (bytes[start + n]! & 0xc0) === 0x80) n--;
      this.full = true;
    }
    const buf = this.room(this.len + n);
    let at = this.len;
    for (let i = start; i < start + n; i++) buf[at++] = bytes[i]!;
    this.len = at;
  }

  /** The buffer, grown (doubling, up to the limit) to hold at least `need` bytes. */
  private room(need: number): Buffer {
    const buf = this.buf;
    if (buf !== null && buf.length >= need) return buf;
    let size = buf === null ? 64 : buf.length;
    while (size < need) size *= 2;
    const grown = Buffer.allocUnsafe(Math.min(size, MAX_COT_BYTES));
    if (buf !== null) buf.copy(grown, 0, 0, this.len);
    this.buf = grown;
    return grown;
  }

  /** End of an analysis message: a blank line before the next one. */
  separate(): void {
    if (this.len === 0) return;
    const b = this.buf!;
    if (this.len >= 2 && b[this.len - 1] === 0x0a && b[this.len - 2] === 0x0a) return;
    this.append("\n\n");
  }

  text(): string {
    return this.len === 0 ? "" : utf8.decode(this.buf!.subarray(0, this.len));
  }

  /**
   * What a tool call remembers: the reasoning trimmed as `text().trim()`
   * would be, as a copy of its UTF-8 bytes; null when nothing but white
   * space is kept. Bytes, not a string: a remembered chain of thought lives
   * long, and a string of it would be copied by every young-generation GC
   * until promoted, where the bytes of a typed array stay off the JS heap.
   */
  memo(): Uint8Array | null {
    let out: Uint8Array | null = null;
    this.memoTo("", (_id, bytes, start, end) => {
      out = new Uint8Array(bytes.subarray(start, end));
    });
    return out;
  }

  /**
   * The same memo handed to `keep(id, bytes, start, end)` without a copy
   * (the bytes are only valid during the call); false, and no call, when
   * nothing but white space is kept. The main thread's streams remember
   * their reasoning this way, straight into the store's arena.
   */
  memoTo(id: string, keep: MemoSink): boolean {
    const b = this.buf;
    let s = 0;
    let e = this.len;
    if (b === null) return false;
    while (s < e && asciiSpace(b[s]!)) s++;
    while (e > s && asciiSpace(b[e - 1]!)) e--;
    if (s === e) return false;
    if (b[s]! >= 0x80 || b[e - 1]! >= 0x80) {
      // it may begin or end with non-ASCII white space (U+3000, U+00A0, …): trimmed as text
      const t = utf8.decode(b.subarray(s, e)).trim();
      if (t === "") return false;
      const bytes = utf8Encoder.encode(t);
      keep(id, bytes, 0, bytes.length);
      return true;
    }
    keep(id, b, s, e);
    return true;
  }

  clear(): void {
    this.len = 0;
    this.full = false;
    // a long reasoning's buffer is not kept for the next turn
    if (this.buf !== null && this.buf.length > 4096) this.buf = null;
  }
}

/**
 * The memo policy (the restoration of docs/protocol.md, "Rendering prompts, and restoring dropped reasoning"): what a stream's reasoning buffer does at
 * each of its events. Reasoning deltas are kept; messages of one turn are
 * separated by a blank line; a tool call remembers the reasoning so far
 * under its id (straight into `sink` on the main thread, else into `memos`,
 * which a worker returns with its results); a final answer ends the turn,
 * and its reasoning is let go.
 */
export function followReasoning(cot: CotBuffer, ev: HarmonyEvent, sink: MemoSink | null, memos: ReasoningMemo[], scope: string): void {
  // one read of `type` (events come in many shapes: each read is a megamorphic lookup)
  switch (ev.type) {
    case "delta":
      if (ev.kind === "reasoning") cot.append(ev.text);
      break;
    case "message_end":
      cot.separate();
      break;
    case "tool_call_start":
      // the key is the call id in its tenant's scope (src/store/store.ts)
      if (sink !== null) cot.memoTo(scope + ev.id, sink);
      else {
        const bytes = cot.memo();
        if (bytes !== null) memos.push({ id: scope + ev.id, bytes });
      }
      break;
    case "message_start":
      if (ev.channel === "final" && ev.recipient === null) cot.clear();
      break;
  }
}
