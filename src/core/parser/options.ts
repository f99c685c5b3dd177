/**
 * What a stream is parsed with: the options a caller gives, and the
 * settings the machine reads them into (resolved once per stream, by
 * restart(), so no token asks for a default).
 */
import { PARSER_DEFAULTS } from "../defaults.js";
import { threadHeaderMemo, type HeaderMemo } from "../header.js";
import { HARMONY, type HarmonyPreset } from "../preset.js";
import { DeclaredTools } from "../tools.js";
import type { Vocabulary } from "../vocab.js";

export type ParseMode = "resilient" | "strict";

export interface ParserOptions {
  /** `resilient` (default) or `strict` (the reference's behaviour). */
  mode?: ParseMode;
  /** Strict mode only: the reference's `ParseOptions { strict: false }`. */
  nonStrict?: boolean;
  /** Role the first header is primed with (a completion); null: unprimed. Default `assistant`. */
  role?: string | null;
  /** Attach each finished message, in the reference's shape, to `message_end`. */
  wholeMessages?: boolean;
  /** Tool call ids are this prefix followed by the call's index. Default `call_`. */
  callIdPrefix?: string;
  /** Rolling window of token ids kept for recovery (a power of two). Default 512. */
  windowSize?: number;
  /** Resilient mode: header text longer than this is taken as content. Default 256 bytes. */
  maxHeaderBytes?: number;
  preset?: HarmonyPreset;
  /**
   * Resilient mode, primed streams: what follows the stop that ends the
   * completion (a `<|call|>` closing a tool call, a `<|return|>` closing a
   * final answer; docs/resilience.md, rule 8). `drop` (default): nothing more is
   * parsed; the tokens are reported in one `after_stop` recovery. `parse`:
   * parse on, as for an unprimed stream.
   */
  afterStop?: "drop" | "parse";
  /**
   * Resilient mode: the tools the stream may call (function names, whole;
   * they may hold spaces). Recipients are matched to them, a bare declared
   * name gets `functions.`, and a call to another tool carries an
   * `unknown_tool` recovery (rule 11). Absent: any name that reads as a
   * tool's.
   */
  tools?: Iterable<string> | DeclaredTools | null;
  /**
   * Resilient mode: which tool calls the stream may make. `any` (default);
   * `none` (OpenAI's `tool_choice: "none"`): a message to a tool is read as
   * text on its channel, with a `call_not_allowed` recovery; `one`
   * (`parallel_tool_calls: false`): the first complete call ends the
   * completion, as a closing `<|call|>` does (rule 8).
   */
  calls?: "any" | "none" | "one";
  /**
   * Header readings shared by the parsers of one thread (see HeaderMemo):
   * the same events, with less work and garbage per message. Used only
   * when its preset is this parser's. Default: the thread's own
   * (threadHeaderMemo), for HARMONY; null: none.
   */
  headers?: HeaderMemo | null;
}

/** A stream's options, resolved: plain fields the machine reads on every token. */
export class ParserSettings {
  preset: HarmonyPreset = HARMONY;
  /** Strict mode: the reference's behaviour, errors and all. */
  strict = false;
  /** Strict mode with the reference's `strict: false` (a primed header closed by a stop is salvaged). */
  nonStrict = false;
  /** Each message_end carries its whole message. */
  wholeMessages = false;
  callIdPrefix = "call_";
  maxHeaderBytes: number = PARSER_DEFAULTS.maxHeaderBytes;
  /** The thread's header readings, when they are for this preset; null: none. */
  headerMemo: HeaderMemo | null = null;
  /** Ids from here on are special tokens. */
  firstSpecial = 0;
  /** Ids from here on are no tokens (the preset's limit, or the vocabulary's size). */
  vocabLimit = 0;
  /** Ids below this are ordinary tokens. */
  ordinaryLimit = 0;
  /** The preset's control tokens. */
  startId = 0;
  messageId = 0;
  channelId = 0;
  constrainId = 0;
  endId = 0;
  returnId = 0;
  callId = 0;
  /** `<|endoftext|>`, or -1 when the preset has none. */
  endOfTextId = -1;
  /** Resilient: the implicit role's word as one token (`assistant`), held in content until the next token (-1: none, or strict). */
  roleWordId = -1;
  /** Rule 8: what follows the completion's closing stop is dropped (not parsed on). */
  dropAfterStop = true;
  /** The tools the stream declared; null: any name that reads as a tool's. */
  tools: DeclaredTools | null = null;
  /** Which calls the stream may make (ParserOptions.calls). */
  allowedCalls: "any" | "none" | "one" = "any";
  /** The window's full size, in ids (a power of two). */
  windowIds: number = PARSER_DEFAULTS.windowIds;
  /** The role the first header is primed with; null: unprimed. */
  primedRole: string | null = null;

  /** Read `options` for a new stream over `vocab`. */
  reset(options: ParserOptions, vocab: Vocabulary): void {
    const preset = options.preset ?? HARMONY;
    this.preset = preset;
    this.strict = options.mode === "strict";
    this.nonStrict = this.strict && options.nonStrict === true;
    this.wholeMessages = options.wholeMessages === true;
    this.callIdPrefix = options.callIdPrefix ?? "call_";
    this.maxHeaderBytes = options.maxHeaderBytes ?? PARSER_DEFAULTS.maxHeaderBytes;
    const memo = options.headers === undefined ? threadHeaderMemo(preset) : options.headers;
    this.headerMemo = memo !== null && memo.preset === preset ? memo : null;
    this.firstSpecial = preset.firstSpecial;
    this.vocabLimit = Math.min(preset.vocabLimit, vocab.size);
    this.ordinaryLimit = Math.min(this.firstSpecial, this.vocabLimit);
    const t = preset.tokens;
    this.startId = t.start;
    this.messageId = t.message;
    this.channelId = t.channel;
    this.constrainId = t.constrain;
    this.endId = t.end;
    this.returnId = t.return;
    this.callId = t.call;
    this.endOfTextId = preset.specials["<|endoftext|>"] ?? -1;
    this.dropAfterStop = options.afterStop !== "parse";
    this.roleWordId = this.strict ? -1 : vocab.idOfText(preset.implicitRole);
    this.allowedCalls = options.calls ?? "any";
    const tools = options.tools;
    this.tools = tools === undefined || tools === null ? null : tools instanceof DeclaredTools ? tools : new DeclaredTools(tools);
    let size = 1;
    while (size < (options.windowSize ?? PARSER_DEFAULTS.windowIds)) size <<= 1;
    this.windowIds = size;
    this.primedRole = options.role === undefined ? preset.implicitRole : options.role;
  }
}
