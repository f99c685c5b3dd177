/**
 * The streaming Harmony parser: one instance per stream.
 *
 * Integer states, one hot loop for content tokens (the overwhelming majority:
 * a table lookup and a string append), everything else in per-state methods.
 * Input is never trusted: any id sequence is accepted, nothing throws, and
 * every stream finishes with a `done` event.
 *
 * Two modes share the machine:
 * - strict reproduces openai-harmony v0.0.8's StreamableParser (messages,
 *   error texts, error positions, the state it continues in);
 * - resilient (default) repairs malformed output instead of erroring, and
 *   reports each repair as a `recovery` event (docs/errors.md lists them).
 *   "Rule N" below is rule N of docs/resilience.md.
 *
 * Memory per stream: a ring of the last `windowSize` token ids (it starts
 * small and grows with the stream, so short streams stay small), the current
 * header bytes, pending partial UTF-8 bytes, the not-yet-emitted delta text
 * of the current `write`, the current message's content only when whole
 * messages were requested or while it is text with no header (rule 13, up
 * to MAX_HEADERLESS_CHARS), and a tool call's arguments (up to
 * MAX_ARGUMENT_BYTES). What rules 14 and 16 hold back waits in the window.
 */
import { repairArguments } from "../arguments.js";
import type { DeltaKind, EndReason, FinishReason, HarmonyEvent, RecoveryKind, ReferenceMessage, StopKind } from "../events.js";
import type { ParseErrorCode } from "../errors.js";
import {
  isRustWhitespace,
  parseHeaderReference,
  type HeaderMemo,
  parseHeaderTolerant,
  type ParsedHeader,
  threadHeaderMemo,
  type TolerantHeader,
} from "../header.js";
import { HARMONY, type HarmonyPreset } from "../preset.js";
import { DeclaredTools, FUNCTIONS, judgeRecipient, restoreSpaces } from "../tools.js";
import { decodeLossy, decodeValidUtf8, REPLACEMENT, scanUtf8 } from "../utf8.js";
import { FLAG_NEWLINE, FLAG_PROSE, FLAG_SPACE, FLAG_WHOLE, type Vocabulary } from "../vocab.js";
import {
  AFTER_STOP_RAW_BYTES,
  appendBytes,
  ARGUMENTS_START,
  cutMarkerAt,
  describeId,
  ENDED_HOLD_TOKENS,
  H_EXPLICIT,
  H_IMPLICIT,
  isText,
  KEPT_BUFFER_BYTES,
  LEADING_LETTERS,
  MAX_HEADERLESS_CHARS,
  MAX_JUNK_BYTES,
  NO_BYTES,
  NOT_A_TOKEN,
  NOT_HEADER_CHAR,
  RECIPIENT,
  REPEAT_LIMIT,
  S_AFTER,
  S_CONTENT,
  S_DONE,
  S_ENDED,
  S_EXPECT,
  S_HEADER,
  S_SHADOW,
  WORDLIKE,
} from "./constants.js";
import type { ParserOptions } from "./options.js";
import { ArgumentBuffer } from "./arguments.js";
import { TokenWindow } from "./window.js";

const FUNCTIONS_PREFIX = `${FUNCTIONS}.`;

/** Shared empty event list, so an idle stream keeps no events alive. */
const NO_EVENTS: HarmonyEvent[] = Object.freeze([]) as unknown as HarmonyEvent[];

export class HarmonyParser {
  // configuration (set by the options; see restart)
  private readonly vocab: Vocabulary;
  private preset!: HarmonyPreset;
  private strict!: boolean;
  private nonStrict!: boolean;
  private whole!: boolean;
  private callIdPrefix!: string;
  private maxHeaderBytes!: number;
  private memo!: HeaderMemo | null;
  private readonly flags: Uint8Array;
  private firstSpecial!: number;
  private vocabLimit!: number;
  /** Ids below this are ordinary tokens. */
  private ordinaryLimit!: number;
  private tStart!: number;
  private tMessage!: number;
  private tChannel!: number;
  private tConstrain!: number;
  private tEnd!: number;
  private tReturn!: number;
  private tCall!: number;
  private tEndOfText!: number;
  private primed!: boolean;
  /**
   * Resilient: the stream is one completion, so rule 8 ends it at its
   * closing stop: primed, or unprimed with the assistant's message first
   * (text that begins with `<|start|>assistant`, as servers log a turn).
   */
  private completion!: boolean;
  /** Rule 16 reads the current message's lines: FLAG_NEWLINE, or 0 (strict mode, a tool call's arguments). */
  private lineMask = 0;
  /** Resilient: the implicit role's word as one token (`assistant`), held in content until the next token (-1: none). */
  private roleWord!: number;
  private dropAfterStop!: boolean;
  private tools!: DeclaredTools | null;
  private calls0!: "any" | "none" | "one";

  /** The last `windowSize` ids (window.ts). */
  private readonly window = new TokenWindow();
  private pos = 0;
  private state = S_EXPECT;
  private nextRole: string | null = null;

  // header being read
  private hdr: Uint8Array = NO_BYTES;
  private hdrLen = 0;
  /** Header text, kept while every header token is whole UTF-8 (the usual case). */
  private hdrText = "";
  private hdrClean = true;
  private hdrCount = 0;
  private hdrStart = 0;
  private hdrInvalid: unknown = undefined;
  private hdrKind = H_EXPLICIT;
  /** The header is text between messages (rule 10): it can still become a header, never content. */
  private hdrJunk = false;

  // resilient: an abandoned header whose recipient awaits the restarted one
  private carryFrom = -1;
  private carryTo = -1;

  // message being read
  private msgIndex = -1;
  private started = 0;
  private completed = 0;
  /** Token index where the current message's header began (its <|start|>, when it has one). */
  private msgFrom = 0;
  /** Tokens of messages on the analysis channel, header and end token included (`done.reasoning_tokens`). */
  private reasoningTokens = 0;
  private header: ParsedHeader | null = null;
  private kind: DeltaKind = "content";
  private pend: Uint8Array = NO_BYTES;
  private pendLen = 0;
  private swallowed = false;
  private dtext = "";
  private mtext = "";
  /** The current message is a tool call (rule 12): its arguments, index, id and function name. */
  private isCall = false;
  /** Its arguments (arguments.ts). */
  private readonly args: ArgumentBuffer;
  private callIndex = 0;
  private callId = "";
  private callName = "";
  /** end(length|abort): a call open then is cut short and gets no tool_call_end. */
  private cutShort = false;
  /** Tokens after the completion ended, the first one's index, and their bytes (capped). */
  private afterCount = 0;
  private afterAt = 0;
  private afterBytes: Uint8Array = NO_BYTES;
  private afterLen = 0;

  /** The role word held back from content (its position), or -1: before `<|channel|>` it begins a header whose `<|start|>` was lost. */
  private heldRole = -1;

  // rule 13: text with no header, while nobody knows yet whether it is reasoning or the answer
  /** Its message index, or -1. */
  private prov = -1;
  /** How it ended; null while it is still open. Its message_end waits for the decision. */
  private provStop: StopKind | null = null;
  /** Its header's fields (a content type or name read with it), once it has ended. */
  private provHeader: ParsedHeader | null = null;
  /** Its tokens, [provFrom, provTo). */
  private provFrom = 0;
  private provTo = 0;
  /** The current message's text is kept in mtext: whole messages, or rule 13's text (up to MAX_HEADERLESS_CHARS). */
  private keep = false;
  /** Rule 13's text outgrew MAX_HEADERLESS_CHARS: what was kept is what is given again. */
  private provCut = false;
  /** A final answer or a call came: headerless text after it is never the answer. */
  private answered = false;

  // rule 16: lines of the current message's text, and whole messages, that repeat
  /** Where the current line began; the previous line and its length; how many times in a row it came. */
  private lineFrom = 0;
  private prevLine = -1;
  private prevLineLen = 0;
  private lineReps = 0;
  /** Where the current message's text began. */
  private textFrom = 0;
  /** The previous message's tokens (header to stop), its header's length, and how many times in a row it came. */
  private prevMsg = -1;
  private prevMsgLen = 0;
  private prevMsgHdr = 0;
  private msgReps = 0;
  /** S_SHADOW: the copy compared with (from, length), where the candidate began, and the header of a whole message compared. */
  private shRef = 0;
  private shLen = 0;
  private shFrom = 0;
  private shHeader: ParsedHeader | null = null;
  /** Copies cut from the current loop, their tokens, where the first began, and whether they are messages. */
  private cutCopies = 0;
  private cutTokens = 0;
  private cutAt = 0;
  private cutMessages = false;

  /** S_ENDED: where the `<|end|>` that closed the header stood. */
  private endedAt = 0;

  private calls = 0;
  private lastWasCall = false;
  private errors = 0;
  private recoveries = 0;
  /** The latest position a recovery was reported at (decisions made later are reported no earlier). */
  private lastAt = 0;
  private out: HarmonyEvent[] = NO_EVENTS;
  private readonly scratch: Int32Array;

  constructor(vocab: Vocabulary, options: ParserOptions = {}) {
    this.vocab = vocab;
    this.scratch = vocab.scratch;
    this.flags = vocab.flags;
    this.args = new ArgumentBuffer(vocab);
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
    const preset = options.preset ?? HARMONY;
    const vocab = this.vocab;
    this.preset = preset;
    this.strict = options.mode === "strict";
    this.nonStrict = this.strict && options.nonStrict === true;
    this.whole = options.wholeMessages === true;
    this.callIdPrefix = options.callIdPrefix ?? "call_";
    this.maxHeaderBytes = options.maxHeaderBytes ?? 256;
    const memo = options.headers === undefined ? threadHeaderMemo(preset) : options.headers;
    this.memo = memo !== null && memo.preset === preset ? memo : null;
    this.firstSpecial = preset.firstSpecial;
    this.vocabLimit = Math.min(preset.vocabLimit, vocab.size);
    this.ordinaryLimit = Math.min(this.firstSpecial, this.vocabLimit);
    const t = preset.tokens;
    this.tStart = t.start;
    this.tMessage = t.message;
    this.tChannel = t.channel;
    this.tConstrain = t.constrain;
    this.tEnd = t.end;
    this.tReturn = t.return;
    this.tCall = t.call;
    this.tEndOfText = preset.specials["<|endoftext|>"] ?? -1;
    this.dropAfterStop = options.afterStop !== "parse";
    this.roleWord = this.strict ? -1 : vocab.idOfText(preset.implicitRole);
    this.calls0 = options.calls ?? "any";
    const tools = options.tools;
    this.tools = tools === undefined || tools === null ? null : tools instanceof DeclaredTools ? tools : new DeclaredTools(tools);
    let size = 1;
    while (size < (options.windowSize ?? 512)) size <<= 1;
    this.window.reset(size);
    this.pos = 0;
    const role = options.role === undefined ? preset.implicitRole : options.role;
    this.nextRole = role;
    this.primed = role !== null;
    this.completion = this.primed;
    this.state = role === null ? S_EXPECT : S_HEADER;

    // a strict stream's header has no size limit: a huge one is not kept
    if (this.hdr.length > KEPT_BUFFER_BYTES) this.hdr = NO_BYTES;
    if (this.pend.length > KEPT_BUFFER_BYTES) this.pend = NO_BYTES;
    this.hdrLen = 0;
    this.hdrText = "";
    this.hdrClean = true;
    this.hdrCount = 0;
    this.hdrStart = 0;
    this.hdrInvalid = undefined;
    this.hdrKind = H_EXPLICIT;
    this.hdrJunk = false;
    this.carryFrom = -1;
    this.carryTo = -1;
    this.msgIndex = -1;
    this.started = 0;
    this.completed = 0;
    this.msgFrom = 0;
    this.reasoningTokens = 0;
    this.header = null;
    this.kind = "content";
    this.pendLen = 0;
    this.swallowed = false;
    this.dtext = "";
    this.mtext = "";
    this.isCall = false;
    this.args.reset();
    this.callIndex = 0;
    this.callId = "";
    this.callName = "";
    this.cutShort = false;
    this.afterCount = 0;
    this.afterAt = 0;
    this.afterBytes = NO_BYTES;
    this.afterLen = 0;
    this.heldRole = -1;
    this.prov = -1;
    this.provStop = null;
    this.provHeader = null;
    this.provFrom = this.provTo = 0;
    this.keep = this.whole;
    this.provCut = false;
    this.answered = false;
    this.lineFrom = 0;
    this.prevLine = -1;
    this.prevLineLen = this.lineReps = 0;
    this.lineMask = 0;
    this.textFrom = 0;
    this.prevMsg = -1;
    this.prevMsgLen = this.prevMsgHdr = this.msgReps = 0;
    this.shRef = this.shLen = this.shFrom = 0;
    this.shHeader = null;
    this.cutCopies = this.cutTokens = this.cutAt = 0;
    this.cutMessages = false;
    this.endedAt = 0;
    this.calls = 0;
    this.lastWasCall = false;
    this.errors = 0;
    this.recoveries = 0;
    this.lastAt = 0;
    this.out = NO_EVENTS;
  }

  /** Tokens consumed so far. */
  get tokens(): number {
    return this.pos;
  }

  /** The reference's state name (`ExpectStart`, `Header`, `Content`), or `Done`. */
  get stateName(): "ExpectStart" | "Header" | "Content" | "Done" {
    return (["ExpectStart", "Header", "Content", "Done", "Done", "Content", "Header"] as const)[this.state]!;
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
    return this.msgIndex;
  }

  /** The `kind` of the current message's deltas. */
  get textKind(): DeltaKind {
    return this.kind;
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
    if (this.state !== S_CONTENT || this.pendLen !== 0 || this.swallowed || this.keep || this.heldRole >= 0 || end <= start) return false;
    // the same test and window store as write()'s hot loop, which keeps its
    // own copy inline: helpers shared by both made one-token writes ~5% slower
    const flags = this.flags;
    const fs = this.firstSpecial;
    const role = this.roleWord;
    // a line's end (rule 16) only as the last token: what follows one may be compared, not text
    const lines = this.lineMask;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (id >>> 0 !== id || id >= fs) return false;
      const f = flags[id]!;
      if ((f & FLAG_WHOLE) === 0 || id === role || ((f & lines) !== 0 && i !== end - 1)) return false;
    }
    let win = this.window.ids;
    let mask = this.window.mask;
    let pos = this.pos;
    for (let i = start; i < end; i++) {
      const id = ids[i]!;
      if (pos > mask && mask !== this.window.maxMask) {
        win = this.window.grow(pos + end - i);
        mask = this.window.mask;
      }
      const w = 3 * (pos & mask);
      win[w] = id;
      win[w + 1] = id >>> 8;
      win[w + 2] = id >>> 16;
      pos++;
    }
    this.pos = pos;
    // a call's arguments are kept for its tool_call_end (rule 12), as write() keeps them
    if (this.isCall) this.args.appendTokens(ids, start, end);
    else if ((flags[ids[end - 1]!]! & lines) !== 0 && this.lineEnds(pos)) this.shadow(this.prevLine, this.prevLineLen, null);
    return true;
  }

  /** Bytes this stream holds beyond its fixed-size fields (for limits and tests). */
  heldBytes(): number {
    const text = this.dtext.length + this.mtext.length;
    const buffers = this.window.ids.byteLength + this.hdr.byteLength + this.pend.byteLength + this.afterBytes.byteLength;
    return buffers + this.args.heldBytes + 2 * text;
  }

  /** Of heldBytes(), rule 13's headerless text kept to be given again as the answer (at most 2 × MAX_HEADERLESS_CHARS). */
  get headerlessBytes(): number {
    return this.prov >= 0 && !this.whole ? 2 * this.mtext.length : 0;
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
    this.out = NO_EVENTS;
    if (this.state === S_DONE) {
      this.fail("stream_finished", "write() after the stream ended", this.pos, null);
      return this.answer();
    }
    const len = ids == null || typeof ids.length !== "number" ? 0 : ids.length;
    const n = end === undefined || !(end <= len) ? len : end;
    let win = this.window.ids;
    let mask = this.window.mask;
    const flags = this.flags;
    const fs = this.firstSpecial;
    const vocab = this.vocab;
    const role = this.roleWord;
    let i = start > 0 ? start : 0;
    while (i < n) {
      if (this.state === S_CONTENT && this.pendLen === 0 && !this.swallowed && this.heldRole < 0) {
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
          if (pos > mask && mask !== this.window.maxMask) {
            win = this.window.grow(pos + n - i);
            mask = this.window.mask;
          }
          const w = 3 * (pos & mask);
          win[w] = id;
          win[w + 1] = id >>> 8;
          win[w + 2] = id >>> 16;
          pos++;
          acc += vocab.text(id);
          // rule 16: a line ends here; after REPEAT_LIMIT equal ones, what follows is compared first
          if ((f & lines) !== 0 && this.lineEnds(pos)) {
            loop = true;
            i++;
            break;
          }
        }
        this.pos = pos;
        if (acc !== "") {
          this.dtext += acc;
          if (this.keep) this.keepText(acc);
          if (this.isCall) {
            // one token (a step's write): its text is at hand; a long run's text is one
            // string (one native encode); a short run is copied token by token
            if (i - from === 1) this.args.appendToken(acc);
            else if (i - from > 8) this.args.appendRun(acc, ids, from, i);
            else this.args.appendTokens(ids, from, i);
          }
        }
        if (loop) this.shadow(this.prevLine, this.prevLineLen, null);
        if (i >= n) break;
      }
      const id = ids[i++]!;
      const kept = id >>> 0 === id && id < NOT_A_TOKEN ? id : NOT_A_TOKEN;
      if (this.pos > mask && mask !== this.window.maxMask) {
        win = this.window.grow(this.pos + n - i + 1);
        mask = this.window.mask;
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

  /** A token after the completion's end, or in one of resilient mode's waiting states. */
  private otherToken(id: number): void {
    if (this.state === S_AFTER) this.afterToken(id);
    else if (this.state === S_SHADOW) this.shadowToken(id);
    else this.endedToken(id);
  }

  /** Take one token already in the window (read again from it: rules 14 and 16), as write() would. */
  private step(id: number): void {
    if (this.state === S_CONTENT) this.contentToken(id);
    else if (this.state === S_HEADER) this.headerToken(id);
    else if (this.state === S_EXPECT) this.expectToken(id);
    else this.otherToken(id);
  }

  /** Take the window's tokens [from, to) again (they were held, not read), each at its own position. */
  private replay(from: number, to: number): void {
    const end = this.pos;
    for (let k = from; k < to; k++) {
      this.pos = k + 1;
      this.step(this.window.id(k));
    }
    this.pos = end;
  }

  /** The id at stream position `k` (still in the window). */
  private windowId(k: number): number {
    return this.window.id(k);
  }

  /** Whether positions [a, a + len) and [b, b + len), a < b, are the same ids and still in the window (at stream position `pos`). */
  private sameSpan(a: number, b: number, len: number, pos = this.pos): boolean {
    return this.window.sameSpan(a, b, len, pos);
  }

  /** The events of this write() or end(), made at the first (emit). */
  private answer(): HarmonyEvent[] {
    const out = this.out;
    this.out = NO_EVENTS;
    return out === NO_EVENTS ? [] : out;
  }

  /**
   * Add an event to this write()'s or end()'s answer. The array is made at
   * the first event: most one-token writes give one, and [ev] is the
   * smallest array that holds it (an empty array's first push makes room
   * for 17).
   */
  private emit(ev: HarmonyEvent): void {
    if (this.out === NO_EVENTS) this.out = [ev];
    else this.out.push(ev);
  }

  /** Finish the stream: end of input (`eos`), a length cut, or an abort. */
  end(reason: EndReason = "eos"): HarmonyEvent[] {
    this.out = NO_EVENTS;
    if (this.state === S_DONE) {
      this.fail("stream_finished", "end() after the stream ended", this.pos, null);
      return this.answer();
    }
    this.cutShort = reason !== "eos";
    // what waited in the window is read as it is (rules 14 and 16)
    if (this.state === S_SHADOW) this.diverge(-1, true);
    else if (this.state === S_ENDED) this.abandonEnded(this.pos);
    if (this.state === S_CONTENT) this.endMessage("eos");
    else if (this.state === S_HEADER) {
      if (this.strict) {
        this.fail("header_incomplete_eos", "Unexpected EOS while waiting for message header to complete", this.pos, null);
      } else this.headerAtEnd();
    }
    if (!this.strict && this.carryFrom >= 0) this.dropCarry(this.pos, "the stream ended before a restarted header");
    if (this.cutCopies > 0) this.reportRepetition();
    // rule 13: the stream ended with no other message after the headerless text
    if (this.prov >= 0) this.decideHeaderless(!this.answered, this.pos);
    if (this.afterCount > 0) this.reportAfterStop();
    let finish: FinishReason;
    if (reason === "abort") finish = "abort";
    else if (reason === "length") finish = "length";
    else if (this.strict && this.errors > 0) finish = "error";
    else finish = this.lastWasCall ? "tool_calls" : "stop";
    this.emit({
      type: "done",
      finish_reason: finish,
      tokens: this.pos,
      messages: this.completed,
      recoveries: this.recoveries,
      reasoning_tokens: this.reasoningTokens,
    });
    this.state = S_DONE;
    return this.answer();
  }

  // ---------------------------------------------------------------- helpers

  private isToken(id: number): boolean {
    return id >>> 0 === id && id < this.vocabLimit;
  }

  private stopKind(id: number): StopKind | null {
    if (id === this.tEnd) return "end";
    if (id === this.tCall) return "call";
    if (id === this.tReturn) return "return";
    return null;
  }

  private fail(code: ParseErrorCode, message: string, at: number, token: number | null): void {
    this.flushDelta();
    this.errors++;
    this.emit({ type: "error", code, message, at, token });
  }

  private recover(kind: RecoveryKind, at: number, detail: string, raw?: string): void {
    // text already decoded comes first, whatever the chunking
    this.flushDelta();
    // a loop's cut (rule 16) is reported before anything that came after it
    if (this.cutCopies > 0 && kind !== "repetition") this.reportRepetition();
    this.recoveries++;
    if (at > this.lastAt) this.lastAt = at;
    if (raw === undefined || raw === "") {
      // the same repair of the next token, in the same write: counted in the last event
      const last = this.out[this.out.length - 1];
      if (last !== undefined && last.type === "recovery" && last.kind === kind && last.raw === undefined && last.detail === detail) {
        const n = last.count ?? 1;
        if (last.at + n === at) {
          last.count = n + 1;
          return;
        }
      }
    }
    const ev: HarmonyEvent =
      raw === undefined || raw === "" ? { type: "recovery", at, kind, detail } : { type: "recovery", at, kind, detail, raw };
    this.emit(ev);
  }

  private appendText(s: string): void {
    this.dtext += s;
    if (this.keep) this.keepText(s);
    if (this.isCall) this.args.append(s);
  }

  /** Keep the current message's text: whole messages keep all of it, rule 13's text up to MAX_HEADERLESS_CHARS. */
  private keepText(s: string): void {
    this.mtext += s;
    if (!this.whole && this.mtext.length > MAX_HEADERLESS_CHARS) {
      // never half of a surrogate pair
      const cut = (this.mtext.charCodeAt(MAX_HEADERLESS_CHARS - 1) & 0xfc00) === 0xd800 ? MAX_HEADERLESS_CHARS - 1 : MAX_HEADERLESS_CHARS;
      this.mtext = this.mtext.slice(0, cut);
      this.keep = false;
      this.provCut = true;
    }
  }

  private flushDelta(): void {
    if (this.dtext !== "") {
      this.emit({ type: "delta", index: this.msgIndex, kind: this.kind, text: this.dtext });
      this.dtext = "";
    }
  }

  private deltaKind(h: ParsedHeader): DeltaKind {
    if (h.role !== this.preset.implicitRole) return "other";
    if (h.recipient !== null) return "tool_args";
    const ch = this.preset.channels;
    if (h.channel === ch.reasoning) return "reasoning";
    if (h.channel === ch.commentary) return "commentary";
    return "content";
  }

  // ---------------------------------------------------------------- messages

  private beginMessage(h: ParsedHeader): void {
    if (!this.strict) {
      // rule 13: another message follows the headerless text, so it was reasoning
      if (this.prov >= 0) this.decideHeaderless(false, this.pos - 1);
      if (this.cutCopies > 0) this.reportRepetition();
    }
    this.header = h;
    this.msgFrom = this.hdrKind === H_EXPLICIT && this.hdrStart > 0 ? this.hdrStart - 1 : this.hdrStart;
    this.msgIndex = this.started++;
    this.kind = this.deltaKind(h);
    this.pendLen = 0;
    this.swallowed = false;
    this.dtext = "";
    this.mtext = "";
    this.keep = this.whole;
    this.isCall = false;
    this.args.reset();
    this.textFrom = this.lineFrom = this.pos;
    this.prevLine = -1;
    this.lineReps = 0;
    // rule 8: an unprimed stream whose first message is the assistant's is one completion too
    if (this.msgIndex === 0 && h.role === this.preset.implicitRole) this.completion = true;
    if (this.isFinalAnswer(h) || (h.recipient !== null && h.role === this.preset.implicitRole)) this.answered = true;
    this.emit({
      type: "message_start",
      index: this.msgIndex,
      role: h.role,
      name: h.name,
      channel: h.channel,
      recipient: h.recipient,
      content_type: h.contentType,
    });
    if (h.recipient !== null && h.role === this.preset.implicitRole) {
      const dot = h.recipient.indexOf(".");
      const callIndex = this.calls++;
      const name = dot > 0 ? h.recipient.slice(dot + 1) : h.recipient;
      this.isCall = true;
      this.callIndex = callIndex;
      this.callId = this.callIdPrefix + callIndex;
      this.callName = name;
      this.emit({
        type: "tool_call_start",
        index: this.msgIndex,
        call_index: callIndex,
        id: this.callId,
        recipient: h.recipient,
        namespace: dot > 0 ? h.recipient.slice(0, dot) : null,
        name,
        channel: h.channel,
        content_type: h.contentType,
      });
    }
    // rule 16 reads the lines of text, never a call's arguments
    this.lineMask = this.strict || this.isCall ? 0 : FLAG_NEWLINE;
    this.state = S_CONTENT;
  }

  private endMessage(stop: StopKind): void {
    // a role word before a stop is the message's own text
    if (this.heldRole >= 0) this.releaseRole();
    // the reference appends undecodable tokens' U+FFFD, then leftover bytes
    if (this.swallowed) this.appendText(REPLACEMENT);
    if (this.pendLen > 0) {
      this.appendText(decodeLossy(this.pend, 0, this.pendLen, this.scratch));
      this.pendLen = 0;
    }
    this.swallowed = false;
    this.flushDelta();
    if (this.msgIndex === this.prov) {
      this.closeHeaderless(stop);
      return;
    }
    const h = this.header!;
    if (!this.strict && stop !== "eos") this.noteMessage();
    if (h.channel === this.preset.channels.reasoning && this.pos > this.msgFrom) this.reasoningTokens += this.pos - this.msgFrom;
    if (this.isCall && !this.cutShort) this.endCall(h, stop);
    this.isCall = false;
    this.args.reset();
    const ev: HarmonyEvent = { type: "message_end", index: this.msgIndex, stop };
    if (this.whole) {
      // key order is the reference's: role, name, recipient, content, channel, content_type
      const m: Partial<ReferenceMessage> = { role: h.role };
      if (h.name !== null) m.name = h.name;
      if (h.recipient !== null) m.recipient = h.recipient;
      m.content = this.mtext;
      if (h.channel !== null) m.channel = h.channel;
      if (h.contentType !== null) m.content_type = h.contentType;
      ev.message = m as ReferenceMessage;
      this.mtext = "";
    }
    this.emit(ev);
    this.completed++;
    this.lastWasCall = h.recipient !== null && h.role === this.preset.implicitRole;
    this.header = null;
    this.state = S_EXPECT;
    // rule 8: a completion ends at the stop that closes a tool call or a final answer
    if (!this.strict && this.completion && this.dropAfterStop) {
      if ((stop === "call" && this.lastWasCall) || (stop === "return" && this.isFinalAnswer(h))) this.endCompletion();
    }
    // one call at most: the first complete one ends the completion, however it was closed
    if (!this.strict && this.calls0 === "one" && this.lastWasCall && stop !== "eos" && this.state !== S_AFTER) this.endCompletion();
  }

  private isFinalAnswer(h: ParsedHeader): boolean {
    return h.role === this.preset.implicitRole && h.recipient === null && h.channel === this.preset.channels.final;
  }

  /** The call's tool_call_end (rule 12): its whole arguments, repaired in resilient mode where a known shape applies. */
  private endCall(h: ParsedHeader, stop: StopKind): void {
    const raw = this.args.finish();
    let validJson = this.args.validJson;
    let args = raw;
    if (!this.strict && !validJson) {
      const checked = repairArguments(raw, h.contentType, stop === "eos");
      args = checked.arguments;
      validJson = checked.validJson;
      if (checked.repair !== null) {
        this.recover("arguments_repaired", this.pos - 1, `the arguments were not JSON (${checked.repair}); repaired in tool_call_end`, raw);
      }
    }
    this.emit({
      type: "tool_call_end",
      index: this.msgIndex,
      call_index: this.callIndex,
      id: this.callId,
      name: this.callName,
      arguments: args,
      valid_json: validJson,
    });
  }

  /** Resilient: the completion ends here (rule 8's stops, or <|endoftext|>); what follows is only counted. */
  private endCompletion(): void {
    if (this.carryFrom >= 0) this.dropCarry(this.pos, "the completion ended before a restarted header");
    if (this.cutCopies > 0) this.reportRepetition();
    if (this.prov >= 0) this.decideHeaderless(!this.answered, this.pos - 1);
    this.state = S_AFTER;
  }

  // ---------------------------------------------------------------- rule 13: text with no header

  /**
   * Headerless text ended (its stop, `<|start|>` or `<|channel|>` in it, or
   * the end of the stream): its message_end waits until it is known whether
   * another message follows. The end of the stream, or a closing
   * `<|return|>` in a completion, decides at once.
   */
  private closeHeaderless(stop: StopKind): void {
    this.provHeader = this.header;
    this.provStop = stop;
    this.provTo = this.pos;
    this.header = null;
    this.state = S_EXPECT;
    if (stop === "eos") this.decideHeaderless(!this.answered, this.pos);
    else if (stop === "return" && this.completion && this.dropAfterStop) this.endCompletion();
  }

  /**
   * Rule 13's decision: the headerless text was reasoning (another message
   * followed it), or it is the answer too (the completion ended with no
   * other message, and no final answer or call came before it): then its
   * text is given again, as content, in one delta. A recovery says which.
   */
  private decideHeaderless(answer: boolean, when: number): void {
    const at = Math.max(when, this.lastAt);
    const index = this.prov;
    const stop = this.provStop ?? "eos";
    const text = this.mtext;
    this.prov = -1;
    this.provStop = null;
    this.mtext = "";
    this.keep = this.whole;
    if (answer) {
      const cut = this.provCut ? ` (its first ${text.length} UTF-16 units)` : "";
      this.recover("headerless_text", at, `the completion ended with no other message: the text with no header is the answer${cut}`);
      if (text !== "") this.emit({ type: "delta", index, kind: "content", text });
      this.answered = true;
    } else {
      this.recover("headerless_text", at, "another message followed the text with no header: it was reasoning");
      if (this.provTo > this.provFrom) this.reasoningTokens += this.provTo - this.provFrom;
    }
    this.provCut = false;
    const ev: HarmonyEvent = { type: "message_end", index, stop };
    const h = this.provHeader ?? this.header;
    this.provHeader = null;
    if (this.whole) {
      // the reference's key order: role, name, recipient, content, channel, content_type
      const m: Partial<ReferenceMessage> = { role: h?.role ?? this.preset.implicitRole };
      if (h?.name != null) m.name = h.name;
      m.content = text;
      m.channel = answer ? this.preset.headerlessChannel : this.preset.channels.reasoning;
      if (h?.contentType != null) m.content_type = h.contentType;
      ev.message = m as ReferenceMessage;
    }
    this.emit(ev);
    this.completed++;
    this.lastWasCall = false;
  }

  // ---------------------------------------------------------------- rule 16: repetition

  /** A message ended by its stop: count it if it repeats the one before, token for token (header to stop). */
  private noteMessage(): void {
    const from = this.msgFrom;
    const len = this.pos - from;
    const hdr = this.textFrom - from;
    const same = len === this.prevMsgLen && hdr === this.prevMsgHdr && this.sameSpan(this.prevMsg, from, len);
    this.msgReps = same ? this.msgReps + 1 : 1;
    this.prevMsg = from;
    this.prevMsgLen = len;
    this.prevMsgHdr = hdr;
  }

  /**
   * A line of the current message's text ended at `pos` (its last token
   * holds a line feed): count it. True when it is the REPEAT_LIMIT-th equal
   * line in a row, so what follows must be compared with it (shadow).
   */
  private lineEnds(pos: number): boolean {
    const from = this.lineFrom;
    const len = pos - from;
    const same = len === this.prevLineLen && this.sameSpan(this.prevLine, from, len, pos);
    this.lineReps = same ? this.lineReps + 1 : 1;
    this.prevLine = from;
    this.prevLineLen = len;
    this.lineFrom = pos;
    return this.lineReps >= REPEAT_LIMIT && 2 * len <= this.window.mask + 1;
  }

  /** Compare what follows with the copy [ref, ref + len): for a line, or for a message's text (`header` its header). */
  private shadow(ref: number, len: number, header: ParsedHeader | null): void {
    this.flushDelta();
    this.state = S_SHADOW;
    this.shRef = ref;
    this.shLen = len;
    this.shFrom = this.pos;
    this.shHeader = header;
  }

  /** S_SHADOW: a token of a line or message that may be one more copy. */
  private shadowToken(id: number): void {
    const k = this.pos - 1 - this.shFrom;
    const ref = this.shRef + k;
    if (k < this.shLen && this.pos - ref <= this.window.mask + 1 && this.window.id(ref) === id) {
      if (k + 1 < this.shLen) return;
      // one more whole copy: cut
      const message = this.shHeader !== null;
      const from = message ? this.msgFrom : this.shFrom;
      if (this.cutCopies === 0) this.cutAt = from;
      this.cutCopies++;
      this.cutTokens += this.pos - from;
      this.cutMessages = message;
      if (message) {
        // the message never began: its start is the copy the next one is compared with
        this.prevMsg = this.msgFrom;
        this.shHeader = null;
        this.nextRole = null;
        this.state = S_EXPECT;
      } else {
        this.shRef = this.shFrom;
        this.prevLine = this.shFrom;
        this.shFrom = this.lineFrom = this.pos;
      }
      return;
    }
    this.diverge(id);
  }

  /** The text differs from the copy at token `id` (or the stream ends: `atEnd`): the loop is over; what was held is read as text. */
  private diverge(id: number, atEnd = false): void {
    const header = this.shHeader;
    this.shHeader = null;
    if (this.cutCopies > 0) this.reportRepetition();
    this.state = S_CONTENT;
    const end = this.pos;
    if (header !== null) {
      // the message begins where its text began
      this.pos = this.shFrom;
      this.beginMessage(header);
      this.pos = end;
    }
    this.replay(this.shFrom, atEnd ? end : end - 1);
    if (!atEnd) this.step(id);
  }

  private reportRepetition(): void {
    const n = this.cutCopies;
    const what = this.cutMessages ? "message" : "line";
    this.cutCopies = 0;
    this.recover(
      "repetition",
      this.cutAt,
      `the same ${what} ${REPEAT_LIMIT + n} times in a row: cut after the ${REPEAT_LIMIT}th (${n} ${what}s, ${this.cutTokens} tokens, dropped)`,
    );
    this.cutTokens = 0;
  }

  /** A token after the completion's end: counted, and its text kept (capped) for the after_stop recovery. */
  private afterToken(id: number): void {
    if (this.afterCount++ === 0) this.afterAt = this.pos - 1;
    if (!this.isToken(id) || this.afterLen >= AFTER_STOP_RAW_BYTES) return;
    this.afterBytes = appendBytes(this.afterBytes, this.afterLen, this.vocab, id, 256);
    this.afterLen = Math.min(this.afterLen + this.vocab.byteEnd(id) - this.vocab.byteStart(id), AFTER_STOP_RAW_BYTES);
  }

  private reportAfterStop(): void {
    const n = this.afterCount;
    const raw = decodeLossy(this.afterBytes, 0, this.afterLen, this.scratch);
    this.recover("after_stop", this.afterAt, `${n} token${n === 1 ? "" : "s"} after the end of the completion; dropped`, raw);
    this.afterCount = 0;
    this.afterLen = 0;
  }

  // ---------------------------------------------------------------- content

  private contentToken(id: number): void {
    const valid = this.isToken(id);
    if (valid) {
      const stop = this.stopKind(id);
      if (stop !== null) {
        this.endMessage(stop);
        return;
      }
    }
    if (this.swallowed) return;
    if (!this.strict && valid && id < this.ordinaryLimit) {
      const f = this.flags[id]!;
      if (this.heldRole >= 0) this.releaseRole();
      if (id === this.roleWord) {
        // rule 10: held until the next token shows whether it begins a header (its own text, or junk)
        this.heldRole = this.pos - 1;
        return;
      }
      if ((f & FLAG_WHOLE) !== 0 && this.pendLen === 0) this.appendText(this.vocab.text(id));
      else this.appendTokenBytes(id);
      if ((f & this.lineMask) !== 0 && this.lineEnds(this.pos)) this.shadow(this.prevLine, this.prevLineLen, null);
      return;
    }
    if (this.heldRole >= 0 && id !== this.tStart && id !== this.tChannel) this.releaseRole();
    if (!valid) {
      if (this.strict) {
        // the reference cannot decode past it until the message ends
        this.swallowed = true;
        return;
      }
      this.flushPendingLossy();
      this.appendText(REPLACEMENT);
      this.recover("invalid_token", this.pos - 1, `id ${describeId(id)} is not a token; replaced by U+FFFD`);
      return;
    }
    if (!this.strict && (id === this.tStart || id === this.tChannel)) {
      // a role word right before it is the new header's, whose <|start|> was lost (rule 10)
      const role = this.heldRole;
      this.heldRole = -1;
      if (role >= 0 && id === this.tStart)
        this.recover("junk_text", role, "a role word before <|start|>; dropped", this.preset.implicitRole);
      this.recover(
        "missing_end",
        this.pos - 1,
        `${id === this.tStart ? "<|start|>" : "<|channel|>"} inside a message: the message was closed there`,
      );
      this.endMessage("end");
      if (id === this.tStart) this.beginHeader(H_EXPLICIT, this.pos);
      else {
        this.beginHeader(H_IMPLICIT, role >= 0 ? role : this.pos - 1);
        if (role >= 0) this.appendHeaderToken(this.roleWord);
        this.appendHeaderToken(id);
      }
      return;
    }
    if (!this.strict && id >= this.firstSpecial) {
      // rule 9: control tokens are structure, never text
      if (id === this.tEndOfText) {
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

  /** The role word held back from content is content after all. */
  private releaseRole(): void {
    this.heldRole = -1;
    if (this.pendLen === 0) this.appendText(this.vocab.text(this.roleWord));
    else this.appendTokenBytes(this.roleWord);
  }

  /** A special token's text (for a recovery's raw text). */
  private specialText(id: number): string {
    const v = this.vocab;
    return decodeLossy(v.bytes, v.byteStart(id), v.byteEnd(id), this.scratch);
  }

  private appendTokenBytes(id: number): void {
    this.pend = appendBytes(this.pend, this.pendLen, this.vocab, id, 16);
    this.pendLen += this.vocab.byteEnd(id) - this.vocab.byteStart(id);
    this.drainPending(this.strict ? 1 : Number.POSITIVE_INFINITY);
  }

  /**
   * Decode pending bytes. The reference turns at most one invalid sequence
   * per token into U+FFFD and leaves the rest for the next token; resilient
   * mode handles them all at once (the final text is the same).
   */
  private drainPending(maxErrors: number): void {
    const pend = this.pend;
    const end = this.pendLen;
    const sc = this.scratch;
    let start = 0;
    let errors = 0;
    let text = "";
    while (start < end) {
      scanUtf8(pend, start, end, sc);
      const valid = sc[0]!;
      const err = sc[1]!;
      if (valid > 0) text += decodeValidUtf8(pend, start, start + valid);
      if (err < 0) {
        start = end;
        break;
      }
      start += valid;
      if (err === 0) break;
      text += REPLACEMENT;
      start += err;
      if (++errors >= maxErrors) break;
    }
    if (start > 0) {
      pend.copyWithin(0, start, end);
      this.pendLen = end - start;
    }
    if (text !== "") this.appendText(text);
  }

  private flushPendingLossy(): void {
    if (this.pendLen > 0) {
      this.appendText(decodeLossy(this.pend, 0, this.pendLen, this.scratch));
      this.pendLen = 0;
    }
  }

  // ---------------------------------------------------------------- between messages

  private expectToken(id: number): void {
    if (id === this.tStart) {
      this.beginHeader(H_EXPLICIT, this.pos);
      return;
    }
    const at = this.pos - 1;
    if (this.strict) {
      this.fail(
        "unexpected_token",
        `Unexpected token ${describeId(id)} while expecting start token ${this.tStart}`,
        at,
        typeof id === "number" ? id : null,
      );
      return;
    }
    if (!this.isToken(id)) {
      this.recover("invalid_token", at, `id ${describeId(id)} is not a token; dropped between messages`);
      return;
    }
    const stop = this.stopKind(id);
    if (stop !== null) {
      this.recover("stray_stop", at, `<|${stop}|> outside a message; dropped`);
      return;
    }
    if (id === this.tEndOfText) {
      this.endCompletion();
      return;
    }
    if (id >= this.firstSpecial && id !== this.tChannel && id !== this.tMessage) {
      this.recover("dropped_token", at, `special token ${id} between messages; dropped`);
      return;
    }
    // a header that never got its <|start|>: text, <|channel|> or <|message|>
    this.beginHeader(H_IMPLICIT, at);
    if (id === this.tMessage) this.completeHeader();
    else this.appendHeaderToken(id);
  }

  // ---------------------------------------------------------------- headers

  private beginHeader(kind: number, start: number): void {
    this.state = S_HEADER;
    this.hdrKind = kind;
    this.hdrJunk = false;
    this.hdrLen = 0;
    this.hdrText = "";
    this.hdrClean = true;
    this.hdrCount = 0;
    this.hdrStart = start;
    this.hdrInvalid = undefined;
  }

  private appendHeaderToken(id: number): void {
    this.hdrCount++;
    const v = this.vocab;
    this.hdr = appendBytes(this.hdr, this.hdrLen, v, id, 64);
    this.hdrLen += v.byteEnd(id) - v.byteStart(id);
    if (this.hdrClean) {
      if ((this.flags[id]! & FLAG_WHOLE) !== 0) this.hdrText += v.text(id);
      else this.hdrClean = false;
    }
  }

  /** Role a header is read with: the primed role, the implicit one, or none. */
  private headerRole(): string | null {
    return this.hdrKind === H_IMPLICIT ? this.preset.implicitRole : this.nextRole;
  }

  private headerToken(id: number): void {
    if (id === this.tMessage) {
      this.completeHeader();
      return;
    }
    if (id >>> 0 === id && id < this.ordinaryLimit) {
      // the common case, an ordinary token, kept small enough for V8 to inline into write()
      this.appendHeaderToken(id);
      // resilient: only whitespace (a word completes) or a non-identifier character can reveal text
      if (!this.strict && ((this.flags[id]! & (FLAG_SPACE | FLAG_PROSE)) !== 0 || this.hdrLen > this.maxHeaderBytes)) {
        this.checkHeaderIsText(this.pos - 1);
      }
      return;
    }
    this.headerControlToken(id);
  }

  /** A header token that is not an ordinary token: a special, or an id that is no token. */
  private headerControlToken(id: number): void {
    if (this.strict) {
      if (this.nonStrict && this.stopKind(id) !== null) {
        this.nonStrictStopInHeader(id);
        return;
      }
      if (this.isToken(id)) this.appendHeaderToken(id);
      else {
        this.hdrCount++;
        if (this.hdrInvalid === undefined) this.hdrInvalid = id;
      }
      return;
    }
    const at = this.pos - 1;
    if (!this.isToken(id)) {
      this.recover("invalid_token", at, `id ${describeId(id)} is not a token; dropped from a header`);
      return;
    }
    if (id === this.tStart) {
      if (this.hdrCount === 0) {
        this.recover("double_start", at, "<|start|> where a header should begin; ignored");
        this.nextRole = null;
        this.beginHeader(H_EXPLICIT, this.pos);
        return;
      }
      this.abandonHeader(at, "header_restart", "a header was restarted by <|start|>");
      this.nextRole = null;
      this.beginHeader(H_EXPLICIT, this.pos);
      return;
    }
    const stop = this.stopKind(id);
    if (stop !== null) {
      this.stopInHeader(stop, at);
      return;
    }
    if (id === this.tEndOfText) {
      // the completion ends as at the end of the stream
      this.headerAtEnd();
      if (this.state === S_CONTENT) this.endMessage("eos");
      this.endCompletion();
      return;
    }
    if (id >= this.firstSpecial && id !== this.tChannel && id !== this.tConstrain) {
      this.recover("dropped_token", at, `special token ${id} inside a header; dropped`);
      return;
    }
    this.appendHeaderToken(id);
    // only whitespace (a word completes) or a non-identifier character can reveal text
    if ((this.flags[id]! & (FLAG_SPACE | FLAG_PROSE)) !== 0 || this.hdrLen > this.maxHeaderBytes) this.checkHeaderIsText(at);
  }

  /** Decoded header text; with `keepTail`, `tail` is where an incomplete last character starts. */
  private headerText(keepTail: boolean): { text: string; tail: number } {
    if (this.hdrClean) return { text: this.hdrText, tail: this.hdrLen };
    const text = decodeLossy(this.hdr, 0, this.hdrLen, this.scratch, keepTail);
    return { text, tail: this.scratch[0]! };
  }

  private completeHeader(): void {
    const at = this.pos - 1;
    if (this.strict) {
      const role = this.nextRole;
      this.state = S_EXPECT;
      scanUtf8(this.hdr, 0, this.hdrLen, this.scratch);
      if (this.hdrInvalid !== undefined || this.scratch[1] !== -1) {
        this.fail("header_decode_failed", "could not decode header", at, this.tMessage);
        return;
      }
      const r = this.readHeader(this.headerText(false).text, role);
      if (!r.ok) {
        this.fail(r.code, r.message, at, this.tMessage);
        return;
      }
      this.nextRole = null;
      this.beginMessage(r.header);
      return;
    }
    const header = this.readCompleteHeader(at);
    this.nextRole = null;
    // rule 16: after REPEAT_LIMIT identical messages in a row, one more with the same header is compared first
    if (this.msgReps >= REPEAT_LIMIT && this.sameHeaderAsLast()) {
      this.msgFrom = this.hdrKind === H_EXPLICIT && this.hdrStart > 0 ? this.hdrStart - 1 : this.hdrStart;
      this.shadow(this.prevMsg + this.prevMsgHdr, this.prevMsgLen - this.prevMsgHdr, header);
      return;
    }
    this.beginMessage(header);
  }

  /** Whether the header just read is, token for token, the last message's. */
  private sameHeaderAsLast(): boolean {
    const from = this.hdrKind === H_EXPLICIT && this.hdrStart > 0 ? this.hdrStart - 1 : this.hdrStart;
    const len = this.pos - from;
    return len === this.prevMsgHdr && 2 * this.prevMsgLen <= this.window.mask + 1 && this.sameSpan(this.prevMsg, from, len);
  }

  /** Resilient: the fields of a header whose text is complete (at `<|message|>`, or where it stood), with its repairs reported. */
  private readCompleteHeader(at: number): ParsedHeader {
    const read = this.headerText(false).text;
    // a declared tool name with spaces is read as one word (rule 11)
    const text = this.tools !== null && this.tools.spaced.length > 0 ? this.tools.protect(read) : read;
    const role = this.headerRole();
    let header: ParsedHeader | null = null;
    if (this.carryFrom < 0) {
      const r = this.readHeader(text, role);
      if (r.ok && this.sane(r.header)) header = r.header;
    }
    if (header === null) {
      const th = parseHeaderTolerant(text, role, this.preset, { atMessage: true, carrying: this.carryFrom >= 0 });
      if (th.repairs.length > 0 || th.junk.length > 0) {
        const what = [...th.repairs, ...(th.junk.length > 0 ? [`skipped ${th.junk.length} stray word(s)`] : [])];
        this.recover("header_repaired", at, `header read tolerantly (${what.join(", ")})`, read);
      }
      header = { role: th.role, name: th.name, recipient: th.recipient, channel: th.channel, contentType: th.contentType };
      this.applyCarry(header, at);
    }
    if (text !== read && header.recipient !== null) header = { ...header, recipient: restoreSpaces(header.recipient) };
    header = this.toolPolicy(this.channelPolicy(header, at, read), at, read);
    if (this.hdrKind === H_IMPLICIT) this.recover("missing_start", at, "a header without <|start|>; assumed <|start|>assistant");
    return header;
  }

  /** The reference's reading of a complete header (remembered, with a memo; never mutated). */
  private readHeader(text: string, role: string | null): ReturnType<typeof parseHeaderReference> {
    const memo = this.memo;
    return memo !== null ? memo.reference(text, role) : parseHeaderReference(text, role, this.preset, true);
  }

  /** Whether the reference's reading of a header can be trusted as is. */
  private sane(h: ParsedHeader): boolean {
    if (h.channel?.includes("<|") || h.name?.includes("<|")) return false;
    return h.recipient === null || RECIPIENT.test(h.recipient);
  }

  /** Resilient: a stop token arrived inside a header. */
  private stopInHeader(stop: StopKind, at: number): void {
    if (this.hdrCount === 0) {
      this.recover("stray_stop", at, `<|${stop}|> where a header should begin; dropped`);
      this.nextRole = null;
      this.state = S_EXPECT;
      return;
    }
    const { text } = this.headerText(false);
    const th = parseHeaderTolerant(text, this.headerRole(), this.preset, {
      atMessage: false,
      carrying: this.carryFrom >= 0,
    });
    const rest = text.slice(th.restStart);
    if (this.hdrKind === H_IMPLICIT ? WORDLIKE.test(rest) : rest.trim() !== "") {
      if (this.headerBecomesMessage(th, text, this.hdrLen, at, true)) this.endMessage(stop);
      else {
        this.recover("stray_stop", at, `<|${stop}|> after text between messages; dropped`);
        this.nextRole = null;
        this.state = S_EXPECT;
      }
      return;
    }
    if (stop === "end" && th.channel !== null && !this.hdrJunk) {
      // rule 14: what follows tells whether <|end|> stands where <|message|> belongs
      this.endedAt = at;
      this.state = S_ENDED;
      return;
    }
    this.abandonHeader(at, "abandoned_header", `a header was closed by <|${stop}|> before <|message|>`, th);
    if (this.hdrKind === H_IMPLICIT && th.recipient === null)
      this.recover("stray_stop", at, `<|${stop}|> after text between messages; dropped`);
    this.nextRole = null;
    this.state = S_EXPECT;
  }

  /**
   * S_ENDED (rule 14): a token after the `<|end|>` that closed a header
   * naming a channel. Text (a word, or the start of a call's arguments)
   * makes the `<|end|>` the header's `<|message|>`; white space and
   * punctuation wait; anything else abandons the header.
   */
  private endedToken(id: number): void {
    if (id >>> 0 === id && id < this.ordinaryLimit) {
      const text = (this.flags[id]! & FLAG_WHOLE) !== 0 ? this.vocab.text(id) : null;
      if (text === null || WORDLIKE.test(text) || text.includes("{") || text.includes("[")) {
        this.commitEnded();
        return;
      }
      // held in the window, where they are read again: never more than it holds
      if (this.pos - 1 - this.endedAt <= ENDED_HOLD_TOKENS && this.pos + 1 - this.endedAt <= this.window.mask + 1) return;
    }
    if (id === this.tMessage && this.pos - 1 === this.endedAt + 1) {
      // `<|end|><|message|>`: the <|end|> was a stray stop inside a header
      this.recover("stray_stop", this.endedAt, "<|end|> inside a header, before its <|message|>; dropped");
      this.state = S_HEADER;
      this.completeHeader();
      return;
    }
    this.abandonEnded(this.pos - 1);
    this.step(id);
  }

  /** Rule 14: the header closed by `<|end|>` is a header; the tokens after the `<|end|>` are its content. */
  private commitEnded(): void {
    const at = this.endedAt;
    let header = this.readCompleteHeader(at);
    this.recover(
      "missing_message",
      at,
      "a header closed by <|end|> where <|message|> belongs, with text after it: read as its <|message|>",
    );
    this.nextRole = null;
    if (header.recipient !== null && header.role === this.preset.implicitRole) {
      header = this.argumentsOnly(header, this.windowText(at + 1, this.pos) ?? "", at);
    }
    const end = this.pos;
    this.pos = at + 1;
    this.beginMessage(header);
    this.pos = end;
    this.replay(at + 1, end);
  }

  /** Rule 14: the header closed by `<|end|>` was abandoned after all; the tokens [endedAt + 1, to) are read as what they are. */
  private abandonEnded(to: number): void {
    const at = this.endedAt;
    const { text } = this.headerText(false);
    const th = parseHeaderTolerant(text, this.headerRole(), this.preset, { atMessage: false, carrying: this.carryFrom >= 0 });
    this.abandonHeader(at, "abandoned_header", "a header was closed by <|end|> before <|message|>", th);
    if (this.hdrKind === H_IMPLICIT && th.recipient === null)
      this.recover("stray_stop", at, "<|end|> after text between messages; dropped");
    this.nextRole = null;
    this.state = S_EXPECT;
    this.replay(at + 1, to);
  }

  /**
   * Rule 14: a recipient is read from a header with no `<|message|>` only
   * when arguments follow it (JSON, or a fence), never from prose: then the
   * message is text on its channel.
   */
  private argumentsOnly(h: ParsedHeader, content: string, at: number): ParsedHeader {
    if (h.recipient === null || ARGUMENTS_START.test(content) || !WORDLIKE.test(content)) return h;
    this.recover("header_repaired", at, `recipient ${h.recipient} dropped: prose, not arguments, follows a header with no <|message|>`);
    return { ...h, recipient: null };
  }

  /** Resilient: end of input inside a header. */
  private headerAtEnd(): void {
    const at = this.pos;
    if (this.hdrCount === 0) {
      // a primed stream with no tokens at all is simply empty
      if (this.hdrStart > 0 || this.nextRole === null) this.recover("truncated_header", at, "the stream ended right after <|start|>");
      return;
    }
    const { text } = this.headerText(false);
    // rule 14: a marker cut short at the end (`<|ch`) is never text
    const cut = cutMarkerAt(text);
    const core = cut < 0 ? text : text.slice(0, cut);
    const th = parseHeaderTolerant(core, this.headerRole(), this.preset, {
      atMessage: false,
      carrying: this.carryFrom >= 0,
    });
    const rest = core.slice(th.restStart);
    // a lone identifier-like word is more likely a cut header field than an answer
    if (isText(rest, th.restWords)) {
      if (cut >= 0) this.recover("truncated_header", at, "the stream ended inside a marker; dropped", text.slice(cut));
      if (this.headerBecomesMessage(th, core, this.hdrLen, at, true)) this.endMessage("eos");
      else this.state = S_EXPECT;
      return;
    }
    this.recover(
      this.hdrKind === H_IMPLICIT && th.recipient === null ? "junk_text" : "truncated_header",
      at,
      "the stream ended inside a header",
      text,
    );
    this.state = S_EXPECT;
  }

  /**
   * Resilient: while a header grows, decide whether it is really text (a
   * missing `<|message|>`, or no header at all) and if so stream it as content.
   */
  private checkHeaderIsText(at: number): void {
    if (this.hdrJunk) {
      // text between messages: it may still run into a header, never into content; bounded
      if (this.hdrLen > MAX_JUNK_BYTES) {
        this.recover("junk_text", at, "text between messages; dropped", this.headerText(false).text);
        this.beginHeader(H_IMPLICIT, this.pos);
        this.hdrJunk = true;
      }
      return;
    }
    const role = this.headerRole();
    const kind = this.hdrKind === H_IMPLICIT ? 1 : 0;
    const within = this.hdrLen <= this.maxHeaderBytes;
    // a clean header's text is hdrText, its tail hdrLen: the outcome below is a function of the text and role
    const memo = within && this.hdrClean ? this.memo : null;
    if (memo !== null && memo.staysHeader(kind, this.hdrText, role)) return;
    const { text, tail } = this.headerText(true);
    // a marker still arriving (`<|ch`…) is header, not text (rule 14)
    if (within && cutMarkerAt(text) >= 0) return;
    const th = parseHeaderTolerant(text, role, this.preset, { atMessage: false, carrying: false });
    if (within) {
      // the last word may still be growing (" to" before "=functions…"): count complete words
      const n = text.length;
      const complete = n > 0 && isRustWhitespace(text.charCodeAt(n - 1)) ? th.restWords : th.restWords - 1;
      const rest = text.slice(th.restStart);
      const prose = WORDLIKE.test(rest) && NOT_HEADER_CHAR.test(rest);
      if (complete < (kind === 1 ? 4 : 2) && !prose) {
        memo?.noteStaysHeader(kind, text, role);
        return;
      }
    }
    this.headerBecomesMessage(th, text, tail, at, false);
  }

  /**
   * The header's free text is content: open the message and move the text
   * over. `tail` is the byte offset in the header where undecoded bytes (an
   * incomplete last character) begin; they carry over into the content.
   */
  private headerBecomesMessage(th: TolerantHeader, text: string, tail: number, at: number, ending: boolean): boolean {
    const hasFields = th.restStart > 0;
    if (!hasFields && this.hdrKind === H_IMPLICIT && this.started > 0) {
      // rule 10: text after a finished message is never content; while the
      // header grows it may still turn out to be one, so it is held as junk
      if (ending) this.recover("junk_text", at, "text between messages; dropped", this.headerText(false).text);
      else this.hdrJunk = true;
      return false;
    }
    let header: ParsedHeader = {
      role: th.role,
      name: th.name,
      recipient: th.recipient,
      channel: th.channel,
      contentType: th.contentType,
    };
    // rule 14: no call from a recipient that prose follows, with no <|message|>; a kept
    // recipient waits for a header that has arguments after it
    const content0 = text.slice(th.restStart);
    if (header.role === this.preset.implicitRole) header = this.argumentsOnly(header, content0, at);
    if (ARGUMENTS_START.test(content0) || !WORDLIKE.test(content0)) this.applyCarry(header, at);
    header = this.toolPolicy(this.channelPolicy(header, at, text), at, text);
    // rule 13: the assistant's text with neither a channel nor a call's recipient (no header at all,
    // or one whose only field was a recipient that names no tool) is not known to be the answer
    const headerless = header.channel === null && header.recipient === null && header.role === this.preset.implicitRole;
    if (header.channel === null && header.recipient === null && !headerless) header.channel = this.preset.headerlessChannel;
    // rule 15: a channel's name glued to the text after it (`finalHello!`)
    if (th.repairs.includes("channel_glued_to_text"))
      this.recover("channel_repaired", at, `channel ${JSON.stringify(th.channel)} read where text was glued to it; the text is content`);
    if (hasFields) {
      const repaired = th.repairs.length > 0 ? ` (header repaired: ${th.repairs.join(", ")})` : "";
      this.recover(
        "missing_message",
        at,
        `header text ran into content without <|message|>${repaired}`,
        th.repairs.length > 0 ? text.slice(0, th.restStart) : undefined,
      );
    } else if (headerless) {
      this.recover("headerless_text", at, "text with no header: reasoning, until the completion shows whether it is the answer");
    } else this.recover("headerless_text", at, `text with no header; delivered as a ${header.channel ?? "channel-less"} message`);
    const tailBytes = this.hdr.slice(tail, this.hdrLen);
    this.nextRole = null;
    this.beginMessage(header);
    if (headerless) {
      this.prov = this.msgIndex;
      this.provFrom = this.msgFrom;
      this.kind = "reasoning";
      this.keep = true;
      this.provCut = false;
    }
    // rule 9: a marker read as header text never reaches content
    let content = text.slice(th.restStart);
    const { channel, constrain } = this.preset.markers;
    if (content.includes(channel) || content.includes(constrain)) {
      this.recover("dropped_token", at, "control tokens in text read from a broken header; dropped", content);
      content = content.split(channel).join(" ").split(constrain).join(" ");
    }
    this.appendText(content);
    if (tailBytes.length > 0) {
      if (this.pend.length < tailBytes.length) this.pend = new Uint8Array(16);
      this.pend.set(tailBytes, 0);
      this.pendLen = tailBytes.length;
    }
    return true;
  }

  /**
   * A channel that is a valid channel's name run on into other text (the
   * model wrote its thinking into the header: `commentary?commentary?We`,
   * `analysis2`) is that channel; the rest is in the recovery's raw text.
   */
  private channelPolicy(h: ParsedHeader, at: number, text: string): ParsedHeader {
    const c = h.channel;
    if (c === null || h.role !== this.preset.implicitRole) return h;
    const { reasoning, commentary, final } = this.preset.channels;
    if (c === reasoning || c === commentary || c === final) return h;
    // a declared tool's name where the channel belongs is a call to it (`<|channel|>final_answer` for a tool so named)
    if (h.recipient === null && this.tools !== null && this.tools.has(c)) {
      this.recover("channel_repaired", at, `channel ${JSON.stringify(c)} names a declared tool: a call to ${FUNCTIONS_PREFIX}${c}`, text);
      return { ...h, channel: commentary, recipient: FUNCTIONS_PREFIX + c };
    }
    // rule 15: the letters it begins with, in any case (`final>`, `FINAL`, `final_answer`, `commentary?…`)
    const lead = LEADING_LETTERS.exec(c)?.[0].toLowerCase();
    for (const known of [reasoning, commentary, final]) {
      if (lead === known) {
        this.recover("channel_repaired", at, `channel ${JSON.stringify(c)} read as ${known}`, text);
        return { ...h, channel: known };
      }
    }
    return h;
  }

  /** Rule 11 on a header about to begin a message: only tools are called (and none, when calls are not allowed). */
  private toolPolicy(h: ParsedHeader, at: number, text: string): ParsedHeader {
    const r = h.recipient;
    if (r === null) return h;
    // the common case, decided without the judgement's work: functions.NAME, nothing declared, calls allowed
    if (this.tools === null && this.calls0 === "any" && r.startsWith(FUNCTIONS_PREFIX) && r.indexOf("<|") < 0) return h;
    // judged first: a word that names no tool (`<|channel|>final code`) is no call, allowed or not
    const v = judgeRecipient(h, this.tools, this.preset);
    if (v.repaired !== null) this.recover("header_repaired", at, `recipient ${v.repaired}`, text);
    if (this.calls0 === "none" && v.header.recipient !== null && h.role === this.preset.implicitRole) {
      this.recover("call_not_allowed", at, `a call to ${v.header.recipient} where calls are not allowed; read as text`, text);
      return { ...v.header, recipient: null };
    }
    if (v.unknown) this.recover("unknown_tool", at, `${v.header.recipient} is not a tool the stream declared`);
    return v.header;
  }

  /**
   * A header ended without `<|message|>`. If it named a recipient, keep its
   * place in the window so the restarted header can take the recipient.
   */
  private abandonHeader(at: number, kind: RecoveryKind, detail: string, parsed?: TolerantHeader): void {
    const { text } = this.headerText(false);
    const th = parsed ?? parseHeaderTolerant(text, this.headerRole(), this.preset, { atMessage: false, carrying: false });
    // only a recipient that names a tool waits for the next header (rule 11): `to=...?` does not
    if (th.recipient !== null && th.recipient !== this.preset.selfRecipient && this.namesTool(th.recipient)) {
      if (this.carryFrom >= 0) this.dropCarry(at, "a later abandoned header replaced it");
      this.carryFrom = this.hdrStart;
      this.carryTo = at;
      this.recover(kind, at, `${detail}; recipient ${th.recipient} kept for the next header`);
      return;
    }
    const junk = this.hdrKind === H_IMPLICIT && th.restStart === 0;
    this.recover(junk ? "junk_text" : kind, at, junk ? "text between messages; dropped" : detail, text);
  }

  /** Whether a recipient read from a header names a tool (rule 11), so that a restarted header may take it. */
  private namesTool(recipient: string): boolean {
    if (!RECIPIENT.test(recipient)) return false;
    const h: ParsedHeader = { role: this.preset.implicitRole, name: null, recipient, channel: null, contentType: null };
    return judgeRecipient(h, this.tools, this.preset).header.recipient !== null;
  }

  /** Give a carried recipient to a header that has none. */
  private applyCarry(header: ParsedHeader, at: number): void {
    if (this.carryFrom < 0) return;
    if (header.recipient !== null) {
      this.dropCarry(at, `the restarted header names its own recipient ${header.recipient}`);
      return;
    }
    const carried = this.carriedRecipient();
    if (carried === null) {
      this.dropCarry(at, "the abandoned header is no longer in the window");
      return;
    }
    header.recipient = carried;
    this.recover("recipient_spliced", at, `recipient ${carried} from the abandoned header spliced into the restarted one`);
    this.carryFrom = this.carryTo = -1;
  }

  private dropCarry(at: number, why: string): void {
    const text = this.windowText(this.carryFrom, this.carryTo);
    this.recover("unused_recipient", at, `an abandoned header's recipient was not used: ${why}`, text ?? undefined);
    this.carryFrom = this.carryTo = -1;
  }

  /** Re-read the abandoned header from the token window. */
  private carriedRecipient(): string | null {
    const text = this.windowText(this.carryFrom, this.carryTo);
    if (text === null) return null;
    const th = parseHeaderTolerant(text, null, this.preset, { atMessage: false, carrying: false });
    return th.recipient;
  }

  /** Decode window ids [from, to), or null when they have left the window. */
  private windowText(from: number, to: number): string | null {
    return this.window.text(from, to, this.pos, this.vocab, this.vocabLimit, this.scratch);
  }

  /** Strict, non-strict option: the reference's salvage of a primed header closed by a stop token. */
  private nonStrictStopInHeader(id: number): void {
    const at = this.pos - 1;
    const role = this.nextRole;
    if (role !== null && this.hdrCount > 0) {
      scanUtf8(this.hdr, 0, this.hdrLen, this.scratch);
      if (this.hdrInvalid !== undefined || this.scratch[1] !== -1) {
        this.fail("header_decode_failed", "could not decode header", at, id);
        return;
      }
      const r = parseHeaderReference(decodeValidUtf8(this.hdr, 0, this.hdrLen), role, this.preset, false);
      if (!r.ok) {
        this.fail(r.code, r.message, at, id);
        return;
      }
      this.beginMessage(r.header);
      this.appendText(r.remaining ?? "");
      this.endMessage(this.stopKind(id)!);
    }
    this.state = S_EXPECT;
    this.nextRole = null;
  }
}
