/**
 * `harmony-sidecar parse`: parse token ids or Harmony text from stdin.
 *
 * Single input: prints events (JSON Lines) or, with `--output messages`, one
 * object {messages, first_error, recoveries}. `--batch` reads JSON Lines
 * cases {"id", "tokens", "role"?} and prints one result line per case, in
 * input order. Bad input never aborts a batch: that line gets an `error`
 * object with a code, and the exit status is 2 at the end. A batch is read
 * as it arrives and its answers are written a batch of lines at a time
 * (what each chunk of input yields), so per-line costs stay far below the
 * parse's own.
 */
import { describeValue, isObj, parseJson } from "../core/json.js";
import type { Readable, Writable } from "node:stream";
import { parseCase } from "../core/reference.js";
import { CodedError, type InputErrorCode } from "../core/errors.js";
import { HarmonyParser, type ParserOptions } from "../core/parser.js";
import { Vocabulary } from "../core/vocab.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";
import { commaList } from "./lists.js";
import { EXAMPLE_IDS } from "./usage.js";

export interface ParseCommandOptions {
  input: "ids" | "text";
  role: "assistant" | "none";
  strict: boolean;
  nonStrict: boolean;
  output: "events" | "messages";
  batch: boolean;
  /** After the stop that ends a primed completion: drop (default) or parse on. */
  afterStop?: "drop" | "parse";
  /** Declared tools, comma-separated (names may hold spaces). */
  tools?: string;
}

export class InputError extends CodedError {
  constructor(
    override readonly code: InputErrorCode,
    message: string,
  ) {
    super(code, message);
  }
}

/** Token ids from text: a JSON array, or integers separated by whitespace or commas. */
export function parseIdList(text: string): number[] {
  const t = text.trim();
  if (t === "") return [];
  if (t.startsWith("[")) {
    const parsed = parseJson(t);
    if (!parsed.ok) throw new InputError(parsed.code, `input is not usable JSON: ${parsed.message}`);
    return checkIds(parsed.value);
  }
  const out: number[] = [];
  for (const part of t.split(/[\s,]+/)) {
    if (!/^-?\d+$/.test(part)) throw new InputError("bad_token_id", `not a token id: ${JSON.stringify(part.slice(0, 40))}`);
    out.push(Number(part));
  }
  return out;
}

/** Ids must be integers; out-of-vocabulary integers are the parser's business. */
export function checkIds(v: unknown): number[] {
  if (!Array.isArray(v)) throw new InputError("bad_tokens", "tokens must be an array of integers");
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== "number" || !Number.isInteger(v[i])) {
      throw new InputError("bad_token_id", `tokens[${i}] is not an integer: ${describeValue(v[i])}`);
    }
  }
  return v as number[];
}

function parserOptions(opts: ParseCommandOptions, role: string | null): ParserOptions {
  const tools = opts.tools === undefined ? null : commaList(opts.tools);
  return {
    mode: opts.strict || opts.nonStrict ? "strict" : "resilient",
    nonStrict: opts.nonStrict,
    role,
    afterStop: opts.afterStop ?? "drop",
    tools,
  };
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === "string" ? Buffer.from(c) : (c as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}

/** Write text, waiting when the destination is full (pipes to slow readers). */
async function writeText(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await new Promise<void>((resolve) => out.once("drain", resolve));
}

async function writeLine(out: Writable, line: string): Promise<void> {
  await writeText(out, line + "\n");
}

/** The longest `--batch` line read (its bytes); a longer one is refused with line_too_long. */
export const MAX_BATCH_LINE_BYTES = 64 * 1024 * 1024;

/** A line of input: its text, or null when it was longer than the bound (its bytes were not kept). */
type Line = string | null;

/** A line of input: its bytes (a CR before the newline dropped), or null when it was longer than the bound. */
type LineBytes = Buffer | null;

/**
 * The lines of `input`, a chunk's worth at a time (a final line without a
 * newline included, a CR before the newline dropped). A line's bytes are
 * kept until its newline only up to `maxBytes`: past that, the rest of the
 * line is skipped and the line is null.
 */
export async function* readLines(input: Readable, maxBytes: number = MAX_BATCH_LINE_BYTES): AsyncGenerator<Line[]> {
  for await (const lines of readLineBytes(input, maxBytes)) yield lines.map((b) => (b === null ? null : b.toString("utf8")));
}

/** {@link readLines}, each line's bytes (a view of the input's chunk when the line is within one: not copied). */
async function* readLineBytes(input: Readable, maxBytes: number): AsyncGenerator<LineBytes[]> {
  let parts: Buffer[] = []; // the current line's bytes so far
  let held = 0;
  let skipping = false;
  const line = (tail: Buffer): Buffer => {
    const b = parts.length === 0 ? tail : Buffer.concat([...parts, tail]);
    parts = [];
    held = 0;
    return b.length > 0 && b[b.length - 1] === 0x0d ? b.subarray(0, b.length - 1) : b;
  };
  for await (const chunk of input) {
    const c = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    const out: LineBytes[] = [];
    let from = 0;
    for (let nl = c.indexOf(0x0a); nl !== -1; nl = c.indexOf(0x0a, from)) {
      if (skipping || held + (nl - from) > maxBytes) out.push(null);
      else out.push(line(c.subarray(from, nl)));
      skipping = false;
      parts = [];
      held = 0;
      from = nl + 1;
    }
    if (from < c.length && !skipping) {
      if (held + (c.length - from) > maxBytes) {
        skipping = true;
        parts = [];
        held = 0;
      } else {
        parts.push(c.subarray(from));
        held += c.length - from;
      }
    }
    if (out.length > 0) yield out;
  }
  if (skipping) yield [null];
  else if (held > 0) yield [line(Buffer.alloc(0))];
}

/** A case read by {@link plainCase}: its id and its tokens (a view of a buffer the next case reuses). */
interface PlainCase {
  id: string;
  tokens: Int32Array;
}

/** plainCase's buffer of ids: its size to begin with, and the largest kept from one case to the next. */
const SCRATCH_IDS = 1 << 14;
const MAX_KEPT_SCRATCH_IDS = 1 << 18;

/** The most digits plainCase reads in one id (below 2^31, so an Int32Array holds it). */
const PLAIN_ID_DIGITS = 9;

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
function plainCase(b: Buffer, scratch: { ids: Int32Array }): PlainCase | null {
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
  const id = b.toString("latin1", 7, i);
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

/** What `parse` says when its stdin is a terminal (it would otherwise wait without a word). */
export function terminalHint(opts: Pick<ParseCommandOptions, "input" | "batch">): string {
  const what = opts.batch ? 'JSON Lines cases {"id","tokens"}' : opts.input === "text" ? "Harmony text" : "token ids (or --input text)";
  const example =
    opts.input === "text"
      ? "echo '<|channel|>final<|message|>Hi!<|return|>' | npx harmony-sidecar parse --input text"
      : `echo '${EXAMPLE_IDS}' | npx harmony-sidecar parse`;
  return `parse: reading ${what} from the terminal: type or paste, then Ctrl+D to parse (or pipe them in: ${example})`;
}

export async function runParse(
  opts: ParseCommandOptions,
  io: { stdin: Readable; stdout: Writable; stderr: Writable },
  encoding?: HarmonyEncoding,
): Promise<number> {
  if ((io.stdin as { isTTY?: boolean }).isTTY) io.stderr.write(terminalHint(opts) + "\n");
  const enc = encoding ?? loadHarmonyEncoding();
  const vocab = new Vocabulary(enc.table);
  const defaultRole = opts.role === "none" ? null : "assistant";

  // one parser and one set of options per role, for every case of a batch
  const batchParser = new HarmonyParser(vocab);
  const batchOptions = new Map<string | null, ParserOptions>();
  const optionsFor = (role: string | null): ParserOptions => {
    let o = batchOptions.get(role);
    // wholeMessages, as parseCase asks for: it then restarts the parser with these very options
    if (o === undefined) batchOptions.set(role, (o = { ...parserOptions(opts, role), wholeMessages: true }));
    return o;
  };
  // plainCase's ids: room for a long case from the start; a buffer grown past a megabyte is not kept
  const scratch = { ids: new Int32Array(SCRATCH_IDS) };
  /** One --batch line's answer line (null for a blank line), and whether the line was refused. */
  const batchAnswer = (bytes: LineBytes, lineNo: number): { json: string; bad: boolean } | null => {
    let id: unknown = null;
    try {
      if (bytes === null) throw new InputError("line_too_long", `line ${lineNo} is longer than ${MAX_BATCH_LINE_BYTES} bytes`);
      let tokens: ArrayLike<number>;
      let role: string | null = defaultRole;
      const plain = plainCase(bytes, scratch);
      if (plain !== null) {
        id = plain.id;
        tokens = plain.tokens;
      } else {
        const line = bytes.toString("utf8");
        if (line.trim() === "") return null;
        const parsed = parseJson(line);
        if (!parsed.ok) throw new InputError(parsed.code, `line ${lineNo} is not usable JSON: ${parsed.message}`);
        const c = parsed.value;
        if (!isObj(c)) throw new InputError("bad_case", `line ${lineNo} is not a JSON object`);
        id = c.id ?? null;
        tokens = checkIds(c.tokens);
        if ("role" in c) {
          if (c.role !== null && c.role !== "assistant") {
            throw new InputError("bad_role", `line ${lineNo}: role must be "assistant" or null`);
          }
          role = c.role as string | null;
        }
      }
      const r = parseCase(vocab, tokens, optionsFor(role), undefined, batchParser);
      if (scratch.ids.length > MAX_KEPT_SCRATCH_IDS) scratch.ids = new Int32Array(SCRATCH_IDS);
      // the fields named, not spread: JSON.stringify of a spread copy costs several times as much here
      return { json: JSON.stringify({ id, messages: r.messages, first_error: r.first_error, recoveries: r.recoveries }), bad: false };
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      return { json: JSON.stringify({ id, error: { code: e.code, message: e.message } }), bad: true };
    }
  };

  if (opts.batch) {
    let bad = 0;
    let lineNo = 0;
    for await (const lines of readLineBytes(io.stdin, MAX_BATCH_LINE_BYTES)) {
      let answers = "";
      for (const line of lines) {
        lineNo++;
        const answer = batchAnswer(line, lineNo);
        if (answer === null) continue;
        if (answer.bad) bad++;
        answers += answer.json + "\n";
      }
      if (answers !== "") await writeText(io.stdout, answers);
    }
    if (bad > 0) io.stderr.write(`parse: ${bad} input line(s) rejected\n`);
    return bad > 0 ? 2 : 0;
  }

  let ids: number[];
  try {
    const text = await readAll(io.stdin);
    // a single trailing newline (as echo and editors leave) is not part of the stream
    ids = opts.input === "text" ? enc.encode(text.replace(/\r?\n$/, "")) : parseIdList(text);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    io.stderr.write(`parse: ${e.code}: ${e.message}\n`);
    return 2;
  }
  if (opts.output === "messages") {
    const r = parseCase(vocab, ids, parserOptions(opts, defaultRole));
    await writeLine(io.stdout, JSON.stringify(r));
    return 0;
  }
  const parser = new HarmonyParser(vocab, { ...parserOptions(opts, defaultRole), wholeMessages: false });
  for (const ev of [...parser.write(ids), ...parser.end()]) await writeLine(io.stdout, JSON.stringify(ev));
  return 0;
}
