/**
 * The header being read: its bytes (and, while every token is whole UTF-8,
 * its text), where it began and how. Resilient mode reads it again and
 * again as it grows, to tell a header from text that lacks one.
 */
import { decodeLossy } from "../utf8.js";
import { FLAG_WHOLE, type Vocabulary } from "../vocab.js";
import { appendBytes, H_EXPLICIT, KEPT_BUFFER_BYTES, NO_BYTES } from "./constants.js";

export class HeaderBuffer {
  /** The header's bytes, [0, length). */
  bytes: Uint8Array = NO_BYTES;
  length = 0;
  /** The header's text, kept while every header token is whole UTF-8 (the usual case). */
  text = "";
  /** Every token so far was whole UTF-8: `text` is the header's text. */
  clean = true;
  /** Tokens taken into the header (an id that is no token counts too, in strict mode). */
  tokens = 0;
  /** Stream position of the header's first token (after its `<|start|>`, when it has one). */
  start = 0;
  /** Strict mode: the first id in the header that is no token (undefined: none). */
  invalidId: unknown = undefined;
  /** H_EXPLICIT (it began with `<|start|>`) or H_IMPLICIT. */
  kind = H_EXPLICIT;
  /** The header is text between messages (rule 10): it can still become a header, never content. */
  junk = false;
  /** decode(true)'s answer: the byte offset where an incomplete last character begins. */
  tail = 0;

  /** The vocabulary's per-token flags (read for every header token). */
  private readonly flags: Uint8Array;

  constructor(
    private readonly vocab: Vocabulary,
    private readonly scratch: Int32Array,
  ) {
    this.flags = vocab.flags;
  }

  /** A new stream: a huge header's buffer (a strict stream's header has no size limit) is let go. */
  reset(): void {
    if (this.bytes.length > KEPT_BUFFER_BYTES) this.bytes = NO_BYTES;
    this.begin(H_EXPLICIT, 0);
    this.tail = 0;
  }

  /** A header begins at stream position `start`. */
  begin(kind: number, start: number): void {
    this.kind = kind;
    this.junk = false;
    this.length = 0;
    this.text = "";
    this.clean = true;
    this.tokens = 0;
    this.start = start;
    this.invalidId = undefined;
  }

  /** Take token `id` into the header. */
  append(id: number): void {
    this.tokens++;
    const v = this.vocab;
    this.bytes = appendBytes(this.bytes, this.length, v, id, 64);
    this.length += v.byteEnd(id) - v.byteStart(id);
    if (this.clean) {
      if ((this.flags[id]! & FLAG_WHOLE) !== 0) this.text += v.text(id);
      else this.clean = false;
    }
  }

  /** The header's text; with `keepTail`, `tail` is set to where an incomplete last character starts. */
  decode(keepTail: boolean): string {
    if (this.clean) {
      this.tail = this.length;
      return this.text;
    }
    const text = decodeLossy(this.bytes, 0, this.length, this.scratch, keepTail);
    this.tail = this.scratch[0]!;
    return text;
  }

  /** Position of the header's message in the stream: its `<|start|>`, when it has one. */
  get messageFrom(): number {
    return this.kind === H_EXPLICIT && this.start > 0 ? this.start - 1 : this.start;
  }
}
