/**
 * The public event stream: a discriminated union on `type`, mirrored one to
 * one by the protobuf `Event` oneof. Field names are the JSON names.
 */
import type { RecoveryKind } from "./errors.js";

export type { RecoveryKind };

export type DeltaKind = "reasoning" | "content" | "commentary" | "tool_args" | "other";
export type StopKind = "end" | "call" | "return" | "eos";
export type FinishReason = "stop" | "tool_calls" | "length" | "abort" | "error";
export type EndReason = "eos" | "length" | "abort";

/** A message in the reference's JSON shape (absent fields omitted). */
export interface ReferenceMessage {
  role: string;
  name?: string;
  recipient?: string;
  content: string;
  channel?: string;
  content_type?: string;
}

export interface MessageStartEvent {
  type: "message_start";
  index: number;
  role: string;
  name: string | null;
  channel: string | null;
  recipient: string | null;
  content_type: string | null;
}

export interface ToolCallStartEvent {
  type: "tool_call_start";
  index: number;
  call_index: number;
  id: string;
  recipient: string;
  namespace: string | null;
  name: string;
  channel: string | null;
  content_type: string | null;
}

/**
 * A tool call's whole arguments, after its last delta (docs/resilience.md, rule
 * 12): repaired where a known broken shape applies (then an
 * `arguments_repaired` recovery comes first, with the raw text). Not sent
 * for a call cut short by a length limit or an abort.
 */
export interface ToolCallEndEvent {
  type: "tool_call_end";
  index: number;
  call_index: number;
  id: string;
  name: string;
  arguments: string;
  valid_json: boolean;
}

export interface DeltaEvent {
  type: "delta";
  index: number;
  kind: DeltaKind;
  text: string;
}

export interface MessageEndEvent {
  type: "message_end";
  index: number;
  stop: StopKind;
  message?: ReferenceMessage;
}

export interface RecoveryEvent {
  type: "recovery";
  /** Token index (0-based, counted over the whole stream) where it happened. */
  at: number;
  kind: RecoveryKind;
  detail: string;
  /** Text that could not be placed in a message, delivered here instead. */
  raw?: string;
  /**
   * How many identical repairs of consecutive tokens this event stands for
   * (`at` is the first), when more than one: a run of stray stop tokens in
   * one write is one event, not one per token. Absent: one.
   */
  count?: number;
}

export interface ErrorEvent {
  type: "error";
  code: string;
  message: string;
  /** Token index of the offending token; the token count for end of input. */
  at: number;
  /** The offending token id, or null at end of input. */
  token: number | null;
}

export interface DoneEvent {
  type: "done";
  finish_reason: FinishReason;
  tokens: number;
  messages: number;
  recoveries: number;
  /** Tokens of the messages on the analysis channel (the chain of thought), from each one's header to its end token. */
  reasoning_tokens: number;
}

export type HarmonyEvent =
  MessageStartEvent | ToolCallStartEvent | ToolCallEndEvent | DeltaEvent | MessageEndEvent | RecoveryEvent | ErrorEvent | DoneEvent;
