/**
 * The parser's data and the steps every state shares: its rooms, the
 * current message, the events of a write, and a message's beginning and
 * end (with rule 13's decision and rule 16's report, which a message's
 * beginning or end triggers). The states themselves are in
 * header-states.ts (between messages, in a header, after a header's
 * `<|end|>`) and machine.ts (in a message's text, comparing a repeat,
 * after the completion).
 */
import type { DeltaKind, HarmonyEvent, RecoveryKind, ReferenceMessage, StopKind } from "../events.js";
import type { ParseErrorCode } from "../errors.js";
import type { ParsedHeader } from "../header.js";
import { decodeLossy, decodeValidUtf8, REPLACEMENT, scanUtf8 } from "../utf8.js";
import { FLAG_NEWLINE, type Vocabulary } from "../vocab.js";
import { repairArguments } from "../arguments.js";
import { AfterStop } from "./after-stop.js";
import { ArgumentBuffer } from "./arguments.js";
import {
  appendBytes,
  KEPT_BUFFER_BYTES,
  MAX_HEADERLESS_CHARS,
  NO_BYTES,
  REPEAT_LIMIT,
  S_AFTER,
  S_CONTENT,
  S_EXPECT,
  S_HEADER,
  S_SHADOW,
} from "./constants.js";
import { HeaderBuffer } from "./header-buffer.js";
import { HeaderPolicy } from "./header-policy.js";
import { Headerless } from "./headerless.js";
import { ParserSettings } from "./options.js";
import { Repetition } from "./repetition.js";
import { TokenWindow } from "./window.js";

/** Shared empty event list, so an idle stream keeps no events alive. */
const NO_EVENTS: HarmonyEvent[] = Object.freeze([]) as unknown as HarmonyEvent[];

export abstract class ParserStream {
  protected readonly vocab: Vocabulary;
  /** The vocabulary's per-token flags (FLAG_WHOLE, FLAG_NEWLINE, …). */
  protected readonly flags: Uint8Array;
  /** The vocabulary's two-slot answer buffer for the UTF-8 scanners. */
  protected readonly scratch: Int32Array;

  // the rooms, each with its own reset
  protected readonly settings = new ParserSettings();
  protected readonly window = new TokenWindow();
  /** The header being read. */
  protected readonly head: HeaderBuffer;
  /** The current tool call's arguments (rule 12). */
  protected readonly args: ArgumentBuffer;
  protected readonly policy: HeaderPolicy;
  /** Rule 16: lines and messages that repeat. */
  protected readonly repeats = new Repetition();
  /** Rule 13: text with no header, until it is known to be reasoning or the answer. */
  protected readonly headerless = new Headerless();
  /** The tokens after the completion's end. */
  protected readonly afterStop: AfterStop;

  /** One of the S_ states (constants.ts). */
  protected state = S_EXPECT;
  /** Tokens consumed so far: the stream position of the next token. */
  protected pos = 0;
  /** The role the next header is read with: the primed role until a header completes; null: none. */
  protected nextRole: string | null = null;
  /**
   * Resilient: the stream is one completion, so rule 8 ends it at its
   * closing stop: primed, or unprimed with the assistant's message first
   * (text that begins with `<|start|>assistant`, as servers log a turn).
   */
  protected completion = false;
  /** Rule 16 reads the current message's lines: FLAG_NEWLINE, or 0 (strict mode, a tool call's arguments). */
  protected lineMask = 0;

  // the current message
  /** Its index (the `index` of its events); -1 before the first. */
  protected currentIndex = -1;
  /** Its header; null between messages. */
  protected currentHeader: ParsedHeader | null = null;
  /** The `kind` of its deltas. */
  protected currentKind: DeltaKind = "content";
  /** Stream position where its header began (its <|start|>, when it has one). */
  protected messageFrom = 0;
  /** Bytes of its text not yet decoded (a character split over tokens), [0, pendingLength). */
  protected pendingBytes: Uint8Array = NO_BYTES;
  protected pendingLength = 0;
  /** Strict: a token that is no token came; the reference decodes nothing more until the message ends. */
  protected undecodable = false;
  /** Its text decoded in this write() and not yet emitted as a delta. */
  protected deltaText = "";
  /** Its whole text, while `keepingText`: whole messages, or rule 13's text (up to MAX_HEADERLESS_CHARS). */
  protected messageText = "";
  protected keepingText = false;
  /** The role word held back from its text (its position), or -1: before `<|channel|>` it begins a header whose `<|start|>` was lost. */
  protected heldRoleAt = -1;
  /** It is a tool call: its index, id and function name. */
  protected inCall = false;
  protected callIndex = 0;
  protected callId = "";
  protected callName = "";

  // the stream
  /** Messages begun and ended. */
  protected messagesStarted = 0;
  protected messagesEnded = 0;
  /** Tokens of messages on the analysis channel, header and end token included (`done.reasoning_tokens`). */
  protected reasoningTokens = 0;
  /** Tool calls begun. */
  protected callsStarted = 0;
  /** The last message ended was a tool call (`done.finish_reason`). */
  protected lastWasCall = false;
  /** end(length|abort): a call open then is cut short and gets no tool_call_end. */
  protected cutShort = false;
  /** S_ENDED: where the `<|end|>` that closed the header stood. */
  protected endedAt = 0;
  protected errors = 0;
  protected recoveries = 0;
  /** The latest position a recovery was reported at (decisions made later are reported no earlier). */
  protected lastRecoveryAt = 0;
  /** The events of this write() or end(); NO_EVENTS until the first. */
  protected events: HarmonyEvent[] = NO_EVENTS;

  constructor(vocab: Vocabulary) {
    this.vocab = vocab;
    this.flags = vocab.flags;
    this.scratch = vocab.scratch;
    this.head = new HeaderBuffer(vocab, vocab.scratch);
    this.args = new ArgumentBuffer(vocab);
    // one adapter per parser: the policies report through this stream's recover()
    this.policy = new HeaderPolicy(this.settings, this.window, vocab, {
      recover: (kind, at, detail, raw) => this.recover(kind, at, detail, raw),
    });
    this.afterStop = new AfterStop(vocab, vocab.scratch);
  }

  /** Clear what the last stream held (the rooms reset themselves; the settings are read before). */
  protected resetStream(): void {
    const s = this.settings;
    this.window.reset(s.windowIds);
    this.head.reset();
    this.args.reset();
    this.policy.reset();
    this.repeats.reset();
    this.headerless.reset();
    this.afterStop.reset();
    this.pos = 0;
    this.nextRole = s.primedRole;
    this.completion = s.primedRole !== null;
    this.state = s.primedRole === null ? S_EXPECT : S_HEADER;
    this.lineMask = 0;
    this.currentIndex = -1;
    this.currentHeader = null;
    this.currentKind = "content";
    this.messageFrom = 0;
    if (this.pendingBytes.length > KEPT_BUFFER_BYTES) this.pendingBytes = NO_BYTES;
    this.pendingLength = 0;
    this.undecodable = false;
    this.deltaText = "";
    this.messageText = "";
    this.keepingText = s.wholeMessages;
    this.heldRoleAt = -1;
    this.inCall = false;
    this.callIndex = 0;
    this.callId = "";
    this.callName = "";
    this.messagesStarted = this.messagesEnded = 0;
    this.reasoningTokens = 0;
    this.callsStarted = 0;
    this.lastWasCall = false;
    this.cutShort = false;
    this.endedAt = 0;
    this.errors = this.recoveries = 0;
    this.lastRecoveryAt = 0;
    this.events = NO_EVENTS;
  }

  // ---------------------------------------------------------------- the states' token steps

  protected abstract contentToken(id: number): void;
  protected abstract headerToken(id: number): void;
  protected abstract expectToken(id: number): void;
  /** A token after the completion's end, or in one of resilient mode's waiting states. */
  protected abstract otherToken(id: number): void;

  /** Take one token already in the window (read again from it: rules 14 and 16), as write() would. */
  protected step(id: number): void {
    if (this.state === S_CONTENT) this.contentToken(id);
    else if (this.state === S_HEADER) this.headerToken(id);
    else if (this.state === S_EXPECT) this.expectToken(id);
    else this.otherToken(id);
  }

  /** Take the window's tokens [from, to) again (they were held, not read), each at its own position. */
  protected replay(from: number, to: number): void {
    const end = this.pos;
    for (let k = from; k < to; k++) {
      this.pos = k + 1;
      this.step(this.window.id(k));
    }
    this.pos = end;
  }

  /** Decode window positions [from, to), or null when they have left the window. */
  protected windowText(from: number, to: number): string | null {
    return this.window.text(from, to, this.pos, this.vocab, this.settings.vocabLimit, this.scratch);
  }

  // ---------------------------------------------------------------- events

  /** The events of this write() or end(), made at the first (emit). */
  protected answer(): HarmonyEvent[] {
    const out = this.events;
    this.events = NO_EVENTS;
    return out === NO_EVENTS ? [] : out;
  }

  /**
   * Add an event to this write()'s or end()'s answer. The array is made at
   * the first event: most one-token writes give one, and [ev] is the
   * smallest array that holds it (an empty array's first push makes room
   * for 17).
   */
  protected emit(ev: HarmonyEvent): void {
    if (this.events === NO_EVENTS) this.events = [ev];
    else this.events.push(ev);
  }

  protected beginAnswer(): void {
    this.events = NO_EVENTS;
  }

  protected isToken(id: number): boolean {
    return id >>> 0 === id && id < this.settings.vocabLimit;
  }

  protected stopKind(id: number): StopKind | null {
    const s = this.settings;
    if (id === s.endId) return "end";
    if (id === s.callId) return "call";
    if (id === s.returnId) return "return";
    return null;
  }

  protected fail(code: ParseErrorCode, message: string, at: number, token: number | null): void {
    this.flushDelta();
    this.errors++;
    this.emit({ type: "error", code, message, at, token });
  }

  protected recover(kind: RecoveryKind, at: number, detail: string, raw?: string): void {
    // text already decoded comes first, whatever the chunking
    this.flushDelta();
    // a loop's cut (rule 16) is reported before anything that came after it
    if (this.repeats.cutCopies > 0 && kind !== "repetition") this.reportRepetition();
    this.recoveries++;
    if (at > this.lastRecoveryAt) this.lastRecoveryAt = at;
    if (raw === undefined || raw === "") {
      // the same repair of the next token, in the same write: counted in the last event
      const last = this.events[this.events.length - 1];
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

  protected flushDelta(): void {
    if (this.deltaText !== "") {
      this.emit({ type: "delta", index: this.currentIndex, kind: this.currentKind, text: this.deltaText });
      this.deltaText = "";
    }
  }

  // ---------------------------------------------------------------- a message's text

  protected appendText(s: string): void {
    this.deltaText += s;
    if (this.keepingText) this.keepText(s);
    if (this.inCall) this.args.append(s);
  }

  /** Keep the current message's text: whole messages keep all of it, rule 13's text up to MAX_HEADERLESS_CHARS. */
  protected keepText(s: string): void {
    this.messageText += s;
    if (!this.settings.wholeMessages && this.messageText.length > MAX_HEADERLESS_CHARS) {
      // never half of a surrogate pair
      const cut =
        (this.messageText.charCodeAt(MAX_HEADERLESS_CHARS - 1) & 0xfc00) === 0xd800 ? MAX_HEADERLESS_CHARS - 1 : MAX_HEADERLESS_CHARS;
      this.messageText = this.messageText.slice(0, cut);
      this.keepingText = false;
      this.headerless.cut = true;
    }
  }

  /** A token whose bytes are not (yet) whole characters: decoded with the bytes pending before it. */
  protected appendTokenBytes(id: number): void {
    const v = this.vocab;
    this.pendingBytes = appendBytes(this.pendingBytes, this.pendingLength, v, id, 16);
    this.pendingLength += v.byteEnd(id) - v.byteStart(id);
    this.drainPending(this.settings.strict ? 1 : Number.POSITIVE_INFINITY);
  }

  /**
   * Decode pending bytes. The reference turns at most one invalid sequence
   * per token into U+FFFD and leaves the rest for the next token; resilient
   * mode handles them all at once (the final text is the same).
   */
  private drainPending(maxErrors: number): void {
    const pend = this.pendingBytes;
    const end = this.pendingLength;
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
      this.pendingLength = end - start;
    }
    if (text !== "") this.appendText(text);
  }

  /** Pending bytes are decoded as they are (U+FFFD for what is no character). */
  protected flushPendingLossy(): void {
    if (this.pendingLength > 0) {
      this.appendText(decodeLossy(this.pendingBytes, 0, this.pendingLength, this.scratch));
      this.pendingLength = 0;
    }
  }

  /** The role word held back from content is content after all. */
  protected releaseRole(): void {
    this.heldRoleAt = -1;
    const role = this.settings.roleWordId;
    if (this.pendingLength === 0) this.appendText(this.vocab.text(role));
    else this.appendTokenBytes(role);
  }

  // ---------------------------------------------------------------- messages

  private kindOf(h: ParsedHeader): DeltaKind {
    const preset = this.settings.preset;
    if (h.role !== preset.implicitRole) return "other";
    if (h.recipient !== null) return "tool_args";
    const ch = preset.channels;
    if (h.channel === ch.reasoning) return "reasoning";
    if (h.channel === ch.commentary) return "commentary";
    return "content";
  }

  protected isFinalAnswer(h: ParsedHeader): boolean {
    const preset = this.settings.preset;
    return h.role === preset.implicitRole && h.recipient === null && h.channel === preset.channels.final;
  }

  protected beginMessage(h: ParsedHeader): void {
    const s = this.settings;
    const implicitRole = s.preset.implicitRole;
    if (!s.strict) {
      // rule 13: another message follows the headerless text, so it was reasoning
      if (this.headerless.index >= 0) this.decideHeaderless(false, this.pos - 1);
      if (this.repeats.cutCopies > 0) this.reportRepetition();
    }
    this.currentHeader = h;
    this.messageFrom = this.head.messageFrom;
    this.currentIndex = this.messagesStarted++;
    this.currentKind = this.kindOf(h);
    this.pendingLength = 0;
    this.undecodable = false;
    this.deltaText = "";
    this.messageText = "";
    this.keepingText = s.wholeMessages;
    this.inCall = false;
    this.args.reset();
    this.repeats.beginText(this.pos);
    // rule 8: an unprimed stream whose first message is the assistant's is one completion too
    if (this.currentIndex === 0 && h.role === implicitRole) this.completion = true;
    if (this.isFinalAnswer(h) || (h.recipient !== null && h.role === implicitRole)) this.headerless.answered = true;
    this.emit({
      type: "message_start",
      index: this.currentIndex,
      role: h.role,
      name: h.name,
      channel: h.channel,
      recipient: h.recipient,
      content_type: h.contentType,
    });
    if (h.recipient !== null && h.role === implicitRole) {
      const dot = h.recipient.indexOf(".");
      const callIndex = this.callsStarted++;
      const name = dot > 0 ? h.recipient.slice(dot + 1) : h.recipient;
      this.inCall = true;
      this.callIndex = callIndex;
      this.callId = s.callIdPrefix + callIndex;
      this.callName = name;
      this.emit({
        type: "tool_call_start",
        index: this.currentIndex,
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
    this.lineMask = s.strict || this.inCall ? 0 : FLAG_NEWLINE;
    this.state = S_CONTENT;
  }

  protected endMessage(stop: StopKind): void {
    const s = this.settings;
    // a role word before a stop is the message's own text
    if (this.heldRoleAt >= 0) this.releaseRole();
    // the reference appends undecodable tokens' U+FFFD, then leftover bytes
    if (this.undecodable) this.appendText(REPLACEMENT);
    if (this.pendingLength > 0) {
      this.appendText(decodeLossy(this.pendingBytes, 0, this.pendingLength, this.scratch));
      this.pendingLength = 0;
    }
    this.undecodable = false;
    this.flushDelta();
    if (this.currentIndex === this.headerless.index) {
      this.closeHeaderless(stop);
      return;
    }
    const h = this.currentHeader!;
    if (!s.strict && stop !== "eos") this.repeats.messageEnds(this.messageFrom, this.pos, this.window);
    if (h.channel === s.preset.channels.reasoning && this.pos > this.messageFrom) this.reasoningTokens += this.pos - this.messageFrom;
    if (this.inCall && !this.cutShort) this.endCall(h, stop);
    this.inCall = false;
    this.args.reset();
    const ev: HarmonyEvent = { type: "message_end", index: this.currentIndex, stop };
    if (s.wholeMessages) {
      // key order is the reference's: role, name, recipient, content, channel, content_type
      const m: Partial<ReferenceMessage> = { role: h.role };
      if (h.name !== null) m.name = h.name;
      if (h.recipient !== null) m.recipient = h.recipient;
      m.content = this.messageText;
      if (h.channel !== null) m.channel = h.channel;
      if (h.contentType !== null) m.content_type = h.contentType;
      ev.message = m as ReferenceMessage;
      this.messageText = "";
    }
    this.emit(ev);
    this.messagesEnded++;
    this.lastWasCall = h.recipient !== null && h.role === s.preset.implicitRole;
    this.currentHeader = null;
    this.state = S_EXPECT;
    // rule 8: a completion ends at the stop that closes a tool call or a final answer
    if (!s.strict && this.completion && s.dropAfterStop) {
      if ((stop === "call" && this.lastWasCall) || (stop === "return" && this.isFinalAnswer(h))) this.endCompletion();
    }
    // one call at most: the first complete one ends the completion, however it was closed
    if (!s.strict && s.allowedCalls === "one" && this.lastWasCall && stop !== "eos" && this.state !== S_AFTER) this.endCompletion();
  }

  /** The call's tool_call_end (rule 12): its whole arguments, repaired in resilient mode where a known shape applies. */
  private endCall(h: ParsedHeader, stop: StopKind): void {
    const raw = this.args.finish();
    let validJson = this.args.validJson;
    let args = raw;
    if (!this.settings.strict && !validJson) {
      const checked = repairArguments(raw, h.contentType, stop === "eos");
      args = checked.arguments;
      validJson = checked.validJson;
      if (checked.repair !== null) {
        this.recover("arguments_repaired", this.pos - 1, `the arguments were not JSON (${checked.repair}); repaired in tool_call_end`, raw);
      }
    }
    this.emit({
      type: "tool_call_end",
      index: this.currentIndex,
      call_index: this.callIndex,
      id: this.callId,
      name: this.callName,
      arguments: args,
      valid_json: validJson,
    });
  }

  /** Resilient: the completion ends here (rule 8's stops, or <|endoftext|>); what follows is only counted. */
  protected endCompletion(): void {
    if (this.policy.carrying) this.policy.dropCarry(this.pos, "the completion ended before a restarted header", this.pos);
    if (this.repeats.cutCopies > 0) this.reportRepetition();
    if (this.headerless.index >= 0) this.decideHeaderless(!this.headerless.answered, this.pos - 1);
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
    const hl = this.headerless;
    hl.header = this.currentHeader;
    hl.stop = stop;
    hl.to = this.pos;
    this.currentHeader = null;
    this.state = S_EXPECT;
    if (stop === "eos") this.decideHeaderless(!hl.answered, this.pos);
    else if (stop === "return" && this.completion && this.settings.dropAfterStop) this.endCompletion();
  }

  /**
   * Rule 13's decision: the headerless text was reasoning (another message
   * followed it), or it is the answer too (the completion ended with no
   * other message, and no final answer or call came before it): then its
   * text is given again, as content, in one delta. A recovery says which.
   */
  protected decideHeaderless(answer: boolean, when: number): void {
    const hl = this.headerless;
    const preset = this.settings.preset;
    const at = Math.max(when, this.lastRecoveryAt);
    const index = hl.index;
    const stop = hl.stop ?? "eos";
    const text = this.messageText;
    hl.index = -1;
    hl.stop = null;
    this.messageText = "";
    this.keepingText = this.settings.wholeMessages;
    if (answer) {
      const cut = hl.cut ? ` (its first ${text.length} UTF-16 units)` : "";
      this.recover("headerless_text", at, `the completion ended with no other message: the text with no header is the answer${cut}`);
      if (text !== "") this.emit({ type: "delta", index, kind: "content", text });
      hl.answered = true;
    } else {
      this.recover("headerless_text", at, "another message followed the text with no header: it was reasoning");
      if (hl.to > hl.from) this.reasoningTokens += hl.to - hl.from;
    }
    hl.cut = false;
    const ev: HarmonyEvent = { type: "message_end", index, stop };
    const h = hl.header ?? this.currentHeader;
    hl.header = null;
    if (this.settings.wholeMessages) {
      // the reference's key order: role, name, recipient, content, channel, content_type
      const m: Partial<ReferenceMessage> = { role: h?.role ?? preset.implicitRole };
      if (h?.name != null) m.name = h.name;
      m.content = text;
      m.channel = answer ? preset.headerlessChannel : preset.channels.reasoning;
      if (h?.contentType != null) m.content_type = h.contentType;
      ev.message = m as ReferenceMessage;
    }
    this.emit(ev);
    this.messagesEnded++;
    this.lastWasCall = false;
  }

  // ---------------------------------------------------------------- rule 16: repetition

  /** Compare what follows with the copy [from, from + length): for a line, or for a message's text (`header` its header). */
  protected shadow(from: number, length: number, header: ParsedHeader | null): void {
    this.flushDelta();
    this.state = S_SHADOW;
    this.repeats.compareWith(from, length, this.pos, header);
  }

  protected reportRepetition(): void {
    const r = this.repeats;
    const n = r.cutCopies;
    const what = r.cutMessages ? "message" : "line";
    r.cutCopies = 0;
    this.recover(
      "repetition",
      r.cutFrom,
      `the same ${what} ${REPEAT_LIMIT + n} times in a row: cut after the ${REPEAT_LIMIT}th (${n} ${what}s, ${r.cutTokens} tokens, dropped)`,
    );
    r.cutTokens = 0;
  }
}
