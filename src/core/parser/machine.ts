/**
 * The streaming Harmony parser: one instance per stream.
 *
 * Integer states, one hot loop for content tokens (the overwhelming majority:
 * a table lookup and a string append), everything else in one method per
 * state: this file's (in a message's text, comparing a repeat, after the
 * completion) and header-states.ts's (between messages, in a header, after
 * a header's `<|end|>`). Input is never trusted: any id sequence is
 * accepted, nothing throws, and every stream finishes with a `done` event.
 *
 * Two modes share the machine:
 * - strict reproduces openai-harmony v0.0.8's StreamableParser (messages,
 *   error texts, error positions, the state it continues in);
 * - resilient (default) repairs malformed output instead of erroring, and
 *   reports each repair as a `recovery` event (docs/errors.md lists them).
 *   "Rule N" is rule N of docs/resilience.md.
 *
 * What a stream holds lives in rooms, each with its own reset (stream.ts
 * lists them): the token window (window.ts: the last `windowSize` ids, in
 * a ring that starts small and grows with the stream), the header being
 * read (header-buffer.ts), a tool call's arguments (arguments.ts, up to
 * MAX_ARGUMENT_BYTES), rule 13's headerless text (headerless.ts; its text
 * up to MAX_HEADERLESS_CHARS), rule 16's repeats (repetition.ts), the
 * tokens after the completion (after-stop.ts). The current message's
 * pending partial UTF-8 bytes and not-yet-emitted delta text are the
 * machine's own; its whole text only when whole messages were requested.
 * What rules 14 and 16 hold back waits in the window.
 */
import type { DeltaKind, EndReason, FinishReason, HarmonyEvent } from "../events.js";
import { decodeLossy, REPLACEMENT } from "../utf8.js";
import { FLAG_WHOLE, type Vocabulary } from "../vocab.js";
import {
  describeId,
  H_EXPLICIT,
  H_IMPLICIT,
  NOT_A_TOKEN,
  S_AFTER,
  S_CONTENT,
  S_DONE,
  S_ENDED,
  S_EXPECT,
  S_HEADER,
  S_SHADOW,
} from "./constants.js";
import { HeaderStates } from "./header-states.js";
import type { ParserOptions } from "./options.js";

/** The reference's state names, by state. */
const STATE_NAMES = ["ExpectStart", "Header", "Content", "Done", "Done", "Content", "Header"] as const;

export class HarmonyParser extends HeaderStates {
  constructor(vocab: Vocabulary, options: ParserOptions = {}) {
    super(vocab);
    this.restart(options);
  }

  /**
   * Begin a new stream with this parser, as `new HarmonyParser(vocab,
   * options)` would, keeping only its buffers (the window, the header and
   * pending-byte buffers, the latter two only while small): a service that
   * opens thousands of streams a second reuses parsers rather than have the
   * garbage collector copy new ones. Everything else the last stream held
   * (its strings, its header) is let go.
   */
  restart(options: ParserOptions = {}): void {
    this.settings.reset(options, this.vocab);
    this.resetStream();
  }

  /** Tokens consumed so far. */
  get tokens(): number {
    return this.pos;
  }

  /** The reference's state name (`ExpectStart`, `Header`, `Content`), or `Done`. */
  get stateName(): "ExpectStart" | "Header" | "Content" | "Done" {
    return STATE_NAMES[this.state]!;
  }

  get finished(): boolean {
    return this.state === S_DONE;
  }

  /** Resilient mode: the completion has ended (rule 8, or `<|endoftext|>`); later tokens are only counted. */
  get completionEnded(): boolean {
    return this.state === S_AFTER;
  }

  /** The index of the message being read (the `index` of its deltas); -1 before the first. */
  get messageIndex(): number {
    return this.currentIndex;
  }

  /** The `kind` of the current message's deltas. */
  get textKind(): DeltaKind {
    return this.currentKind;
  }

  /**
   * The common step without building events: when the stream is inside a
   * message's text and every id of `ids[start, end)` is a text token of
   * whole UTF-8, take them exactly as `write(ids, start, end)` would and
   * return true. Their events would have been one `delta` of
   * `messageIndex` and `textKind` whose text is those tokens' text (the
   * caller writes it from the vocabulary's bytes). Otherwise take nothing
   * and return false: call `write`. Not for streams asked for whole
   * messages (their message text is kept as a string).
   */
  takeText(ids: ArrayLike<number>, start: number, end: number): boolean {
    if (
      this.state !== S_CONTENT ||
      this.pendingLength !== 0 ||
      this.undecodable ||
      this.keepingText ||
      this.heldRoleAt >= 0 ||
      end <= start
    )
      return false;
    // the same test and window store as write()'s hot loop, which keeps its
    // own copy inline: helpers shared by both made one-token writes slower
    const flags = this.flags;
    const fs = this.settings.firstSpecial;
    const role = this.settings.roleWordId;
    // a line's end (rule 16) only as the last token: what follows one may be compared, not text
    const lines = this.lineMask;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (id >>> 0 !== id || id >= fs) return false;
      const f = flags[id]!;
      if ((f & FLAG_WHOLE) === 0 || id === role || ((f & lines) !== 0 && i !== end - 1)) return false;
    }
    const window = this.window;
    let win = window.ids;
    let mask = window.mask;
    let pos = this.pos;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (pos > mask && mask !== window.maxMask) {
        win = window.grow(pos + end - i);
        mask = window.mask;
      }
      const w = 3 * (pos & mask);
      win[w] = id;
      win[w + 1] = id >>> 8;
      win[w + 2] = id >>> 16;
      pos++;
    }
    this.pos = pos;
    // a call's arguments are kept for its tool_call_end (rule 12), as write() keeps them
    if (this.inCall) this.args.appendTokens(ids, start, end);
    else if ((flags[ids[end - 1]!]! & lines) !== 0 && this.repeats.lineEnds(pos, window)) this.shadowLine();
    return true;
  }

  /** Bytes this stream holds beyond its fixed-size fields (for limits and tests). */
  heldBytes(): number {
    const text = this.deltaText.length + this.messageText.length;
    const buffers =
      this.window.ids.byteLength + this.head.bytes.byteLength + this.pendingBytes.byteLength + this.afterStop.bytes.byteLength;
    return buffers + this.args.heldBytes + 2 * text;
  }

  /** Of heldBytes(), rule 13's headerless text kept to be given again as the answer (at most 2 × MAX_HEADERLESS_CHARS). */
  get headerlessBytes(): number {
    return this.headerless.index >= 0 && !this.settings.wholeMessages ? 2 * this.messageText.length : 0;
  }

  /** Of heldBytes(), the buffer of the current tool call's arguments (at most MAX_ARGUMENT_BYTES + 1). */
  get argumentBytes(): number {
    return this.args.bytes.byteLength;
  }

  /**
   * Feed any number of token ids (`ids[start, end)`, all of them by
   * default); returns the events they complete.
   */
  write(ids: ArrayLike<number>, start = 0, end?: number): HarmonyEvent[] {
    this.beginAnswer();
    if (this.state === S_DONE) {
      this.fail("stream_finished", "write() after the stream ended", this.pos, null);
      return this.answer();
    }
    const len = ids == null || typeof ids.length !== "number" ? 0 : ids.length;
    const n = end === undefined || !(end <= len) ? len : end;
    const window = this.window;
    let win = window.ids;
    let mask = window.mask;
    const flags = this.flags;
    const fs = this.settings.firstSpecial;
    const vocab = this.vocab;
    const role = this.settings.roleWordId;
    let i = start > 0 ? start : 0;
    while (i < n) {
      if (this.state === S_CONTENT && this.pendingLength === 0 && !this.undecodable && this.heldRoleAt < 0) {
        // hot loop: whole-UTF-8 text tokens inside a message (resilient: not the role word)
        let pos = this.pos;
        let acc = "";
        const from = i;
        const lines = this.lineMask;
        let loop = false;
        for (; i < n; i++) {
          const id = ids[i]!;
          if (id >>> 0 !== id || id >= fs) break;
          const f = flags[id]!;
          if ((f & FLAG_WHOLE) === 0 || id === role) break;
          if (pos > mask && mask !== window.maxMask) {
            win = window.grow(pos + n - i);
            mask = window.mask;
          }
          const w = 3 * (pos & mask);
          win[w] = id;
          win[w + 1] = id >>> 8;
          win[w + 2] = id >>> 16;
          pos++;
          acc += vocab.text(id);
          // rule 16: a line ends here; after REPEAT_LIMIT equal ones, what follows is compared first
          if ((f & lines) !== 0 && this.repeats.lineEnds(pos, window)) {
            loop = true;
            i++;
            break;
          }
        }
        this.pos = pos;
        if (acc !== "") {
          this.deltaText += acc;
          if (this.keepingText) this.keepText(acc);
          if (this.inCall) {
            // one token (a step's write): its text is at hand; a long run's text is one
            // string (one native encode); a short run is copied token by token
            if (i - from === 1) this.args.appendToken(acc);
            else if (i - from > 8) this.args.appendRun(acc, ids, from, i);
            else this.args.appendTokens(ids, from, i);
          }
        }
        if (loop) this.shadowLine();
        if (i >= n) break;
      }
      const id = ids[i++]!;
      const kept = id >>> 0 === id && id < NOT_A_TOKEN ? id : NOT_A_TOKEN;
      if (this.pos > mask && mask !== window.maxMask) {
        win = window.grow(this.pos + n - i + 1);
        mask = window.mask;
      }
      const w = 3 * (this.pos & mask);
      win[w] = kept;
      win[w + 1] = kept >>> 8;
      win[w + 2] = kept >>> 16;
      this.pos++;
      if (this.state === S_CONTENT) this.contentToken(id);
      else if (this.state === S_HEADER) this.headerToken(id);
      else if (this.state === S_EXPECT) this.expectToken(id);
      else this.otherToken(id);
    }
    this.flushDelta();
    return this.answer();
  }

  /** Finish the stream: end of input (`eos`), a length cut, or an abort. */
  end(reason: EndReason = "eos"): HarmonyEvent[] {
    this.beginAnswer();
    if (this.state === S_DONE) {
      this.fail("stream_finished", "end() after the stream ended", this.pos, null);
      return this.answer();
    }
    const strict = this.settings.strict;
    this.cutShort = reason !== "eos";
    // what waited in the window is read as it is (rules 14 and 16)
    if (this.state === S_SHADOW) this.diverge(-1, true);
    else if (this.state === S_ENDED) this.abandonEnded(this.pos);
    if (this.state === S_CONTENT) this.endMessage("eos");
    else if (this.state === S_HEADER) {
      if (strict) {
        this.fail("header_incomplete_eos", "Unexpected EOS while waiting for message header to complete", this.pos, null);
      } else this.headerAtEnd();
    }
    if (!strict && this.policy.carrying) this.policy.dropCarry(this.pos, "the stream ended before a restarted header", this.pos);
    if (this.repeats.cutCopies > 0) this.reportRepetition();
    // rule 13: the stream ended with no other message after the headerless text
    if (this.headerless.index >= 0) this.decideHeaderless(!this.headerless.answered, this.pos);
    if (this.afterStop.count > 0) this.reportAfterStop();
    let finish: FinishReason;
    if (reason === "abort") finish = "abort";
    else if (reason === "length") finish = "length";
    else if (strict && this.errors > 0) finish = "error";
    else finish = this.lastWasCall ? "tool_calls" : "stop";
    this.emit({
      type: "done",
      finish_reason: finish,
      tokens: this.pos,
      messages: this.messagesEnded,
      recoveries: this.recoveries,
      reasoning_tokens: this.reasoningTokens,
    });
    this.state = S_DONE;
    return this.answer();
  }

  protected otherToken(id: number): void {
    if (this.state === S_AFTER) this.afterToken(id);
    else if (this.state === S_SHADOW) this.shadowToken(id);
    else this.endedToken(id);
  }

  // ---------------------------------------------------------------- S_CONTENT: a message's text

  protected contentToken(id: number): void {
    const s = this.settings;
    const valid = this.isToken(id);
    if (valid) {
      const stop = this.stopKind(id);
      if (stop !== null) {
        this.endMessage(stop);
        return;
      }
    }
    if (this.undecodable) return;
    if (!s.strict && valid && id < s.ordinaryLimit) {
      const f = this.flags[id]!;
      if (this.heldRoleAt >= 0) this.releaseRole();
      if (id === s.roleWordId) {
        // rule 10: held until the next token shows whether it begins a header (its own text, or junk)
        this.heldRoleAt = this.pos - 1;
        return;
      }
      if ((f & FLAG_WHOLE) !== 0 && this.pendingLength === 0) this.appendText(this.vocab.text(id));
      else this.appendTokenBytes(id);
      if ((f & this.lineMask) !== 0 && this.repeats.lineEnds(this.pos, this.window)) this.shadowLine();
      return;
    }
    if (this.heldRoleAt >= 0 && id !== s.startId && id !== s.channelId) this.releaseRole();
    if (!valid) {
      if (s.strict) {
        // the reference cannot decode past it until the message ends
        this.undecodable = true;
        return;
      }
      this.flushPendingLossy();
      this.appendText(REPLACEMENT);
      this.recover("invalid_token", this.pos - 1, `id ${describeId(id)} is not a token; replaced by U+FFFD`);
      return;
    }
    if (!s.strict && (id === s.startId || id === s.channelId)) {
      // a role word right before it is the new header's, whose <|start|> was lost (rule 10)
      const role = this.heldRoleAt;
      this.heldRoleAt = -1;
      if (role >= 0 && id === s.startId) this.recover("junk_text", role, "a role word before <|start|>; dropped", s.preset.implicitRole);
      this.recover(
        "missing_end",
        this.pos - 1,
        `${id === s.startId ? "<|start|>" : "<|channel|>"} inside a message: the message was closed there`,
      );
      this.endMessage("end");
      if (id === s.startId) this.beginHeader(H_EXPLICIT, this.pos);
      else {
        this.beginHeader(H_IMPLICIT, role >= 0 ? role : this.pos - 1);
        if (role >= 0) this.head.append(s.roleWordId);
        this.head.append(id);
      }
      return;
    }
    if (!s.strict && id >= s.firstSpecial) {
      // rule 9: control tokens are structure, never text
      if (id === s.endOfTextId) {
        this.endMessage("eos");
        this.endCompletion();
        return;
      }
      this.flushPendingLossy();
      this.recover("dropped_token", this.pos - 1, `special token ${id} inside a message's content; dropped`, this.specialText(id));
      return;
    }
    this.appendTokenBytes(id);
  }

  /** A special token's text (for a recovery's raw text). */
  private specialText(id: number): string {
    const v = this.vocab;
    return decodeLossy(v.bytes, v.byteStart(id), v.byteEnd(id), this.scratch);
  }

  // ---------------------------------------------------------------- S_SHADOW: a repeat compared with its copy (rule 16)

  /** The REPEAT_LIMIT-th equal line just ended: what follows is compared with it. */
  private shadowLine(): void {
    this.shadow(this.repeats.lastLineFrom, this.repeats.lastLineLength, null);
  }

  /** A token of a line or message that may be one more copy. */
  private shadowToken(id: number): void {
    const r = this.repeats;
    const k = this.pos - 1 - r.candidateFrom;
    const ref = r.copyFrom + k;
    if (k < r.copyLength && this.pos - ref <= this.window.mask + 1 && this.window.id(ref) === id) {
      if (k + 1 < r.copyLength) return;
      // one more whole copy: cut
      const message = r.copyHeader !== null;
      r.noteCut(message ? this.messageFrom : r.candidateFrom, this.pos, message);
      if (message) {
        // the message never began: its start is the copy the next one is compared with
        r.lastMessageFrom = this.messageFrom;
        r.copyHeader = null;
        this.nextRole = null;
        this.state = S_EXPECT;
      } else {
        r.copyFrom = r.candidateFrom;
        r.lastLineFrom = r.candidateFrom;
        r.candidateFrom = r.lineFrom = this.pos;
      }
      return;
    }
    this.diverge(id);
  }

  /** The text differs from the copy at token `id` (or the stream ends: `atEnd`): the loop is over; what was held is read as text. */
  private diverge(id: number, atEnd = false): void {
    const r = this.repeats;
    const header = r.copyHeader;
    r.copyHeader = null;
    if (r.cutCopies > 0) this.reportRepetition();
    this.state = S_CONTENT;
    const end = this.pos;
    if (header !== null) {
      // the message begins where its text began
      this.pos = r.candidateFrom;
      this.beginMessage(header);
      this.pos = end;
    }
    this.replay(r.candidateFrom, atEnd ? end : end - 1);
    if (!atEnd) this.step(id);
  }

  // ---------------------------------------------------------------- S_AFTER: after the completion

  /** A token after the completion's end: counted, and its text kept (capped) for the after_stop recovery. */
  private afterToken(id: number): void {
    this.afterStop.add(id, this.pos - 1, this.isToken(id));
  }

  private reportAfterStop(): void {
    const n = this.afterStop.count;
    const at = this.afterStop.at;
    const raw = this.afterStop.take();
    this.recover("after_stop", at, `${n} token${n === 1 ? "" : "s"} after the end of the completion; dropped`, raw);
  }
}
