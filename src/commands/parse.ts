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
import { parseJson } from "../core/json.js";
import { fstatSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Readable, Writable } from "node:stream";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import {
  BatchCases,
  idsProblem,
  MAX_BATCH_LINE_BYTES,
  unitOfLines,
  type BatchPart,
  type BatchUnit,
  type LineBytes,
} from "../core/batch.js";
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
  const problem = idsProblem(v);
  if (problem !== null) throw new InputError(problem.code, problem.message);
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

export { MAX_BATCH_LINE_BYTES };

/** A line of input: its text, or null when it was longer than the bound (its bytes were not kept). */
type Line = string | null;

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
async function* readLineBytes(input: Readable, maxBytes: number): AsyncGenerator<(Buffer | null)[]> {
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
    const out: (Buffer | null)[] = [];
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
  tuning: BatchTuning = BATCH_TUNING,
): Promise<number> {
  if ((io.stdin as { isTTY?: boolean }).isTTY) io.stderr.write(terminalHint(opts) + "\n");
  const enc = encoding ?? loadHarmonyEncoding({ shared: opts.batch });
  const defaultRole = opts.role === "none" ? null : "assistant";
  if (opts.batch) return runBatch(opts, io, enc, defaultRole, tuning);

  const vocab = new Vocabulary(enc.table);
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

/** When `--batch` takes a helper thread, and how much it gives it at a time. */
export interface BatchTuning {
  /** Input read past which a helper thread is started (a small batch is over before one would be ready). */
  helperAfterBytes: number;
  /** The most of one unit of work (on either thread), in bytes: a unit is what one read of the input gave, cut at the first line past this. */
  unitBytes: number;
  /** Whether a helper may be started at all (one core: no). */
  helper: boolean;
}

/**
 * A helper thread costs ~200 ms to start while the main thread parses beside
 * it (its modules and its JIT's warm-up on a core the main thread's GC also
 * uses), and two threads parse ~1.4x as fast as one on this 2-core machine:
 * it pays past ~3M tokens (~16 MiB of cases), measured. 20M tokens: 1.85-1.99
 * s with it, 2.60-2.72 s without; 2M tokens: 0.53 s with it, 0.40 s without.
 */
export const BATCH_TUNING: BatchTuning = {
  helperAfterBytes: 16 << 20,
  unitBytes: 256 * 1024,
  helper: availableParallelism() > 1,
};

/** The units a helper thread holds at most (one at work, one waiting): the main thread parses the rest. */
const HELPER_UNITS = 2;

/** `parse --batch`'s helper thread (workers/batch.ts): units in, their answers back in order. */
class BatchHelper {
  private readonly worker: Worker;
  /** Where its answers come: read at once when a unit is to be given (a loop busy with a fast pipe delivers them late). */
  private readonly answers: MessagePort;
  private readonly waiting: { resolve: (p: BatchPart) => void; reject: (e: Error) => void }[] = [];
  private failed: Error | null = null;
  private ready = false;

  constructor(enc: HarmonyEncoding, base: ParserOptions, defaultRole: string | null) {
    const { port1, port2 } = new MessageChannel();
    this.answers = port1;
    this.worker = new Worker(new URL("../../workers/batch.js", import.meta.url), {
      workerData: { table: enc.table, base, defaultRole, answers: port2 },
      transferList: [port2],
    });
    port1.on("message", (p: BatchPart | null) => this.take(p));
    // a bug (the cases never throw on input): every unit it holds fails the batch
    this.worker.on("error", (e) => this.fail(e));
    this.worker.on("exit", (code) => this.fail(new Error(`parse --batch's helper thread exited (${code})`)));
  }

  /** Its first message says it is ready (its modules loaded): until then the main thread parses every unit. */
  private take(p: BatchPart | null): void {
    if (p === null) this.ready = true;
    else this.waiting.shift()?.resolve(p);
  }

  private fail(e: Error): void {
    this.failed ??= e;
    for (const w of this.waiting.splice(0)) w.reject(this.failed);
  }

  /** Whether it can take a unit now. */
  get free(): boolean {
    for (let m = receiveMessageOnPort(this.answers); m !== undefined; m = receiveMessageOnPort(this.answers)) {
      this.take(m.message as BatchPart | null);
    }
    return this.ready && this.failed === null && this.waiting.length < HELPER_UNITS;
  }

  answer(u: BatchUnit): Promise<BatchPart> {
    return new Promise<BatchPart>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.worker.postMessage(u, [u.bytes.buffer as ArrayBuffer]);
    });
  }

  close(): void {
    this.answers.close();
    this.worker.removeAllListeners("exit");
    void this.worker.terminate();
  }
}

/**
 * `parse --batch`: the lines read as they arrive, in units of about
 * `unitBytes`; past `helperAfterBytes` of input (and with a second core) a
 * helper thread takes a unit whenever it holds fewer than HELPER_UNITS, the
 * main thread parses the others, and the answers are written in input order,
 * all that is ready in one write. A bad line never aborts the batch: it gets
 * an `error` object with a code, and the exit status is 2 at the end.
 */
async function runBatch(
  opts: ParseCommandOptions,
  io: { stdin: Readable; stdout: Writable; stderr: Writable },
  enc: HarmonyEncoding,
  defaultRole: string | null,
  tuning: BatchTuning,
): Promise<number> {
  const base = parserOptions(opts, null);
  const cases = new BatchCases(new Vocabulary(enc.table), base, defaultRole);
  /** A helper for a batch of `bytes` so far, when it is worth one. */
  const helperFor = (bytes: number) => (tuning.helper && bytes > tuning.helperAfterBytes ? new BatchHelper(enc, base, defaultRole) : null);
  // a file's size is known now: a large one gets its helper from the start
  let helper: BatchHelper | null = helperFor(inputBytes(io.stdin));
  // the units' answers in input order: a helper's while it works on them, then what it gave
  const answers: (BatchPart | Promise<BatchPart>)[] = [];
  let head = 0;
  let bad = 0;
  const give = (lines: LineBytes[], firstLine: number) => {
    if (helper?.free) {
      const at = answers.length;
      const p = helper.answer(unitOfLines(lines, firstLine));
      answers.push(p);
      // settled entries are replaced by what they gave (this runs before anything that awaits the same promise)
      p.then(
        (part) => void (answers[at] = part),
        () => undefined,
      );
    } else answers.push(cases.answerLines(lines, firstLine));
  };
  /** Write the answers ready at the head, in one write; with `all`, wait for the rest and write them too. */
  const flush = async (all: boolean) => {
    for (;;) {
      let text = "";
      while (head < answers.length) {
        const a = answers[head]!;
        if (a instanceof Promise) break;
        answers[head++] = EMPTY_PART;
        text += a.text;
        bad += a.bad;
      }
      if (text !== "") await writeText(io.stdout, text);
      if (!all || head >= answers.length) return;
      await answers[head];
    }
  };
  try {
    let unit: LineBytes[] = [];
    let unitBytes = 0;
    let lineNo = 0;
    let read = 0;
    /** The unit so far is given; the next begins after line `lineNo`. */
    const cut = () => {
      give(unit, lineNo - unit.length + 1);
      unit = [];
      unitBytes = 0;
    };
    for await (const lines of readLineBytes(io.stdin, MAX_BATCH_LINE_BYTES)) {
      for (const line of lines) {
        lineNo++;
        unit.push(line);
        const size = (line === null ? 0 : line.length) + 1;
        unitBytes += size;
        read += size;
        if (unitBytes >= tuning.unitBytes) cut();
      }
      // what this read gave goes now, not when a unit is full: a client that writes a case and waits for its answer gets it
      if (unit.length > 0) cut();
      helper ??= helperFor(read);
      await flush(false);
    }
    await flush(true);
  } finally {
    helper?.close();
  }
  if (bad > 0) io.stderr.write(`parse: ${bad} input line(s) rejected\n`);
  return bad > 0 ? 2 : 0;
}

const EMPTY_PART: BatchPart = { text: "", bad: 0 };

/** The size of the file `input` reads (stdin redirected from a file), else 0 (a pipe, a terminal, a stream of a test's). */
function inputBytes(input: Readable): number {
  const fd = (input as { fd?: unknown }).fd;
  if (typeof fd !== "number") return 0;
  try {
    const st = fstatSync(fd);
    return st.isFile() ? st.size : 0;
  } catch {
    return 0;
  }
}
