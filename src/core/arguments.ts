/**
 * A tool call's whole arguments, checked and, where a known real shape of
 * broken JSON applies, repaired (docs/resilience.md, rule 12). The deltas stay
 * as generated; only `tool_call_end` carries the repaired text, and the
 * raw text goes into an `arguments_repaired` recovery. The OpenAI adapters
 * stream the repair (src/openai/streamed-arguments.ts), relying on each
 * repair starting with the generated text up to where that stops being
 * JSON (whitespace around it aside): a new shape must keep that
 * (test/openai/streamed-arguments.test.ts checks it).
 *
 * The shapes, each seen in real gpt-oss output (test/fixtures/realworld/):
 * - over-escaped: `{\"url\":\"…\"}` (the object written as a JSON string's body);
 * - wrapped: a Markdown code fence (```json … ```), or a leading `json` word;
 * - trailing junk: a stray word or extra closing braces after the object;
 * - short of closing brackets at the end of the stream (outside a string).
 *
 * Pure and bounded: one linear scan per shape, no recursion over the
 * input (JSON.parse is V8's iterative parser), nothing thrown.
 */
import { isJson } from "./json.js";

/** Arguments longer than this are checked but not repaired (a repair re-parses the text a few times). */
export const MAX_REPAIR_CHARS = 1 << 20;

export interface CheckedArguments {
  /** The arguments to hand on: the generated text, or its repair. */
  arguments: string;
  /** Whether `arguments` is valid JSON. */
  validJson: boolean;
  /** The shape repaired, when a repair was made. */
  repair: "over_escaped" | "code_fence" | "json_prefix" | "trailing_text" | "missing_closers" | null;
}

/**
 * Whether text is JSON whose value is an object or an array (what tools
 * take). Checked by isJson's scan, not by JSON.parse: each failed repair
 * attempt would throw a SyntaxError (its stack captured), many times the
 * scan's cost on the parser's thread per broken call.
 */
function parsesToContainer(text: string): boolean {
  // JSON: its value's first character, past JSON's whitespace, is { or [
  return isJson(text) && CONTAINER_START.test(text);
}

const CONTAINER_START = /^[ \t\n\r]*[{[]/;

/** What a repairable text starts with, past whitespace: `{` or `[` (over-escaped, trailing text, missing closers), a fence's backquote, `json` in any case. */
const REPAIRABLE_START = /^\s*[{[`jJ]/;

const FENCE = /^\s*```[A-Za-z]*[ \t]*\r?\n([\s\S]*?)\r?\n?```\s*$/;
const JSON_WORD = /^\s*json\s*(?=[{[])/i;

/**
 * Where the first top-level JSON object or array of `text` (starting at
 * `from`) ends, by a string-aware bracket scan; -1 when it does not close.
 * `depth` gets the open brackets at the end (for a cut-short text).
 */
function scanValue(text: string, from: number, open: string[]): number {
  let inString = false;
  let escaped = false;
  open.length = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") open.push(c === "{" ? "}" : "]");
    else if (c === "}" || c === "]") {
      if (open.pop() !== c) return -1;
      if (open.length === 0) return i + 1;
    }
  }
  if (inString) open.push('"');
  return -1;
}

/**
 * Check a call's arguments; repair a known broken shape. `atEnd`: the call
 * was cut by the end of the stream (only then are missing closers added).
 */
export function checkArguments(text: string, contentType: string | null, atEnd: boolean): CheckedArguments {
  if (isJson(text)) return { arguments: text, validJson: true, repair: null };
  return repairArguments(text, contentType, atEnd);
}

/** checkArguments for arguments already known not to be JSON. */
export function repairArguments(text: string, contentType: string | null, atEnd: boolean): CheckedArguments {
  // every shape below starts, past whitespace, with one of these characters: other text (code for
  // a python tool, prose) is left as it is at once
  if (!REPAIRABLE_START.test(text)) return { arguments: text, validJson: false, repair: null };
  // a content type other than JSON: only text that starts as JSON does (a lower-case json word too)
  const looksJson = contentType === null || /json/i.test(contentType) || /^\s*[{[`j]/.test(text);
  if (!looksJson || text.length > MAX_REPAIR_CHARS) return { arguments: text, validJson: false, repair: null };
  const trimmed = text.trim();

  // over-escaped: the object as the body of a JSON string
  if (/^\{\\"/.test(trimmed)) {
    const literal = `"${trimmed}"`;
    // checked first: most candidates are not a string's body, and JSON.parse would throw
    if (isJson(literal)) {
      let unescaped: unknown = null;
      try {
        unescaped = JSON.parse(literal);
      } catch {
        // isJson said it is JSON: not reached
      }
      if (typeof unescaped === "string" && parsesToContainer(unescaped))
        return { arguments: unescaped, validJson: true, repair: "over_escaped" };
    }
  }
  const fenced = FENCE.exec(text);
  if (fenced && parsesToContainer(fenced[1]!)) return { arguments: fenced[1]!.trim(), validJson: true, repair: "code_fence" };
  const prefixed = JSON_WORD.exec(text);
  if (prefixed) {
    const rest = text.slice(prefixed[0].length).trim();
    if (parsesToContainer(rest)) return { arguments: rest, validJson: true, repair: "json_prefix" };
  }
  // a whole object followed by junk (a stray word, extra closing braces)
  const start = text.search(/[{[]/);
  if (start >= 0 && text.slice(0, start).trim() === "") {
    const open: string[] = [];
    const end = scanValue(text, start, open);
    if (end > 0) {
      const value = text.slice(start, end);
      if (text.slice(end).trim() !== "" && parsesToContainer(value)) return { arguments: value, validJson: true, repair: "trailing_text" };
    } else if (atEnd && open.length > 0 && open.length <= 64 && open[open.length - 1] !== '"') {
      // one or more closing brackets short at the end of the stream (never a string cut
      // in the middle: that value is unknown)
      const closed = text.trimEnd() + open.reverse().join("");
      if (parsesToContainer(closed)) return { arguments: closed, validJson: true, repair: "missing_closers" };
    }
  }
  return { arguments: text, validJson: false, repair: null };
}
