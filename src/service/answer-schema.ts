/**
 * A response format's JSON Schema (`response_format`, Responses'
 * `text.format`), compiled and checked with Ajv; shared by the render
 * thread (a schema Ajv cannot use is the client's 400 before anything is
 * generated: workers/render.ts) and the answer-check thread (a finished
 * answer checked against it: workers/check.ts).
 *
 * A schema is untrusted input, and its `pattern`s are regular expressions:
 * V8's own engine backtracks (`^(a+)+$` on 40 characters runs for seconds).
 * So every pattern runs on re2js (RE2's linear-time automata in JavaScript),
 * translated from ECMAScript syntax by its `translateRegExp`; a pattern that
 * needs backtracking (a lookahead, a backreference) does not compile, and
 * the schema is refused for it. V8's linear engine (`--enable-experimental-
 * regexp-engine`, the `l` flag) is not used: on Node 20 to 24 it
 * refuses the `u` flag Ajv gives every pattern and any counted repetition
 * over 16 (`{1,64}`), and without `u` it reads `\p{L}` as the letter p
 * (bench/RESULTS.md, "Answer checks").
 */
import { Ajv, type ValidateFunction } from "ajv";
import { RE2JS } from "re2js";
import { parseJson } from "../core/json.js";

/** Whether an answer is JSON that matches its schema, and if not, why (at most 300 characters). */
export type AnswerCheck = { ok: true } | { ok: false; reason: string };

/** Schemas compiled, by their JSON text; the oldest goes past this many. */
const MAX_COMPILED = 64;

/** Ajv's `code.regExp`: a pattern compiled by re2js (linear time), with a name Ajv can key its scope by. */
function linearRegExp(pattern: string): { test(s: string): boolean; toString(): string } {
  const re = RE2JS.compile(RE2JS.translateRegExp(pattern), RE2JS.LOOKBEHINDS);
  return { test: (s: string) => re.test(s), toString: () => `re2js:${pattern}` };
}
linearRegExp.code = "re2js";

/** One thread's Ajv and its compiled schemas. */
export class AnswerSchemas {
  // strict: false: OpenAI's structured-output schemas carry keywords (e.g. `strict`) Ajv's strict mode refuses
  private readonly ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false, logger: false, code: { regExp: linearRegExp } });
  private readonly compiled = new Map<string, ValidateFunction>();

  /** The schema's validator (compiled once, kept among the last MAX_COMPILED); throws when Ajv cannot use it. */
  compile(schema: unknown): ValidateFunction {
    const key = JSON.stringify(schema);
    let v = this.compiled.get(key);
    if (v === undefined) {
      v = this.ajv.compile(schema as object);
      if (this.compiled.size >= MAX_COMPILED) this.compiled.delete(this.compiled.keys().next().value!);
      this.compiled.set(key, v);
      // Ajv keeps schemas with an $id by it: a second compile of the same $id would fail
      this.ajv.removeSchema(schema as object);
    }
    return v;
  }

  /** Whether `text` is JSON that matches `schema`; never throws. */
  check(schema: unknown, text: string): AnswerCheck {
    try {
      const parsed = parseJson(text.trim());
      if (!parsed.ok) return { ok: false, reason: `the answer is not JSON: ${parsed.message}`.slice(0, 300) };
      let validate: ValidateFunction;
      try {
        validate = this.compile(schema);
      } catch (e) {
        return { ok: false, reason: `the schema cannot be used: ${(e as Error).message}`.slice(0, 300) };
      }
      if (validate(parsed.value)) return { ok: true };
      return { ok: false, reason: `the answer does not match the schema: ${this.ajv.errorsText(validate.errors)}`.slice(0, 300) };
    } catch (e) {
      return { ok: false, reason: `the check failed: ${(e as Error).message}`.slice(0, 300) };
    }
  }
}
