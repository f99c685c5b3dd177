/**
 * Core events ↔ wire events (the `Event` message of harmony.proto). The
 * wire form of an event is `{stream, <type>: {fields}}`; absent optional
 * fields are left out, every other field is always present (the JSON form is
 * printed with defaults, so `index: 0` is visible).
 */
import type { HarmonyEvent } from "../core/events.js";
import type { Schema } from "./schema.js";
import { fromStruct } from "./struct.js";

/**
 * Which stream an event belongs to: its name, or its handle for streams
 * opened with one (their events carry the handle instead of the name).
 */
export type StreamRef = { stream: string } | { handle: number };

export type WireEvent = StreamRef & Record<string, unknown>;

/** The fields of `o` that are set (not null or undefined), but `skip`, in a fresh object. */
function present(o: object, skip: string): Record<string, unknown> {
  // added one by one (no spread, no delete), which keeps the object in V8's
  // fast mode: protobufjs encodes such objects several times faster
  const out: Record<string, unknown> = {};
  for (const k in o) {
    const v = (o as Record<string, unknown>)[k];
    if (k !== skip && v !== null && v !== undefined) out[k] = v;
  }
  return out;
}

/** A core event as a wire `Event` object for a stream (by name, or a `StreamRef`). */
export function toWire(stream: string | StreamRef, ev: HarmonyEvent): WireEvent {
  const body = present(ev, "type");
  if (ev.type === "message_end" && ev.message) body.message = present(ev.message, "");
  const w: WireEvent = typeof stream === "string" ? { stream } : "handle" in stream ? { handle: stream.handle } : { stream: stream.stream };
  w[ev.type] = body;
  return w;
}

/** The stream an event names: its handle when it has one (non-zero), else its name. */
function refOf(w: Record<string, unknown>): { stream: string; handle: number } {
  const h = w.handle;
  const handle = typeof h === "number" ? h : typeof h === "string" ? Number(h) : 0;
  return { stream: typeof w.stream === "string" ? w.stream : "", handle: Number.isInteger(handle) && handle > 0 ? handle : 0 };
}

const TYPES = [
  "message_start",
  "tool_call_start",
  "tool_call_end",
  "delta",
  "message_end",
  "recovery",
  "error",
  "done",
  "rendered",
  "openai",
] as const;

/** A wire event (decoded or parsed from JSON) back into a core event. */
export function fromWire(w: Record<string, unknown>): { stream: string; handle: number; event: HarmonyEvent } | null {
  const type = TYPES.find((t) => w[t] !== undefined && w[t] !== null);
  if (!type) return null;
  if (type === "openai") {
    // a Struct: decoded binary frames hold {fields}, JSON frames the object itself
    const raw = w.openai as Record<string, unknown>;
    const payload = "fields" in raw && typeof raw.fields === "object" ? fromStruct(raw as never) : raw;
    return { ...refOf(w), event: { type: "openai", payload } as unknown as HarmonyEvent };
  }
  const body = { ...(w[type] as Record<string, unknown>) };
  const nullable: Record<string, string[]> = {
    message_start: ["name", "channel", "recipient", "content_type"],
    tool_call_start: ["namespace", "channel", "content_type"],
    error: ["token"],
  };
  for (const k of nullable[type] ?? []) if (body[k] === undefined) body[k] = null;
  if (type === "recovery" && body.raw === "") delete body.raw;
  if (type === "recovery" && (body.count === 0 || body.count === 1)) delete body.count;
  return { ...refOf(w), event: { type, ...body } as unknown as HarmonyEvent };
}

/** Encode wire events as the bytes of a ServerFrame (or a fragment to concatenate with others). */
export function encodeServerFrame(s: Schema, events: WireEvent[]): Uint8Array {
  return s.ServerFrame.encode({ events }).finish();
}

/** The JSON text of a ServerFrame holding `eventJson` (each already JSON text). */
export function jsonServerFrame(eventJson: string[]): string {
  return `{"events":[${eventJson.join(",")}]}`;
}

/** Decode ServerFrame bytes into wire event objects (JSON-shaped). */
export function decodeServerFrame(s: Schema, bytes: Uint8Array): Record<string, unknown>[] {
  const msg = s.ServerFrame.decode(bytes);
  const obj = s.ServerFrame.toObject(msg, { defaults: true, oneofs: false }) as { events?: Record<string, unknown>[] };
  return obj.events ?? [];
}
