/**
 * What a stream is parsed with: the options a caller gives.
 */
import type { HeaderMemo } from "../header.js";
import type { HarmonyPreset } from "../preset.js";
import type { DeclaredTools } from "../tools.js";

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
