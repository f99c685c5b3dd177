/**
 * The parser's states, limits, markers and the small pure helpers its rooms
 * share. "Rule N" is rule N of docs/resilience.md.
 */
import { describeValue } from "../json.js";
import type { Vocabulary } from "../vocab.js";

/** Between messages: a `<|start|>` is expected. */
export const S_EXPECT = 0;
/** Reading a header's text, up to its `<|message|>`. */
export const S_HEADER = 1;
/** Inside a message's text. */
export const S_CONTENT = 2;
/** The stream has ended (end() was called). */
export const S_DONE = 3;
/** Resilient: the completion ended (rule 8, or <|endoftext|>); later tokens are only counted. */
export const S_AFTER = 4;
/**
 * Resilient: inside a message's text, after a line (or a whole message)
 * came REPEAT_LIMIT times in a row (rule 16): each token is compared with
 * the last copy, in the window, and produces nothing until the copy is
 * complete (then it is cut) or the text differs (then the tokens held are
 * read again from the window as the text they are).
 */
export const S_SHADOW = 5;
/**
 * Resilient: a header that names a channel was closed by `<|end|>` (rule
 * 14): text after it makes it a header that lacked its `<|message|>`; a new
 * header, a stop or the end makes it an abandoned header. The tokens in
 * between (white space, punctuation) wait in the window.
 */
export const S_ENDED = 6;

/** A header that began with `<|start|>`. */
export const H_EXPLICIT = 0;
/** A header with no `<|start|>` seen (text, `<|channel|>` or `<|message|>` where one should begin). */
export const H_IMPLICIT = 1;

/** Rule 16: a line or message that comes more than this many times in a row is cut after this many. */
export const REPEAT_LIMIT = 16;
/** Rule 13: UTF-16 units of headerless text kept to be given again as the answer at the end (what comes later is reasoning only). */
export const MAX_HEADERLESS_CHARS = 1 << 19;
/** Rule 14: tokens after a header's `<|end|>` that can wait for text before the header counts as abandoned. */
export const ENDED_HOLD_TOKENS = 16;
/** Text of the tokens after a completion's end kept for the `after_stop` recovery. */
export const AFTER_STOP_RAW_BYTES = 4096;
/** UTF-8 bytes of a tool call's arguments kept for its `tool_call_end` (longer ones are cut there, at a character's end). */
export const MAX_ARGUMENT_BYTES = 1 << 20;
/** Text between messages held before it is reported as junk (and a fresh run begins). */
export const MAX_JUNK_BYTES = 4096;
/** Header, pending-byte and argument buffers up to this size are kept by restart() (or a thread's spares). */
export const KEPT_BUFFER_BYTES = 1024;

/** Shared empty buffer: every buffer is allocated on first use. */
export const NO_BYTES = new Uint8Array(0);

/** Window marker for an id that is not a token (ids are stored in 3 bytes). */
export const NOT_A_TOKEN = 0xffffff;

/** A marker cut short at the end of a header's text (`<|ch`, `<|`, `<`): never text (rule 14). */
const CUT_MARKER = /<(?:\|(?:[a-z_]+\|?)?)?$/;

/** Where a marker cut short ends `text` (rule 14), or -1. */
export function cutMarkerAt(text: string): number {
  const m = CUT_MARKER.exec(text);
  return m === null ? -1 : m.index;
}

/** The word a channel name begins with (rule 15 matches it, lower-cased, against the channels): `final` of `final_answer`, `finalAnswer`, `FINAL>`. */
export const LEADING_LETTERS = /^(?:[A-Z]+(?![a-z])|[A-Z]?[a-z]+)/;
/** Text that starts like a tool's arguments (JSON, or a fence around it), not prose (rule 14). */
export const ARGUMENTS_START = /^\s*(?:[{["]|```)/;
/** What a recipient looks like: `functions.get_weather`, `browser.search`, `python`. */
export const RECIPIENT = /^[\p{L}\p{N}_][\p{L}\p{N}_.\-:/@+]*$/u;
/** Text worth a message of its own (not punctuation or whitespace junk). */
export const WORDLIKE = /[\p{L}\p{N}]/u;
/** A character no header word holds (header words are ASCII identifiers). */
export const NOT_HEADER_CHAR = /[^\sA-Za-z0-9_.\-:/@+=]/u;

/** Free text after a header's fields that can only be content, never a header field. */
export function isText(rest: string, words: number): boolean {
  return WORDLIKE.test(rest) && (words >= 2 || NOT_HEADER_CHAR.test(rest));
}

/**
 * Append token `id`'s bytes to buf[0, len), growing it (to at least `min`)
 * when needed; returns the buffer now holding them.
 */
export function appendBytes(buf: Uint8Array, len: number, vocab: Vocabulary, id: number, min: number): Uint8Array {
  const b0 = vocab.byteStart(id);
  const b1 = vocab.byteEnd(id);
  const need = len + (b1 - b0);
  let out = buf;
  if (need > buf.length) {
    out = new Uint8Array(Math.max(need, buf.length * 2, min));
    out.set(buf.subarray(0, len));
  }
  // a token is a few bytes: a loop, where a subarray would allocate a view per token
  const bytes = vocab.bytes;
  for (let i = b0; i < b1; i++) out[len++] = bytes[i]!;
  return out;
}

/** An id as an error or recovery names it (a non-number is described, never printed raw). */
export function describeId(id: unknown): string {
  return typeof id === "number" ? String(id) : describeValue(id);
}
