/**
 * Resilient mode's policies for a header about to begin a message: which
 * reading of it is trusted, its channel (rule 15), its recipient (rules 11
 * and 14), and the recipient an abandoned header leaves for the header
 * that restarts it. Each repair is reported through `Recoveries`.
 */
import type { RecoveryKind } from "../events.js";
import { parseHeaderTolerant, type ParsedHeader } from "../header.js";
import { FUNCTIONS, judgeRecipient } from "../tools.js";
import type { Vocabulary } from "../vocab.js";
import { ARGUMENTS_START, LEADING_LETTERS, RECIPIENT, WORDLIKE } from "./constants.js";
import type { ParserSettings } from "./options.js";
import type { TokenWindow } from "./window.js";

const FUNCTIONS_PREFIX = `${FUNCTIONS}.`;

/** Where a policy reports its repairs (the machine's recovery events). */
export interface Recoveries {
  recover(kind: RecoveryKind, at: number, detail: string, raw?: string): void;
}

export class HeaderPolicy {
  /**
   * An abandoned header whose recipient awaits the restarted one: its
   * tokens [carriedFrom, carriedTo) in the window; -1: none.
   */
  carriedFrom = -1;
  carriedTo = -1;

  constructor(
    private readonly settings: ParserSettings,
    private readonly window: TokenWindow,
    private readonly vocab: Vocabulary,
    private readonly report: Recoveries,
  ) {}

  reset(): void {
    this.carriedFrom = this.carriedTo = -1;
  }

  /** Whether an abandoned header's recipient waits for the next header. */
  get carrying(): boolean {
    return this.carriedFrom >= 0;
  }

  /** Whether the reference's reading of a header can be trusted as is. */
  sane(h: ParsedHeader): boolean {
    if (h.channel?.includes("<|") || h.name?.includes("<|")) return false;
    return h.recipient === null || RECIPIENT.test(h.recipient);
  }

  /** Whether a recipient read from a header names a tool (rule 11), so that a restarted header may take it. */
  namesTool(recipient: string): boolean {
    if (!RECIPIENT.test(recipient)) return false;
    const preset = this.settings.preset;
    const h: ParsedHeader = { role: preset.implicitRole, name: null, recipient, channel: null, contentType: null };
    return judgeRecipient(h, this.settings.tools, preset).header.recipient !== null;
  }

  /**
   * Rule 14: a recipient is read from a header with no `<|message|>` only
   * when arguments follow it (JSON, or a fence), never from prose: then the
   * message is text on its channel.
   */
  argumentsOnly(h: ParsedHeader, content: string, at: number): ParsedHeader {
    if (h.recipient === null || ARGUMENTS_START.test(content) || !WORDLIKE.test(content)) return h;
    this.report.recover(
      "header_repaired",
      at,
      `recipient ${h.recipient} dropped: prose, not arguments, follows a header with no <|message|>`,
    );
    return { ...h, recipient: null };
  }

  /**
   * A channel that is a valid channel's name run on into other text (the
   * model wrote its thinking into the header: `commentary?commentary?We`,
   * `analysis2`) is that channel; the rest is in the recovery's raw text.
   */
  channel(h: ParsedHeader, at: number, text: string): ParsedHeader {
    const c = h.channel;
    const preset = this.settings.preset;
    if (c === null || h.role !== preset.implicitRole) return h;
    const { reasoning, commentary, final } = preset.channels;
    if (c === reasoning || c === commentary || c === final) return h;
    // a declared tool's name where the channel belongs is a call to it (`<|channel|>final_answer` for a tool so named)
    const tools = this.settings.tools;
    if (h.recipient === null && tools !== null && tools.has(c)) {
      this.report.recover(
        "channel_repaired",
        at,
        `channel ${JSON.stringify(c)} names a declared tool: a call to ${FUNCTIONS_PREFIX}${c}`,
        text,
      );
      return { ...h, channel: commentary, recipient: FUNCTIONS_PREFIX + c };
    }
    // rule 15: the letters it begins with, in any case (`final>`, `FINAL`, `final_answer`, `commentary?…`)
    const lead = LEADING_LETTERS.exec(c)?.[0].toLowerCase();
    for (const known of [reasoning, commentary, final]) {
      if (lead === known) {
        this.report.recover("channel_repaired", at, `channel ${JSON.stringify(c)} read as ${known}`, text);
        return { ...h, channel: known };
      }
    }
    return h;
  }

  /** Rule 11 on a header about to begin a message: only tools are called (and none, when calls are not allowed). */
  recipient(h: ParsedHeader, at: number, text: string): ParsedHeader {
    const r = h.recipient;
    if (r === null) return h;
    const { tools, allowedCalls, preset } = this.settings;
    // the common case, decided without the judgement's work: functions.NAME, nothing declared, calls allowed
    if (tools === null && allowedCalls === "any" && r.startsWith(FUNCTIONS_PREFIX) && r.indexOf("<|") < 0) return h;
    // judged first: a word that names no tool (`<|channel|>final code`) is no call, allowed or not
    const v = judgeRecipient(h, tools, preset);
    if (v.repaired !== null) this.report.recover("header_repaired", at, `recipient ${v.repaired}`, text);
    if (allowedCalls === "none" && v.header.recipient !== null && h.role === preset.implicitRole) {
      this.report.recover("call_not_allowed", at, `a call to ${v.header.recipient} where calls are not allowed; read as text`, text);
      return { ...v.header, recipient: null };
    }
    if (v.unknown) this.report.recover("unknown_tool", at, `${v.header.recipient} is not a tool the stream declared`);
    return v.header;
  }

  /** Keep the abandoned header's tokens [from, to) for the next header's recipient (a carried one before it is dropped). */
  carry(from: number, to: number, at: number, pos: number): void {
    if (this.carriedFrom >= 0) this.dropCarry(at, "a later abandoned header replaced it", pos);
    this.carriedFrom = from;
    this.carriedTo = to;
  }

  /** Give a carried recipient to a header that has none (at stream position `pos`). */
  applyCarry(header: ParsedHeader, at: number, pos: number): void {
    if (this.carriedFrom < 0) return;
    if (header.recipient !== null) {
      this.dropCarry(at, `the restarted header names its own recipient ${header.recipient}`, pos);
      return;
    }
    const carried = this.carriedRecipient(pos);
    if (carried === null) {
      this.dropCarry(at, "the abandoned header is no longer in the window", pos);
      return;
    }
    header.recipient = carried;
    this.report.recover("recipient_spliced", at, `recipient ${carried} from the abandoned header spliced into the restarted one`);
    this.carriedFrom = this.carriedTo = -1;
  }

  /** The carried recipient is not used (`why`). */
  dropCarry(at: number, why: string, pos: number): void {
    const text = this.carriedText(pos);
    this.report.recover("unused_recipient", at, `an abandoned header's recipient was not used: ${why}`, text ?? undefined);
    this.carriedFrom = this.carriedTo = -1;
  }

  /** Re-read the abandoned header from the token window. */
  private carriedRecipient(pos: number): string | null {
    const text = this.carriedText(pos);
    if (text === null) return null;
    const th = parseHeaderTolerant(text, null, this.settings.preset, { atMessage: false, carrying: false });
    return th.recipient;
  }

  private carriedText(pos: number): string | null {
    return this.window.text(this.carriedFrom, this.carriedTo, pos, this.vocab, this.settings.vocabLimit, this.vocab.scratch);
  }
}
