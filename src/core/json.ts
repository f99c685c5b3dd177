/** Helpers for reading parsed JSON (untrusted values): one home for the shape checks every reader needs. */

/** A JSON object (not null, not an array). */
export type JsonObject = Record<string, unknown>;

/** Whether a parsed JSON value is an object (not null, not an array). */
export function isObj(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
