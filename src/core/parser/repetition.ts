/**
 * Rule 16's record: the lines of the current message's text, and whole
 * messages, that repeat; the copy a candidate is compared with (S_SHADOW);
 * the copies cut so far, reported in one `repetition` recovery.
 */
import type { ParsedHeader } from "../header.js";
import { REPEAT_LIMIT } from "./constants.js";
import type { TokenWindow } from "./window.js";

export class Repetition {
  /** Where the current message's text began. */
  textFrom = 0;
  /** Where the current line began. */
  lineFrom = 0;
  /** The previous line: where it began (-1: none) and its length in tokens. */
  lastLineFrom = -1;
  lastLineLength = 0;
  /** How many times in a row the previous line came. */
  lineRepeats = 0;
  /** The previous message's tokens (header to stop): where they began (-1: none), how many, how many of them its header's. */
  lastMessageFrom = -1;
  lastMessageLength = 0;
  lastMessageHeaderLength = 0;
  /** How many times in a row the previous message came. */
  messageRepeats = 0;
  /** S_SHADOW: the copy compared with (where it begins, its length). */
  copyFrom = 0;
  copyLength = 0;
  /** S_SHADOW: where the candidate began. */
  candidateFrom = 0;
  /** S_SHADOW: the header of a whole message compared (null: a line is). */
  copyHeader: ParsedHeader | null = null;
  /** Copies cut from the current loop, their tokens, where the first began, and whether they are messages. */
  cutCopies = 0;
  cutTokens = 0;
  cutFrom = 0;
  cutMessages = false;

  reset(): void {
    this.textFrom = this.lineFrom = 0;
    this.lastLineFrom = -1;
    this.lastLineLength = this.lineRepeats = 0;
    this.lastMessageFrom = -1;
    this.lastMessageLength = this.lastMessageHeaderLength = this.messageRepeats = 0;
    this.copyFrom = this.copyLength = this.candidateFrom = 0;
    this.copyHeader = null;
    this.cutCopies = this.cutTokens = this.cutFrom = 0;
    this.cutMessages = false;
  }

  /** A message's text begins at `pos`: no line of it yet. */
  beginText(pos: number): void {
    this.textFrom = this.lineFrom = pos;
    this.lastLineFrom = -1;
    this.lineRepeats = 0;
  }

  /**
   * A line of the current message's text ended at `pos` (its last token
   * holds a line feed): count it. True when it is the REPEAT_LIMIT-th equal
   * line in a row, so what follows must be compared with it (S_SHADOW).
   */
  lineEnds(pos: number, window: TokenWindow): boolean {
    const from = this.lineFrom;
    const len = pos - from;
    const same = len === this.lastLineLength && window.sameSpan(this.lastLineFrom, from, len, pos);
    this.lineRepeats = same ? this.lineRepeats + 1 : 1;
    this.lastLineFrom = from;
    this.lastLineLength = len;
    this.lineFrom = pos;
    return this.lineRepeats >= REPEAT_LIMIT && 2 * len <= window.mask + 1;
  }

  /** A message [from, pos) ended by its stop: count it if it repeats the one before, token for token (header to stop). */
  messageEnds(from: number, pos: number, window: TokenWindow): void {
    const len = pos - from;
    const hdr = this.textFrom - from;
    const same =
      len === this.lastMessageLength && hdr === this.lastMessageHeaderLength && window.sameSpan(this.lastMessageFrom, from, len, pos);
    this.messageRepeats = same ? this.messageRepeats + 1 : 1;
    this.lastMessageFrom = from;
    this.lastMessageLength = len;
    this.lastMessageHeaderLength = hdr;
  }

  /** Whether a header [from, pos) is, token for token, the last message's, after REPEAT_LIMIT equal messages in a row. */
  repeatsLastHeader(from: number, pos: number, window: TokenWindow): boolean {
    if (this.messageRepeats < REPEAT_LIMIT) return false;
    const len = pos - from;
    return (
      len === this.lastMessageHeaderLength &&
      2 * this.lastMessageLength <= window.mask + 1 &&
      window.sameSpan(this.lastMessageFrom, from, len, pos)
    );
  }

  /** Compare what follows position `pos` with the copy [from, from + length); `header` for a message's text. */
  compareWith(from: number, length: number, pos: number, header: ParsedHeader | null): void {
    this.copyFrom = from;
    this.copyLength = length;
    this.candidateFrom = pos;
    this.copyHeader = header;
  }

  /** One more copy, [from, to), was cut. */
  noteCut(from: number, to: number, message: boolean): void {
    if (this.cutCopies === 0) this.cutFrom = from;
    this.cutCopies++;
    this.cutTokens += to - from;
    this.cutMessages = message;
  }
}
