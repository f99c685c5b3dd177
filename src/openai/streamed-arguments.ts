/**
 * A function call's streamed arguments, so that what a client assembles
 * from the deltas equals the call's `tool_call_end` arguments: the text as
 * generated when it is JSON, else its rule-12 repair (docs/resilience.md;
 * the shapes are src/core/arguments.ts's). The parser's deltas stay as
 * generated; Chat's `delta.tool_calls[].function.arguments` and Responses'
 * `response.function_call_arguments.delta` are what clients concatenate
 * (the `openai` package's ChatCompletionStream and ResponseAccumulator,
 * the Agents SDK's Chat stream, the AI SDK's Chat model), and a streamed
 * text cannot be taken back.
 *
 * How: the deltas are passed on as they come while the text so far can
 * still be the beginning of a JSON text as generated; from the first
 * character where it cannot, the rest is held, and at `tool_call_end` what
 * the repaired arguments have beyond the streamed text is sent as one
 * delta. Every repair keeps such a beginning (checked by
 * test/openai/streamed-arguments.test.ts for every shape):
 * - over-escaped `{\"a\":1}`: the beginning is `{`, the repair `{"a":1}`;
 * - a code fence or a leading `json` word: no beginning (nothing streams);
 * - trailing junk after a whole value (`{"a":1} commentary`, `{"a":1}}`):
 *   the beginning is the value, which is the repair;
 * - closing brackets missing at the end: the repair appends them.
 * Two cases need holding on top: whitespace after the streamed text
 * outside a string waits for the next character that is not whitespace (a
 * repair drops trailing whitespace), and arguments that start with
 * whitespace are held whole (a repair drops it, JSON as generated keeps it).
 *
 * The cost: well-formed arguments stream as generated, whitespace between
 * JSON tokens a character late; a call that stops being JSON (a repairable
 * shape, or text nothing repairs) arrives from that point in one delta when
 * the call ends. Past MAX_STREAMED_ARGUMENT_CHARS the rest is held too
 * (tool_call_end cuts arguments at MAX_ARGUMENT_BYTES).
 *
 * Pure and bounded: one pass over each delta, an explicit stack (no
 * recursion), at most MAX_STREAMED_ARGUMENT_CHARS sent and
 * MAX_ARGUMENT_BYTES held characters kept.
 */
import { MAX_ARGUMENT_BYTES } from "../core/parser.js";

/** Argument text streamed before the rest of a call is held: a quarter of what tool_call_end keeps, so the cut there never falls inside it. */
export const MAX_STREAMED_ARGUMENT_CHARS = MAX_ARGUMENT_BYTES / 4;
/** Nesting deeper than this is held, not streamed (the scan's stack stays small). */
const MAX_DEPTH = 512;

// the scan's states (the JSON grammar of RFC 8259, one character at a time)
const START = 0; // the first character: a value, no whitespace
const VALUE = 1; // a value (after `:`, or `,` in an array)
const ARRAY_FIRST = 2; // after `[`: a value or `]`
const OBJECT_FIRST = 3; // after `{`: a key or `}`
const KEY = 4; // after `,` in an object: a key
const COLON = 5; // after a key
const AFTER = 6; // after a value in a container: `,` or its closer
const END = 7; // after the top-level value: whitespace only
const STRING = 8;
const ESCAPE = 9;
const UNICODE = 10; // `\u`: `hex` more hex digits
const MINUS = 11; // `-`: a digit
const ZERO = 12; // a leading 0: `.`, an exponent, or the number's end
const INT = 13;
const DOT = 14; // `.`: a digit
const FRAC = 15;
const EXP = 16; // `e`: a sign or a digit
const EXP_SIGN = 17; // a digit
const EXP_DIGITS = 18;
const LITERAL = 19; // inside true / false / null
const DEAD = 20; // cannot be JSON any more

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

/** One call's arguments on their way to a client: `push` each delta, then `end` (tool_call_end) or `flush` (the call was cut short). */
export class StreamedArguments {
  /** The text sent so far (what the client holds), as the pieces sent (kept as they are: no concatenation per delta). */
  private readonly sent: string[] = [];
  private sentLength = 0;
  /** Received, not sent yet: whitespace between tokens, or once the text cannot be JSON, all of it. */
  private held = "";
  private done = false;
  /** The repaired arguments did not start with the streamed text (not expected: every repair keeps it); nothing more was sent. */
  diverged = false;
  // the scan
  private state = START;
  /** Open containers, `{` or `[` char codes. */
  private readonly stack: number[] = [];
  private string: "key" | "value" = "value";
  private hex = 0;
  private literal = "";
  private literalAt = 0;

  /** Whether the call is settled (`end` or `flush` was called). */
  get settled(): boolean {
    return this.done;
  }

  /** A delta of the call as generated; returns what to send now ("" for nothing). */
  push(text: string): string {
    if (this.done || text === "") return "";
    if (this.state === DEAD) {
      this.hold(text);
      return "";
    }
    const n = text.length;
    // of `text`, the characters up to here may be sent (and the whitespace held before them)
    let ready = 0;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      // most of a call's text is inside strings: read without the step's dispatch
      if (this.state === STRING && c >= 0x20 && c !== 0x22 && c !== 0x5c) ready = i + 1;
      else if (this.step(c)) ready = i + 1;
      else if (this.state === DEAD) break;
    }
    if (ready === 0) {
      this.hold(text);
      return "";
    }
    let out = this.held + (ready === n ? text : text.slice(0, ready));
    let rest = ready === n ? "" : text.slice(ready);
    const room = MAX_STREAMED_ARGUMENT_CHARS - this.sentLength;
    if (out.length > room) {
      let k = Math.max(0, room);
      // never split a surrogate pair
      if (k > 0 && isHighSurrogate(out.charCodeAt(k - 1))) k--;
      rest = out.slice(k) + rest;
      out = out.slice(0, k);
      this.state = DEAD;
    }
    this.held = rest;
    this.capHeld();
    this.send(out);
    return out;
  }

  /**
   * The call's whole arguments (tool_call_end's, repaired or not): returns
   * what they have beyond the streamed text. They start with it by
   * construction; if they ever did not, nothing more is sent (`diverged`):
   * a sent text is never taken back.
   */
  end(args: string): string {
    if (this.done) return "";
    this.done = true;
    this.held = "";
    let at = 0;
    for (const piece of this.sent) {
      if (!args.startsWith(piece, at)) {
        this.diverged = true;
        return "";
      }
      at += piece.length;
    }
    return args.slice(at);
  }

  /** The call ended with no tool_call_end (cut short by a length limit or an abort): the held text as generated. */
  flush(): string {
    if (this.done) return "";
    this.done = true;
    const rest = this.held;
    this.held = "";
    return rest;
  }

  private send(piece: string): void {
    if (piece === "") return;
    this.sent.push(piece);
    this.sentLength += piece.length;
  }

  private hold(text: string): void {
    if (this.held.length >= MAX_ARGUMENT_BYTES) return; // full: see capHeld
    this.held += text;
    this.capHeld();
  }

  /** Held text past MAX_ARGUMENT_BYTES characters is dropped: only `flush` (a call cut short) would send it, and tool_call_end keeps no more. */
  private capHeld(): void {
    if (this.held.length <= MAX_ARGUMENT_BYTES) return;
    let n = MAX_ARGUMENT_BYTES;
    if (isHighSurrogate(this.held.charCodeAt(n - 1))) n--;
    this.held = this.held.slice(0, n);
  }

  /** One character: advances the scan; returns whether the text up to it may be sent (false for whitespace between tokens). */
  private step(c: number): boolean {
    for (;;) {
      switch (this.state) {
        case START:
          if (isWs(c)) return this.die();
          return this.value(c);
        case VALUE:
          if (isWs(c)) return false;
          return this.value(c);
        case ARRAY_FIRST:
          if (isWs(c)) return false;
          if (c === 0x5d) return this.close(0x5b);
          return this.value(c);
        case OBJECT_FIRST:
          if (isWs(c)) return false;
          if (c === 0x7d) return this.close(0x7b);
          if (c !== 0x22) return this.die();
          this.state = STRING;
          this.string = "key";
          return true;
        case KEY:
          if (isWs(c)) return false;
          if (c !== 0x22) return this.die();
          this.state = STRING;
          this.string = "key";
          return true;
        case COLON:
          if (isWs(c)) return false;
          if (c !== 0x3a) return this.die();
          this.state = VALUE;
          return true;
        case AFTER: {
          if (isWs(c)) return false;
          const top = this.stack[this.stack.length - 1]!;
          if (c === 0x2c) {
            this.state = top === 0x7b ? KEY : VALUE;
            return true;
          }
          if ((top === 0x7b && c === 0x7d) || (top === 0x5b && c === 0x5d)) return this.close(top);
          return this.die();
        }
        case END:
          if (isWs(c)) return false;
          return this.die();
        case STRING:
          if (c === 0x22) {
            if (this.string === "key") this.state = COLON;
            else this.afterValue();
          } else if (c === 0x5c) this.state = ESCAPE;
          else if (c < 0x20) return this.die();
          return true;
        case ESCAPE:
          if (c === 0x75) {
            this.state = UNICODE;
            this.hex = 4;
          } else if (c === 0x22 || c === 0x5c || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74)
            this.state = STRING;
          else return this.die();
          return true;
        case UNICODE:
          if (!isHex(c)) return this.die();
          if (--this.hex === 0) this.state = STRING;
          return true;
        case MINUS:
          if (c === 0x30) this.state = ZERO;
          else if (isDigit(c)) this.state = INT;
          else return this.die();
          return true;
        case ZERO:
          if (c === 0x2e) this.state = DOT;
          else if (c === 0x65 || c === 0x45) this.state = EXP;
          else {
            this.afterValue();
            continue; // the number ended: the character is read after it
          }
          return true;
        case INT:
          if (isDigit(c)) return true;
          if (c === 0x2e) this.state = DOT;
          else if (c === 0x65 || c === 0x45) this.state = EXP;
          else {
            this.afterValue();
            continue;
          }
          return true;
        case DOT:
          if (!isDigit(c)) return this.die();
          this.state = FRAC;
          return true;
        case FRAC:
          if (isDigit(c)) return true;
          if (c === 0x65 || c === 0x45) this.state = EXP;
          else {
            this.afterValue();
            continue;
          }
          return true;
        case EXP:
          if (c === 0x2b || c === 0x2d) this.state = EXP_SIGN;
          else if (isDigit(c)) this.state = EXP_DIGITS;
          else return this.die();
          return true;
        case EXP_SIGN:
          if (!isDigit(c)) return this.die();
          this.state = EXP_DIGITS;
          return true;
        case EXP_DIGITS:
          if (isDigit(c)) return true;
          this.afterValue();
          continue;
        case LITERAL:
          if (c !== this.literal.charCodeAt(this.literalAt)) return this.die();
          if (++this.literalAt === this.literal.length) this.afterValue();
          return true;
        default:
          return false;
      }
    }
  }

  /** The first character of a value. */
  private value(c: number): boolean {
    if (c === 0x7b || c === 0x5b) {
      if (this.stack.length >= MAX_DEPTH) return this.die();
      this.stack.push(c);
      this.state = c === 0x7b ? OBJECT_FIRST : ARRAY_FIRST;
    } else if (c === 0x22) {
      this.state = STRING;
      this.string = "value";
    } else if (c === 0x2d) this.state = MINUS;
    else if (c === 0x30) this.state = ZERO;
    else if (isDigit(c)) this.state = INT;
    else if (c === 0x74 || c === 0x66 || c === 0x6e) {
      this.literal = c === 0x74 ? "true" : c === 0x66 ? "false" : "null";
      this.literalAt = 1;
      this.state = LITERAL;
    } else return this.die();
    return true;
  }

  private close(open: number): boolean {
    if (this.stack.pop() !== open) return this.die();
    this.afterValue();
    return true;
  }

  private afterValue(): void {
    this.state = this.stack.length === 0 ? END : AFTER;
  }

  private die(): false {
    this.state = DEAD;
    return false;
  }
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
