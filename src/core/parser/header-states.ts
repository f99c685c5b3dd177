/**
 * The states around a header: between messages (S_EXPECT), in a header
 * (S_HEADER), and after a header's `<|end|>` (S_ENDED, rule 14). A header
 * completes into a message (stream.ts's beginMessage), or resilient mode
 * finds it is text, abandons it, or drops it as junk; the policies it is
 * read with are header-policy.ts's.
 */
import type { RecoveryKind, StopKind } from "../events.js";
import { isRustWhitespace, parseHeaderReference, parseHeaderTolerant, type ParsedHeader, type TolerantHeader } from "../header.js";
import { restoreSpaces } from "../tools.js";
import { decodeValidUtf8, scanUtf8 } from "../utf8.js";
import { FLAG_PROSE, FLAG_SPACE, FLAG_WHOLE } from "../vocab.js";
import {
  ARGUMENTS_START,
  cutMarkerAt,
  describeId,
  ENDED_HOLD_TOKENS,
  H_EXPLICIT,
  H_IMPLICIT,
  isText,
  MAX_JUNK_BYTES,
  NOT_HEADER_CHAR,
  S_CONTENT,
  S_ENDED,
  S_EXPECT,
  S_HEADER,
  WORDLIKE,
} from "./constants.js";
import { ParserStream } from "./stream.js";

export abstract class HeaderStates extends ParserStream {
  // ---------------------------------------------------------------- S_EXPECT: between messages

  protected expectToken(id: number): void {
    const s = this.settings;
    if (id === s.startId) {
      this.beginHeader(H_EXPLICIT, this.pos);
      return;
    }
    const at = this.pos - 1;
    if (s.strict) {
      this.fail(
        "unexpected_token",
        `Unexpected token ${describeId(id)} while expecting start token ${s.startId}`,
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
    if (id === s.endOfTextId) {
      this.endCompletion();
      return;
    }
    if (id >= s.firstSpecial && id !== s.channelId && id !== s.messageId) {
      this.recover("dropped_token", at, `special token ${id} between messages; dropped`);
      return;
    }
    // a header that never got its <|start|>: text, <|channel|> or <|message|>
    this.beginHeader(H_IMPLICIT, at);
    if (id === s.messageId) this.completeHeader();
    else this.head.append(id);
  }

  // ---------------------------------------------------------------- S_HEADER

  protected beginHeader(kind: number, start: number): void {
    this.state = S_HEADER;
    this.head.begin(kind, start);
  }

  /** Role a header is read with: the primed role, the implicit one, or none. */
  protected headerRole(): string | null {
    return this.head.kind === H_IMPLICIT ? this.settings.preset.implicitRole : this.nextRole;
  }

  protected headerToken(id: number): void {
    const s = this.settings;
    if (id === s.messageId) {
      this.completeHeader();
      return;
    }
    if (id >>> 0 === id && id < s.ordinaryLimit) {
      // the common case, an ordinary token, kept small enough for V8 to inline into write()
      this.head.append(id);
      // resilient: only whitespace (a word completes) or a non-identifier character can reveal text
      if (!s.strict && ((this.flags[id]! & (FLAG_SPACE | FLAG_PROSE)) !== 0 || this.head.length > s.maxHeaderBytes)) {
        this.checkHeaderIsText(this.pos - 1);
      }
      return;
    }
    this.headerControlToken(id);
  }

  /** A header token that is not an ordinary token: a special, or an id that is no token. */
  private headerControlToken(id: number): void {
    const s = this.settings;
    const head = this.head;
    if (s.strict) {
      if (s.nonStrict && this.stopKind(id) !== null) {
        this.nonStrictStopInHeader(id);
        return;
      }
      if (this.isToken(id)) head.append(id);
      else {
        head.tokens++;
        if (head.invalidId === undefined) head.invalidId = id;
      }
      return;
    }
    const at = this.pos - 1;
    if (!this.isToken(id)) {
      this.recover("invalid_token", at, `id ${describeId(id)} is not a token; dropped from a header`);
      return;
    }
    if (id === s.startId) {
      if (head.tokens === 0) {
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
    if (id === s.endOfTextId) {
      // the completion ends as at the end of the stream
      this.headerAtEnd();
      if (this.state === S_CONTENT) this.endMessage("eos");
      this.endCompletion();
      return;
    }
    if (id >= s.firstSpecial && id !== s.channelId && id !== s.constrainId) {
      this.recover("dropped_token", at, `special token ${id} inside a header; dropped`);
      return;
    }
    head.append(id);
    // only whitespace (a word completes) or a non-identifier character can reveal text
    if ((this.flags[id]! & (FLAG_SPACE | FLAG_PROSE)) !== 0 || head.length > s.maxHeaderBytes) this.checkHeaderIsText(at);
  }

  protected completeHeader(): void {
    const at = this.pos - 1;
    const s = this.settings;
    const head = this.head;
    if (s.strict) {
      const role = this.nextRole;
      this.state = S_EXPECT;
      scanUtf8(head.bytes, 0, head.length, this.scratch);
      if (head.invalidId !== undefined || this.scratch[1] !== -1) {
        this.fail("header_decode_failed", "could not decode header", at, s.messageId);
        return;
      }
      const r = this.readHeader(head.decode(false), role);
      if (!r.ok) {
        this.fail(r.code, r.message, at, s.messageId);
        return;
      }
      this.nextRole = null;
      this.beginMessage(r.header);
      return;
    }
    const header = this.readCompleteHeader(at);
    this.nextRole = null;
    // rule 16: after REPEAT_LIMIT identical messages in a row, one more with the same header is compared first
    const r = this.repeats;
    if (r.repeatsLastHeader(head.messageFrom, this.pos, this.window)) {
      this.messageFrom = head.messageFrom;
      this.shadow(r.lastMessageFrom + r.lastMessageHeaderLength, r.lastMessageLength - r.lastMessageHeaderLength, header);
      return;
    }
    this.beginMessage(header);
  }

  /** Resilient: the fields of a header whose text is complete (at `<|message|>`, or where it stood), with its repairs reported. */
  protected readCompleteHeader(at: number): ParsedHeader {
    const s = this.settings;
    const policy = this.policy;
    const read = this.head.decode(false);
    // a declared tool name with spaces is read as one word (rule 11)
    const text = s.tools !== null && s.tools.spaced.length > 0 ? s.tools.protect(read) : read;
    const role = this.headerRole();
    let header: ParsedHeader | null = null;
    if (!policy.carrying) {
      const r = this.readHeader(text, role);
      if (r.ok && policy.sane(r.header)) header = r.header;
    }
    if (header === null) {
      const th = parseHeaderTolerant(text, role, s.preset, { atMessage: true, carrying: policy.carrying });
      if (th.repairs.length > 0 || th.junk.length > 0) {
        const what = [...th.repairs, ...(th.junk.length > 0 ? [`skipped ${th.junk.length} stray word(s)`] : [])];
        this.recover("header_repaired", at, `header read tolerantly (${what.join(", ")})`, read);
      }
      header = { role: th.role, name: th.name, recipient: th.recipient, channel: th.channel, contentType: th.contentType };
      policy.applyCarry(header, at, this.pos);
    }
    if (text !== read && header.recipient !== null) header = { ...header, recipient: restoreSpaces(header.recipient) };
    header = policy.recipient(policy.channel(header, at, read), at, read);
    if (this.head.kind === H_IMPLICIT) this.recover("missing_start", at, "a header without <|start|>; assumed <|start|>assistant");
    return header;
  }

  /** The reference's reading of a complete header (remembered, with a memo; never mutated). */
  private readHeader(text: string, role: string | null): ReturnType<typeof parseHeaderReference> {
    const memo = this.settings.headerMemo;
    return memo !== null ? memo.reference(text, role) : parseHeaderReference(text, role, this.settings.preset, true);
  }

  /** Resilient: a stop token arrived inside a header. */
  private stopInHeader(stop: StopKind, at: number): void {
    const head = this.head;
    if (head.tokens === 0) {
      this.recover("stray_stop", at, `<|${stop}|> where a header should begin; dropped`);
      this.nextRole = null;
      this.state = S_EXPECT;
      return;
    }
    const text = head.decode(false);
    const th = parseHeaderTolerant(text, this.headerRole(), this.settings.preset, {
      atMessage: false,
      carrying: this.policy.carrying,
    });
    const rest = text.slice(th.restStart);
    if (head.kind === H_IMPLICIT ? WORDLIKE.test(rest) : rest.trim() !== "") {
      if (this.headerBecomesMessage(th, text, head.length, at, true)) this.endMessage(stop);
      else {
        this.recover("stray_stop", at, `<|${stop}|> after text between messages; dropped`);
        this.nextRole = null;
        this.state = S_EXPECT;
      }
      return;
    }
    if (stop === "end" && th.channel !== null && !head.junk) {
      // rule 14: what follows tells whether <|end|> stands where <|message|> belongs
      this.endedAt = at;
      this.state = S_ENDED;
      return;
    }
    this.abandonHeader(at, "abandoned_header", `a header was closed by <|${stop}|> before <|message|>`, th);
    if (head.kind === H_IMPLICIT && th.recipient === null)
      this.recover("stray_stop", at, `<|${stop}|> after text between messages; dropped`);
    this.nextRole = null;
    this.state = S_EXPECT;
  }

  /** Resilient: end of input inside a header. */
  protected headerAtEnd(): void {
    const at = this.pos;
    const head = this.head;
    if (head.tokens === 0) {
      // a primed stream with no tokens at all is simply empty
      if (head.start > 0 || this.nextRole === null) this.recover("truncated_header", at, "the stream ended right after <|start|>");
      return;
    }
    const text = head.decode(false);
    // rule 14: a marker cut short at the end (`<|ch`) is never text
    const cut = cutMarkerAt(text);
    const core = cut < 0 ? text : text.slice(0, cut);
    const th = parseHeaderTolerant(core, this.headerRole(), this.settings.preset, {
      atMessage: false,
      carrying: this.policy.carrying,
    });
    const rest = core.slice(th.restStart);
    // a lone identifier-like word is more likely a cut header field than an answer
    if (isText(rest, th.restWords)) {
      if (cut >= 0) this.recover("truncated_header", at, "the stream ended inside a marker; dropped", text.slice(cut));
      if (this.headerBecomesMessage(th, core, head.length, at, true)) this.endMessage("eos");
      else this.state = S_EXPECT;
      return;
    }
    this.recover(
      head.kind === H_IMPLICIT && th.recipient === null ? "junk_text" : "truncated_header",
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
    const head = this.head;
    if (head.junk) {
      // text between messages: it may still run into a header, never into content; bounded
      if (head.length > MAX_JUNK_BYTES) {
        this.recover("junk_text", at, "text between messages; dropped", head.decode(false));
        this.beginHeader(H_IMPLICIT, this.pos);
        head.junk = true;
      }
      return;
    }
    const role = this.headerRole();
    const kind = head.kind === H_IMPLICIT ? 1 : 0;
    const within = head.length <= this.settings.maxHeaderBytes;
    // a clean header's text is its `text`, its tail its length: the outcome below is a function of the text and role
    const memo = within && head.clean ? this.settings.headerMemo : null;
    if (memo !== null && memo.staysHeader(kind, head.text, role)) return;
    const text = head.decode(true);
    const tail = head.tail;
    // a marker still arriving (`<|ch`…) is header, not text (rule 14)
    if (within && cutMarkerAt(text) >= 0) return;
    const th = parseHeaderTolerant(text, role, this.settings.preset, { atMessage: false, carrying: false });
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
    const head = this.head;
    const preset = this.settings.preset;
    const policy = this.policy;
    const hasFields = th.restStart > 0;
    if (!hasFields && head.kind === H_IMPLICIT && this.messagesStarted > 0) {
      // rule 10: text after a finished message is never content; while the
      // header grows it may still turn out to be one, so it is held as junk
      if (ending) this.recover("junk_text", at, "text between messages; dropped", head.decode(false));
      else head.junk = true;
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
    if (header.role === preset.implicitRole) header = policy.argumentsOnly(header, content0, at);
    if (ARGUMENTS_START.test(content0) || !WORDLIKE.test(content0)) policy.applyCarry(header, at, this.pos);
    header = policy.recipient(policy.channel(header, at, text), at, text);
    // rule 13: the assistant's text with neither a channel nor a call's recipient (no header at all,
    // or one whose only field was a recipient that names no tool) is not known to be the answer
    const headerless = header.channel === null && header.recipient === null && header.role === preset.implicitRole;
    if (header.channel === null && header.recipient === null && !headerless) header.channel = preset.headerlessChannel;
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
    const tailBytes = head.bytes.slice(tail, head.length);
    this.nextRole = null;
    this.beginMessage(header);
    if (headerless) {
      const hl = this.headerless;
      hl.index = this.currentIndex;
      hl.from = this.messageFrom;
      this.currentKind = "reasoning";
      this.keepingText = true;
      hl.cut = false;
    }
    // rule 9: a marker read as header text never reaches content
    let content = text.slice(th.restStart);
    const { channel, constrain } = preset.markers;
    if (content.includes(channel) || content.includes(constrain)) {
      this.recover("dropped_token", at, "control tokens in text read from a broken header; dropped", content);
      content = content.split(channel).join(" ").split(constrain).join(" ");
    }
    this.appendText(content);
    if (tailBytes.length > 0) {
      if (this.pendingBytes.length < tailBytes.length) this.pendingBytes = new Uint8Array(16);
      this.pendingBytes.set(tailBytes, 0);
      this.pendingLength = tailBytes.length;
    }
    return true;
  }

  /**
   * A header ended without `<|message|>`. If it named a recipient, keep its
   * place in the window so the restarted header can take the recipient.
   */
  private abandonHeader(at: number, kind: RecoveryKind, detail: string, parsed?: TolerantHeader): void {
    const head = this.head;
    const preset = this.settings.preset;
    const text = head.decode(false);
    const th = parsed ?? parseHeaderTolerant(text, this.headerRole(), preset, { atMessage: false, carrying: false });
    // only a recipient that names a tool waits for the next header (rule 11): `to=...?` does not
    if (th.recipient !== null && th.recipient !== preset.selfRecipient && this.policy.namesTool(th.recipient)) {
      this.policy.carry(head.start, at, at, this.pos);
      this.recover(kind, at, `${detail}; recipient ${th.recipient} kept for the next header`);
      return;
    }
    const junk = head.kind === H_IMPLICIT && th.restStart === 0;
    this.recover(junk ? "junk_text" : kind, at, junk ? "text between messages; dropped" : detail, text);
  }

  /** Strict, non-strict option: the reference's salvage of a primed header closed by a stop token. */
  private nonStrictStopInHeader(id: number): void {
    const at = this.pos - 1;
    const role = this.nextRole;
    const head = this.head;
    if (role !== null && head.tokens > 0) {
      scanUtf8(head.bytes, 0, head.length, this.scratch);
      if (head.invalidId !== undefined || this.scratch[1] !== -1) {
        this.fail("header_decode_failed", "could not decode header", at, id);
        return;
      }
      const r = parseHeaderReference(decodeValidUtf8(head.bytes, 0, head.length), role, this.settings.preset, false);
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

  // ---------------------------------------------------------------- S_ENDED: after a header's <|end|> (rule 14)

  /**
   * A token after the `<|end|>` that closed a header naming a channel.
   * Text (a word, or the start of a call's arguments) makes the `<|end|>`
   * the header's `<|message|>`; white space and punctuation wait; anything
   * else abandons the header.
   */
  protected endedToken(id: number): void {
    const s = this.settings;
    if (id >>> 0 === id && id < s.ordinaryLimit) {
      const text = (this.flags[id]! & FLAG_WHOLE) !== 0 ? this.vocab.text(id) : null;
      if (text === null || WORDLIKE.test(text) || text.includes("{") || text.includes("[")) {
        this.commitEnded();
        return;
      }
      // held in the window, where they are read again: never more than it holds
      if (this.pos - 1 - this.endedAt <= ENDED_HOLD_TOKENS && this.pos + 1 - this.endedAt <= this.window.mask + 1) return;
    }
    if (id === s.messageId && this.pos - 1 === this.endedAt + 1) {
      // `<|end|><|message|>`: the <|end|> was a stray stop inside a header
      this.recover("stray_stop", this.endedAt, "<|end|> inside a header, before its <|message|>; dropped");
      this.state = S_HEADER;
      this.completeHeader();
      return;
    }
    this.abandonEnded(this.pos - 1);
    this.step(id);
  }

  /** The header closed by `<|end|>` is a header; the tokens after the `<|end|>` are its content. */
  private commitEnded(): void {
    const at = this.endedAt;
    let header = this.readCompleteHeader(at);
    this.recover(
      "missing_message",
      at,
      "a header closed by <|end|> where <|message|> belongs, with text after it: read as its <|message|>",
    );
    this.nextRole = null;
    if (header.recipient !== null && header.role === this.settings.preset.implicitRole) {
      header = this.policy.argumentsOnly(header, this.windowText(at + 1, this.pos) ?? "", at);
    }
    const end = this.pos;
    this.pos = at + 1;
    this.beginMessage(header);
    this.pos = end;
    this.replay(at + 1, end);
  }

  /** The header closed by `<|end|>` was abandoned after all; the tokens [endedAt + 1, to) are read as what they are. */
  protected abandonEnded(to: number): void {
    const at = this.endedAt;
    const text = this.head.decode(false);
    const th = parseHeaderTolerant(text, this.headerRole(), this.settings.preset, { atMessage: false, carrying: this.policy.carrying });
    this.abandonHeader(at, "abandoned_header", "a header was closed by <|end|> before <|message|>", th);
    if (this.head.kind === H_IMPLICIT && th.recipient === null)
      this.recover("stray_stop", at, "<|end|> after text between messages; dropped");
    this.nextRole = null;
    this.state = S_EXPECT;
    this.replay(at + 1, to);
  }
}
