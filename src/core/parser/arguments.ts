/**
 * A tool call's arguments (rule 12), kept for its `tool_call_end`: as UTF-8
 * up to MAX_ARGUMENT_BYTES, or, while they are one string (a long run of
 * one write, as a whole completion per write gives), as that string. Text
 * tokens are copied from the vocabulary as they are taken (their bytes are
 * at hand then), other text is encoded; the arguments are checked and
 * decoded once, when the call ends.
 */
import { isJson, isJsonBytes, isJsonTokens } from "../json.js";
import type { Vocabulary } from "../vocab.js";
import { KEPT_BUFFER_BYTES, MAX_ARGUMENT_BYTES, NO_BYTES } from "./constants.js";

/** Whether arguments kept as a string are JSON, as read from their tokens, or not read yet. */
const JSON_UNKNOWN = -1;
const JSON_NO = 0;
const JSON_YES = 1;

/**
 * Argument buffers of finished calls, for the next call on this thread: a
 * typed array costs more to allocate than a call's tokens to parse (a fresh
 * parser's first call allocated one).
 */
const SPARE_ARGUMENT_BUFFERS: Uint8Array[] = [];
const MAX_SPARE_ARGUMENT_BUFFERS = 64;

/** A call's arguments are decoded once, at its end (ignoreBOM: a leading U+FEFF is text). */
const UTF8 = new TextDecoder("utf-8", { ignoreBOM: true });
/** Read through the builtin itself: token texts come in several string representations. */
const charCodeAt = String.prototype.charCodeAt;
const ENCODER = new TextEncoder();

export class ArgumentBuffer {
  /** The arguments as UTF-8, [0, length); one byte of room beyond (isJsonBytes' end mark). */
  bytes: Uint8Array = NO_BYTES;
  length = 0;
  /**
   * The arguments while they are still one string: finish() takes the
   * string itself, with no copy into `bytes` and no decode. Encoded into
   * `bytes` as soon as more text follows. Never longer than
   * MAX_ARGUMENT_BYTES / 3 UTF-16 units, so never past the cap.
   */
  text = "";
  /** Whether `text` is JSON, when it was read from its tokens: JSON_YES, JSON_NO or JSON_UNKNOWN. */
  textIsJson = JSON_UNKNOWN;
  /** The arguments outgrew MAX_ARGUMENT_BYTES: nothing more is kept. */
  cut = false;
  /** finish()'s answer: whether the arguments are JSON. */
  validJson = false;

  constructor(private readonly vocab: Vocabulary) {}

  /** No arguments kept; the buffer goes back to the thread's spares (a larger one is let go). */
  reset(): void {
    this.length = 0;
    this.cut = false;
    this.text = "";
    this.textIsJson = JSON_UNKNOWN;
    this.validJson = false;
    const buf = this.bytes;
    if (buf === NO_BYTES) return;
    this.bytes = NO_BYTES;
    if (buf.length <= KEPT_BUFFER_BYTES && SPARE_ARGUMENT_BUFFERS.length < MAX_SPARE_ARGUMENT_BUFFERS) SPARE_ARGUMENT_BUFFERS.push(buf);
  }

  /** Keep text `s` of the arguments. */
  append(s: string): void {
    if (this.cut || s === "") return;
    if (this.text !== "") this.encodeText();
    else if (this.length === 0 && s.length <= MAX_ARGUMENT_BYTES / 3) {
      this.text = s;
      this.textIsJson = JSON_UNKNOWN;
      return;
    }
    this.encode(s);
  }

  /**
   * A long run of whole tokens, ids[from, to), `s` their text. When it
   * stays that string (append keeps the first text so; any more empties
   * `text`), whether it is JSON is read from its tokens now, while they are
   * at hand: checking the string at the call's end would flatten and
   * encode it first.
   */
  appendRun(s: string, ids: ArrayLike<number>, from: number, to: number): void {
    this.append(s);
    if (this.text !== "") this.textIsJson = isJsonTokens(this.vocab, ids, from, to) ? JSON_YES : JSON_NO;
  }

  /**
   * Keep one token's text (a flat string): ASCII is copied from the string
   * just read, where the vocabulary's bytes would be two more cache misses
   * a token; from the first other character on, encode() encodes the rest.
   */
  appendToken(s: string): void {
    if (this.cut) return;
    if (this.text !== "") this.encodeText();
    const n = s.length;
    let len = this.length;
    let buf = this.bytes;
    if (len + n >= buf.length) {
      if (len + n > MAX_ARGUMENT_BYTES) return this.encode(s);
      buf = this.room(n);
    }
    for (let k = 0; k < n; k++) {
      const c = charCodeAt.call(s, k);
      if (c >= 0x80) {
        this.length = len;
        return this.encode(s.slice(k));
      }
      buf[len++] = c;
    }
    this.length = len;
  }

  /** Keep whole-text tokens ids[start, end): their bytes, copied from the vocabulary. */
  appendTokens(ids: ArrayLike<number>, start: number, end: number): void {
    if (this.cut) return;
    if (this.text !== "") this.encodeText();
    const offsets = this.vocab.offsets;
    const bytes = this.vocab.bytes;
    let buf = this.bytes;
    let len = this.length;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      const from = offsets[id]!;
      const to = offsets[id + 1]!;
      if (len + to - from >= buf.length) {
        if (len + to - from > MAX_ARGUMENT_BYTES) {
          this.cut = true;
          break;
        }
        this.length = len;
        buf = this.room(to - from);
      }
      for (let b = from; b < to; b++) buf[len++] = bytes[b]!;
    }
    this.length = len;
  }

  /** The whole arguments as a string; `validJson` tells whether they are JSON. */
  finish(): string {
    const n = this.length;
    const text = this.text;
    if (text !== "") {
      this.validJson = this.textIsJson === JSON_UNKNOWN ? isJson(text) : this.textIsJson === JSON_YES;
      return text;
    }
    // the buffer has room for isJsonBytes' end mark past n (room())
    this.validJson = n > 0 && isJsonBytes(this.bytes, n);
    return n === 0 ? "" : UTF8.decode(this.bytes.subarray(0, n));
  }

  /** Bytes held (for the parser's heldBytes()). */
  get heldBytes(): number {
    return this.bytes.byteLength + 2 * this.text.length;
  }

  /** The arguments held as a string go into `bytes`: more text follows them. */
  private encodeText(): void {
    const t = this.text;
    this.text = "";
    this.encode(t);
  }

  /** Encode `s` into `bytes` after what they hold, up to MAX_ARGUMENT_BYTES (whole characters only). */
  private encode(s: string): void {
    const len = this.length;
    const room = MAX_ARGUMENT_BYTES - len;
    // at most 3 bytes per UTF-16 unit; encodeInto writes whole characters only
    const most = Math.min(3 * s.length, room);
    const buf = this.room(most);
    const { read, written } = ENCODER.encodeInto(s, buf.subarray(len, len + most));
    this.length = len + written;
    if (read < s.length) this.cut = true;
  }

  /** The buffer, with room for `more` bytes past `length` and one beyond (isJsonBytes' end mark). */
  private room(more: number): Uint8Array {
    const need = this.length + more + 1;
    let buf = this.bytes;
    if (buf.length === 0 && SPARE_ARGUMENT_BUFFERS.length > 0) buf = this.bytes = SPARE_ARGUMENT_BUFFERS.pop()!;
    if (need > buf.length) {
      // 256 bytes hold most calls' arguments
      const size = Math.min(Math.max(need, 4 * buf.length, 256), MAX_ARGUMENT_BYTES + 1);
      const grown = new Uint8Array(size);
      grown.set(buf.subarray(0, this.length));
      buf = this.bytes = grown;
    }
    return buf;
  }
}
