/**
 * A streamed completion chunk read where its bytes lie, from a template of
 * the request's own chunks (issue #35: "the SSE reader parses in place").
 *
 * The OpenAI-style engines stream one chunk a step whose bytes are, but for
 * the step's text and ids, the bytes of the chunk before: vLLM's
 * `completion_stream_generator` names every chunk of a request with the same
 * `id`, `created` and `model` and dumps it with the same encoder (see
 * bench/front/engine.ts's header for the source). So once one chunk was
 * parsed, the next is its literal bytes with two holes: the choice's `text`
 * (a JSON string's body) and its `token_ids` (integers and commas). An event
 * whose bytes are that template's literals around a valid string body and a
 * valid list of integers parses, by the grammar alone, to the template's
 * object with those two values put in; so it is read as that, with three
 * byte comparisons, a look at a dozen bytes and no text decoded but the
 * choice's own.
 *
 * Nothing is trusted: a template is taken only when its holes, filled with
 * probe values and parsed by JSON.parse, give the template's object with
 * the probes in those two places and nowhere else; anything an event has
 * that the template does not (other bytes, whitespace, a leading zero, an
 * escape JSON refuses, an id past nine digits) is no match, and the event
 * is read as text, parsed and checked as before (its learning may take a
 * new template: the first chunk's `prompt_token_ids` differ from the rest).
 * What a match gives equals what JSON.parse gives (test/upstream/chunk-template.test.ts).
 * A request keeps a few templates ({@link MAX_SHAPES}): with `n` choices,
 * each choice's chunks differ from the others' in their index.
 */
import { isObj } from "../core/json.js";

/** How many times one request tries to learn a template (each costs a few microseconds): past it, its events are read as text. */
export const MAX_TEMPLATES = 16;

/** How many templates one request keeps: one a choice, for up to this many choices (`n`); past it the oldest goes. */
export const MAX_SHAPES = 4;

/** A template's match: other bytes stand where its literals do (another template may fit). */
const OTHER = Symbol("other");

/** The longest event learnt from: a step's chunk is a few hundred bytes; a long one (many ids) costs its parse anyway, and its proof would parse it twice more. */
export const MAX_TEMPLATE_CHARS = 4096;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const CLOSE = 0x5d;
const ZERO = 0x30;
const NINE = 0x39;

const TEXT_KEY = '"text":"';
const IDS_KEY = '"token_ids":[';

/** The literal bytes of a template: before the first hole, between the two, after the second. */
export interface Shape {
  head: Buffer;
  middle: Buffer;
  tail: Buffer;
  /** Whether the text comes first (vLLM's order), else the ids. */
  textFirst: boolean;
  /** The template's chunk and its one choice: what a match copies, with its own text and ids. */
  chunk: Record<string, unknown>;
  choice: Record<string, unknown>;
}

/**
 * Whether `parsed` is `chunk` (whose values are plain but its one choice's
 * token_ids) with `text` and `[id]` for its choice's text and ids: the same
 * keys in the same order, the same values everywhere else.
 */
function sameBut(parsed: unknown, chunk: Record<string, unknown>, choice: Record<string, unknown>, text: string, id: number): boolean {
  if (!isObj(parsed) || !sameKeys(parsed, chunk)) return false;
  for (const k in chunk) if (k !== "choices" && parsed[k] !== chunk[k]) return false;
  const choices = parsed.choices;
  if (!Array.isArray(choices) || choices.length !== 1) return false;
  const c: unknown = choices[0];
  if (!isObj(c) || !sameKeys(c, choice)) return false;
  for (const k in choice) {
    if (k === "text" ? c[k] !== text : k === "token_ids" ? !sameIds(c[k], id) : c[k] !== choice[k]) return false;
  }
  return true;
}

function sameKeys(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k, n) => k === kb[n]);
}

/** The longest literal compared byte by byte rather than through Buffer.compare (see literal()). */
const SHORT_LITERAL = 16;

const sameIds = (v: unknown, id: number) => Array.isArray(v) && v.length === 1 && v[0] === id;

/**
 * An event a template read: its template's chunk with the event's own text
 * and ids, given as they lie (a reader of the ids alone takes the template's
 * other values as they are, checked once, and never makes the chunk) or as
 * the chunk JSON.parse would give ({@link chunk}). Its text is decoded when
 * asked for (the body was checked for what JSON refuses when it was read).
 */
export class Filled {
  constructor(
    readonly shape: Shape,
    private readonly bytes: Buffer,
    private readonly at: number,
    private readonly close: number,
    /** The text decoded already (it had an escape, read by JSON.parse as it was checked), else null. */
    private readonly decoded: string | null,
    readonly ids: number[],
  ) {}

  /** The choice's text, as JSON reads it. */
  get text(): string {
    return this.decoded ?? this.bytes.toString("utf8", this.at, this.close);
  }

  /** The chunk, equal to JSON.parse of the event's text (its own objects, shared with nothing but these ids). */
  chunk(): Record<string, unknown> {
    const s = this.shape;
    return { ...s.chunk, choices: [{ ...s.choice, text: this.text, token_ids: this.ids }] };
  }
}

export class ChunkTemplate {
  /** The request's templates (a choice's chunks differ from another's in their index), the latest last; at most MAX_SHAPES. */
  private readonly shapes: Shape[] = [];
  /** The template the last match used (tried first). */
  private last = 0;
  private tries = 0;
  /** The last event read as text failed in the template's literals (not in a hole): worth learning from. */
  private missed = false;
  /** Whether the last string body scanned had an escape. */
  private escaped = false;
  /** What the last match read in its holes: where the text's body lies (and its decoding, when it had an escape), the ids. */
  private textAt = 0;
  private textClose = 0;
  private textDecoded: string | null = null;
  private holeIds: number[] = [];

  /**
   * The chunk event `bytes[start, end)` stands for, when it fits a
   * template (its chunk() equal to JSON.parse of its text); else null, and
   * the event is to be read as text.
   */
  read(bytes: Buffer, start: number, end: number): Filled | null {
    const shapes = this.shapes;
    const n = shapes.length;
    for (let k = 0; k < n; k++) {
      const i = (this.last + k) % n;
      const r = this.match(shapes[i]!, bytes, start, end);
      if (r === OTHER) continue;
      if (r === null) return null;
      this.last = i;
      return r;
    }
    // bytes no template has: worth learning from (a hole JSON would read otherwise, an escape or whitespace, is not)
    if (n > 0) this.missed = true;
    return null;
  }

  /** The chunk the event stands for by template `s`; null when a hole is not what the template reads; OTHER when other bytes stand where its literals do. */
  private match(s: Shape, bytes: Buffer, start: number, end: number): Filled | typeof OTHER | null {
    if (!this.literal(bytes, start, end, s.head)) return OTHER;
    let at = this.hole(s.textFirst, bytes, start + s.head.length, end);
    if (at === -1) return null;
    if (!this.literal(bytes, at, end, s.middle)) return OTHER;
    at = this.hole(!s.textFirst, bytes, at + s.middle.length, end);
    if (at === -1) return null;
    if (end - at !== s.tail.length || !this.literal(bytes, at, end, s.tail)) return OTHER;
    return new Filled(s, bytes, this.textAt, this.textClose, this.textDecoded, this.holeIds);
  }

  /**
   * The text hole (`text`) or the ids hole from `at`: checked and marked
   * (textAt, textClose, textDecoded) or read into holeIds, and where it
   * ends; -1 when it is not what JSON would read there.
   */
  private hole(text: boolean, bytes: Buffer, at: number, end: number): number {
    if (!text) {
      const ids: number[] = [];
      this.holeIds = ids;
      return this.ids(bytes, at, end, ids);
    }
    const close = this.stringEnd(bytes, at, end);
    if (close === -1) return -1;
    // (a body without an escape is decoded when it is asked for: JSON reads any other bytes, as utf-8 decoding does)
    let decoded: string | null = null;
    if (this.escaped) {
      decoded = this.unescaped(bytes, at, close);
      if (decoded === null) return -1;
    }
    this.textAt = at;
    this.textClose = close;
    this.textDecoded = decoded;
    return close;
  }

  /** Whether learn() would learn from an event of `length` characters read as text now. */
  wouldLearn(length: number): boolean {
    return !((this.shapes.length > 0 && !this.missed) || this.tries >= MAX_TEMPLATES || length > MAX_TEMPLATE_CHARS);
  }

  /**
   * An event read as text (`data`, parsed to `chunk`): a template is
   * learnt from it when none fits yet and the request has learnt fewer than
   * {@link MAX_TEMPLATES}.
   */
  learn(data: string, chunk: unknown): void {
    if (!this.wouldLearn(data.length)) return;
    const shapes = this.shapes;
    this.tries++;
    const shape = ChunkTemplate.shapeOf(data, chunk);
    if (shape === null) return;
    if (shapes.length >= MAX_SHAPES) shapes.shift();
    shapes.push(shape);
    this.last = shapes.length - 1;
    this.missed = false;
  }

  /** The template `data` (parsed to `chunk`) makes, or null when it has not the two holes or they do not stand where they seem to. */
  static shapeOf(data: string, chunk: unknown): Shape | null {
    if (!isObj(chunk) || !Array.isArray(chunk.choices) || chunk.choices.length !== 1) return null;
    const choice: unknown = chunk.choices[0];
    if (!isObj(choice) || typeof choice.text !== "string" || !Array.isArray(choice.token_ids)) return null;
    // a choice's last chunk (its finish) is no template: nothing like it follows; nor is an error's
    // (as the SSE reader tells one: ./sse.ts's run(), which a filled event's reader skips)
    if (chunk.error) return null;
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) return null;
    // every other value a plain one (a match copies them: no object may be shared between two chunks)
    for (const k in chunk) if (k !== "choices" && typeof chunk[k] === "object" && chunk[k] !== null) return null;
    for (const k in choice) if (k !== "token_ids" && typeof choice[k] === "object" && choice[k] !== null) return null;
    const t = data.indexOf(TEXT_KEY);
    const i = data.indexOf(IDS_KEY);
    if (t === -1 || i === -1 || data.indexOf(TEXT_KEY, t + 1) !== -1 || data.indexOf(IDS_KEY, i + 1) !== -1) return null;
    const textAt = t + TEXT_KEY.length;
    const idsAt = i + IDS_KEY.length;
    const textEnd = data.indexOf('"', textAt);
    const idsEnd = data.indexOf("]", idsAt);
    // (a text with an escape is no template: its first quote may not be its end)
    if (textEnd === -1 || idsEnd === -1) return null;
    const escape = data.indexOf("\\", textAt);
    if (escape !== -1 && escape < textEnd) return null;
    const textFirst = textAt < idsAt;
    const [a, aEnd, b, bEnd] = textFirst ? [textAt, textEnd, idsAt, idsEnd] : [idsAt, idsEnd, textAt, textEnd];
    if (aEnd > b) return null;
    const head = data.slice(0, a);
    const middle = data.slice(aEnd, b);
    const tail = data.slice(bEnd);
    // the proof: the holes filled with probes other than what they hold, and other than the values the chunk has
    // (a key written twice: the hole may be in the copy JSON.parse drops), parse to the chunk with the probes in
    // its text and ids, and nowhere else
    const heldText = data.slice(textAt, textEnd);
    const text = ["x", "y", "z"].find((p) => p !== heldText && p !== choice.text)!;
    const heldIds = data.slice(idsAt, idsEnd);
    const ids = choice.token_ids as unknown[];
    const id = [7, 8, 9].find((p) => String(p) !== heldIds && ids[0] !== p)!;
    let parsed: unknown;
    try {
      parsed = JSON.parse(textFirst ? `${head}${text}${middle}${id}${tail}` : `${head}${id}${middle}${text}${tail}`);
    } catch {
      return null;
    }
    if (!sameBut(parsed, chunk, choice, text, id)) return null;
    // (copies: the chunk given goes on to its reader, which is not to change what later chunks are read as)
    return {
      head: Buffer.from(head),
      middle: Buffer.from(middle),
      tail: Buffer.from(tail),
      textFirst,
      chunk: { ...chunk },
      choice: { ...choice },
    };
  }

  private literal(bytes: Buffer, at: number, end: number, lit: Buffer): boolean {
    const n = lit.length;
    if (end - at < n) return false;
    // a short literal (a chunk's tail, `]}]}`) byte by byte: Buffer.compare's checks and call into C++ cost ~100 ns
    // whatever the length, a loop of a few bytes ~20 (the head's hundred-odd bytes are cheaper through compare)
    if (n <= SHORT_LITERAL) {
      for (let k = 0; k < n; k++) if (bytes[at + k] !== lit[k]) return false;
      return true;
    }
    return bytes.compare(lit, 0, n, at, at + n) === 0;
  }

  /** Where the string body starting at `at` ends (its closing quote), or -1 (a byte JSON refuses in a string, or no end). */
  private stringEnd(bytes: Buffer, at: number, end: number): number {
    this.escaped = false;
    for (let k = at; k < end; k++) {
      const b = bytes[k]!;
      if (b === QUOTE) return k;
      if (b < 0x20) return -1;
      if (b === BACKSLASH) {
        this.escaped = true;
        k++; // the escaped byte is checked when the text is decoded
      }
    }
    return -1;
  }

  /** The string body `bytes[at, close)` with an escape (just scanned by stringEnd) as JSON reads it, or null (an escape it refuses). */
  private unescaped(bytes: Buffer, at: number, close: number): string | null {
    try {
      return JSON.parse(bytes.toString("utf8", at - 1, close + 1)) as string;
    } catch {
      return null;
    }
  }

  /** The integers from `at` up to a `]`, pushed on `out`: where the `]` is, or -1 (anything but digits and single commas, a leading zero, more than 9 digits). */
  private ids(bytes: Buffer, at: number, end: number, out: number[]): number {
    let k = at;
    if (k < end && bytes[k] === CLOSE) return k;
    for (;;) {
      const first = k;
      let v = 0;
      while (k < end) {
        const b = bytes[k]!;
        if (b < ZERO || b > NINE) break;
        v = v * 10 + (b - ZERO);
        k++;
      }
      const digits = k - first;
      if (digits === 0 || digits > 9 || (digits > 1 && bytes[first] === ZERO) || k >= end) return -1;
      out.push(v);
      const b = bytes[k];
      if (b === CLOSE) return k;
      if (b !== COMMA) return -1;
      k++;
    }
  }
}
