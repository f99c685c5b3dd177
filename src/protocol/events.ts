/**
 * Core events ↔ wire events (the `Event` message of harmony.proto). The
 * wire form of an event is `{stream, <type>: {fields}}`; absent optional
 * fields are left out, every other field is always present (the JSON form is
 * printed with defaults, so `index: 0` is visible).
 */
import type { HarmonyEvent } from "../core/events.js";
import type { Schema } from "./schema.js";
import { fromStruct } from "./struct.js";

export type WireEvent = { stream: string } & Record<string, unknown>;

function strip(o: Record<string, unknown>): Record<string, unknown> {
  for (const k of Object.keys(o)) if (o[k] === null || o[k] === undefined) delete o[k];
  return o;
}

/** A core event as a wire `Event` object for `stream`. */
export function toWire(stream: string, ev: HarmonyEvent): WireEvent {
  const { type, ...body } = ev as HarmonyEvent & Record<string, unknown>;
  if (ev.type === "message_end" && ev.message) body.message = strip({ ...ev.message });
  return { stream, [type]: strip(body) };
}

const TYPES = ["message_start", "tool_call_start", "delta", "message_end", "recovery", "error", "done", "rendered", "openai"] as const;

/** A wire event (decoded or parsed from JSON) back into a core event. */
export function fromWire(w: Record<string, unknown>): { stream: string; event: HarmonyEvent } | null {
  const type = TYPES.find((t) => w[t] !== undefined && w[t] !== null);
  if (!type) return null;
  if (type === "openai") {
    // a Struct: decoded binary frames hold {fields}, JSON frames the object itself
    const raw = w.openai as Record<string, unknown>;
    const payload = "fields" in raw && typeof raw.fields === "object" ? fromStruct(raw as never) : raw;
    return { stream: typeof w.stream === "string" ? w.stream : "", event: { type: "openai", payload } as unknown as HarmonyEvent };
  }
  const body = { ...(w[type] as Record<string, unknown>) };
  const nullable: Record<string, string[]> = {
    message_start: ["name", "channel", "recipient", "content_type"],
    tool_call_start: ["namespace", "channel", "content_type"],
    error: ["token"],
  };
  for (const k of nullable[type] ?? []) if (body[k] === undefined) body[k] = null;
  if (type === "recovery" && body.raw === "") delete body.raw;
  return { stream: typeof w.stream === "string" ? w.stream : "", event: { type, ...body } as unknown as HarmonyEvent };
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
