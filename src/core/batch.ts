/**
 * `parse --batch`'s cases: one JSON Lines case {"id", "tokens", "role"?}
 * in, its answer line out ({"id", "messages", "first_error", "recoveries"},
 * or {"id", "error": {code, message}} for a line that is not a usable case).
 * Shared by the CLI's main thread and its helper thread (workers/batch.ts):
 * never throws on input, and every line's answer is the same whichever
 * thread gives it.
 */
import { describeValue, isObj, parseJson } from "./json.js";
import type { InputErrorCode } from "./errors.js";
import { HarmonyParser, type ParserOptions } from "./parser.js";
import { parseCase } from "./reference.js";
import type { Vocabulary } from "./vocab.js";

/** The longest `--batch` line read (its bytes); a longer one is refused with line_too_long. */
export const MAX_BATCH_LINE_BYTES = 64 * 1024 * 1024;

/** A line of input: its bytes (a CR before the newline dropped), or null when it was longer than the bound. */
export type LineBytes = Uint8Array | null;

/** One line's answer (without its newline), and whether the line was refused. */
export interface BatchAnswer {
  json: string;
  bad: boolean;
}

/** Lines' answers, a newline after each (blank lines answer nothing), and how many were refused. */
export interface BatchPart {
  text: string;
  bad: number;
}

/** What is wrong with a case's `tokens` (integers only: out-of-vocabulary ones are the parser's business), or null. */
export function idsProblem(v: unknown): { code: InputErrorCode; message: string } | null {
  if (!Array.isArray(v)) return { code: "bad_tokens", message: "tokens must be an array of integers" };
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== "number" || !Number.isInteger(v[i])) {
      return { code: "bad_token_id", message: `tokens[${i}] is not an integer: ${describeValue(v[i])}` };
    }
  }
  return null;
}

// (a BOM kept, as Buffer#toString keeps it: a line is decoded as it is)
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** plainCase's buffer of ids: its size to begin with, and the largest kept from one case to the next. */
const SCRATCH_IDS = 1 << 14;
const MAX_KEPT_SCRATCH_IDS = 1 << 18;

/** The most digits plainCase reads in one id (below 2^31, so an Int32Array holds it). */
const PLAIN_ID_DIGITS = 9;

/** A case read by {@link plainCase}: its id and its tokens (a view of a buffer the next case reuses). */
interface PlainCase {
  id: string;
  tokens: Int32Array;
}

/**
 * A batch line of the one shape that JSON writers give the common case,
 * `{"id":"<text>","tokens":[<ids>]}` with no whitespace, the id printable
 * ASCII with no escapes and each token id 0–999,999,999 in plain digits,
 * read straight from its bytes: the same case JSON.parse and the checks
 * would read, with no line string, no depth scan and no array of numbers.
 * Anything else (another shape, an escape, a sign, a leading zero, a long
 * number, a role, bad JSON) is null: the line takes the general path, with
 * its checks and error codes. A loop over the bytes: nothing recurses, and
 * the tokens go into `scratch` (grown, never past the line's length).
 */
function plainCase(b: Uint8Array, scratch: { ids: Int32Array }): PlainCase | null {
  const n = b.length;
  // {"id":"
  if (n < 21 || b[0] !== 0x7b || b[1] !== 0x22 || b[2] !== 0x69 || b[3] !== 0x64 || b[4] !== 0x22 || b[5] !== 0x3a || b[6] !== 0x22) {
    return null;
  }
  let i = 7;
  for (; i < n; i++) {
    const c = b[i]!;
    if (c === 0x22) break;
    if (c < 0x20 || c > 0x7e || c === 0x5c) return null;
  }
  if (i >= n) return null;
  // (printable ASCII, checked above: its UTF-8 is itself)
  const id = utf8.decode(b.subarray(7, i));
  // ","tokens":[
  const k = i + 1;
  if (
    k + 11 > n ||
    b[k] !== 0x2c ||
    b[k + 1] !== 0x22 ||
    b[k + 2] !== 0x74 ||
    b[k + 3] !== 0x6f ||
    b[k + 4] !== 0x6b ||
    b[k + 5] !== 0x65 ||
    b[k + 6] !== 0x6e ||
    b[k + 7] !== 0x73 ||
    b[k + 8] !== 0x22 ||
    b[k + 9] !== 0x3a ||
    b[k + 10] !== 0x5b
  ) {
    return null;
  }
  i = k + 11;
  // the ids end with "]}" and the line: at most one id in every two bytes left
  if (n < i + 2 || b[n - 1] !== 0x7d || b[n - 2] !== 0x5d) return null;
  const end = n - 2;
  let ids = scratch.ids;
  const room = (end - i + 1) >> 1;
  if (ids.length < room) scratch.ids = ids = new Int32Array(Math.max(room, 2 * ids.length));
  let count = 0;
  // b[end] is the "]": no digit, so it ends the last number without a bound check in the loop
  if (i < end) {
    for (;;) {
      const start = i;
      let d = b[i]! - 0x30;
      if (d >>> 0 > 9) return null;
      let v = d;
      d = b[++i]! - 0x30;
      if (v === 0) {
        if (d >>> 0 <= 9) return null; // a leading zero
      } else {
        while (d >>> 0 <= 9) {
          v = v * 10 + d;
          d = b[++i]! - 0x30;
        }
        if (i - start > PLAIN_ID_DIGITS) return null;
      }
      ids[count++] = v;
      if (d === 0x2c - 0x30) i++;
      else if (i === end) break;
      else return null;
    }
  }
  return { id, tokens: ids.subarray(0, count) };
}

/** One line's answer, or null for a blank line. */
type Answer = BatchAnswer | null;

/**
 * The cases of one batch: one parser (restarted per case) and one set of
 * options per role, for every case; `base` is the options of every case
 * but for its role (`defaultRole` unless the case names one).
 */
export class BatchCases {
  private readonly parser: HarmonyParser;
  private readonly options = new Map<string | null, ParserOptions>();
  // plainCase's ids: room for a long case from the start; a buffer grown past a megabyte is not kept
  private readonly scratch = { ids: new Int32Array(SCRATCH_IDS) };

  constructor(
    private readonly vocab: Vocabulary,
    private readonly base: ParserOptions,
    private readonly defaultRole: string | null,
  ) {
    this.parser = new HarmonyParser(vocab);
  }

  private optionsFor(role: string | null): ParserOptions {
    let o = this.options.get(role);
    // wholeMessages, as parseCase asks for: it then restarts the parser with these very options
    if (o === undefined) this.options.set(role, (o = { ...this.base, role, wholeMessages: true }));
    return o;
  }

  /** Line `lineNo`'s answer (null for a blank line). */
  answer(bytes: LineBytes, lineNo: number): Answer {
    if (bytes === null) return this.refused(null, "line_too_long", `line ${lineNo} is longer than ${MAX_BATCH_LINE_BYTES} bytes`);
    let id: unknown = null;
    let tokens: ArrayLike<number>;
    let role: string | null = this.defaultRole;
    const plain = plainCase(bytes, this.scratch);
    if (plain !== null) {
      id = plain.id;
      tokens = plain.tokens;
    } else {
      const line = utf8.decode(bytes);
      if (line.trim() === "") return null;
      const parsed = parseJson(line);
      if (!parsed.ok) return this.refused(null, parsed.code, `line ${lineNo} is not usable JSON: ${parsed.message}`);
      const c = parsed.value;
      if (!isObj(c)) return this.refused(null, "bad_case", `line ${lineNo} is not a JSON object`);
      id = c.id ?? null;
      const problem = idsProblem(c.tokens);
      if (problem !== null) return this.refused(id, problem.code, problem.message);
      tokens = c.tokens as number[];
      if ("role" in c) {
        if (c.role !== null && c.role !== "assistant")
          return this.refused(id, "bad_role", `line ${lineNo}: role must be "assistant" or null`);
        role = c.role as string | null;
      }
    }
    const r = parseCase(this.vocab, tokens, this.optionsFor(role), undefined, this.parser);
    if (this.scratch.ids.length > MAX_KEPT_SCRATCH_IDS) this.scratch.ids = new Int32Array(SCRATCH_IDS);
    // the fields named, not spread: JSON.stringify of a spread copy costs several times as much here
    return { json: JSON.stringify({ id, messages: r.messages, first_error: r.first_error, recoveries: r.recoveries }), bad: false };
  }

  private refused(id: unknown, code: InputErrorCode, message: string): BatchAnswer {
    return { json: JSON.stringify({ id, error: { code, message } }), bad: true };
  }

  /** The answers of consecutive lines, the first of them line `firstLine`. */
  answerLines(lines: readonly LineBytes[], firstLine: number): BatchPart {
    let text = "";
    let bad = 0;
    for (let i = 0; i < lines.length; i++) {
      const a = this.answer(lines[i]!, firstLine + i);
      if (a === null) continue;
      if (a.bad) bad++;
      text += a.json + "\n";
    }
    return { text, bad };
  }

  /** {@link answerLines} of a unit (linesOfUnit's form: one buffer, the lines longer than the bound listed). */
  answerUnit(u: BatchUnit): BatchPart {
    return this.answerLines(linesOfUnit(u), u.firstLine);
  }
}

/**
 * Consecutive lines in one buffer, for another thread: each line's bytes
 * and a newline after it; a line longer than the bound (null) is listed in
 * `tooLong` by its index, its place in `bytes` empty.
 */
export interface BatchUnit {
  bytes: Uint8Array;
  tooLong: number[];
  firstLine: number;
}

/** A unit's lines (views of its buffer), nulls where `tooLong` says. */
export function linesOfUnit(u: BatchUnit): LineBytes[] {
  const b = u.bytes;
  const lines: LineBytes[] = [];
  for (let from = 0; from < b.length;) {
    const nl = b.indexOf(0x0a, from);
    const to = nl === -1 ? b.length : nl;
    lines.push(b.subarray(from, to));
    from = to + 1;
  }
  for (const i of u.tooLong) lines[i] = null;
  return lines;
}

/** Lines into one unit (the inverse of linesOfUnit), its buffer new (to be transferred). */
export function unitOfLines(lines: readonly LineBytes[], firstLine: number): BatchUnit {
  let total = 0;
  for (const l of lines) total += (l === null ? 0 : l.length) + 1;
  const bytes = new Uint8Array(total);
  const tooLong: number[] = [];
  let at = 0;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (l === null) tooLong.push(i);
    else {
      bytes.set(l, at);
      at += l.length;
    }
    bytes[at++] = 0x0a;
  }
  return { bytes, tooLong, firstLine };
}
