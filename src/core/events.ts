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
}

export type HarmonyEvent = MessageStartEvent | ToolCallStartEvent | DeltaEvent | MessageEndEvent | RecoveryEvent | ErrorEvent | DoneEvent;
