/** Helpers for reading parsed JSON (untrusted values): one home for the shape checks every reader needs. */

/** A JSON object (not null, not an array). */
export type JsonObject = Record<string, unknown>;

/** Whether a parsed JSON value is an object (not null, not an array). */
export function isObj(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deepest JSON nesting accepted from a client (frames, HTTP bodies, render requests). */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests deeper than `max` arrays and objects, by one
 * linear scan that skips strings (no recursion, no parse): checked before
 * `JSON.parse`, so that nothing downstream recurses over a hostile value.
 */
export function jsonTooDeep(text: string, max: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

export type JsonParse = { ok: true; value: unknown } | { ok: false; code: "too_deep" | "bad_json"; message: string };

/** Parse client JSON: refused when it nests deeper than `max`, or is not JSON (the message is short and flat). */
export function parseJson(text: string, max: number = MAX_JSON_DEPTH): JsonParse {
  if (jsonTooDeep(text, max)) return { ok: false, code: "too_deep", message: `JSON nested deeper than ${max} levels` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, code: "bad_json", message: String((e as Error).message).slice(0, 200) };
  }
}

/**
 * A short, flat description of a client value for an error message: a
 * number, a string (cut to 40 characters), or its kind. Never walks into
 * the value (a message must not recurse over, or copy, what a client sent).
 */
export function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return `an array of ${v.length}`;
  switch (typeof v) {
    case "string":
      return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
    case "number":
    case "boolean":
      return String(v);
    case "object":
      return "an object";
    default:
      return typeof v;
  }
}

/** Whether text is JSON (V8's parser is iterative: no recursion over the text). */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
