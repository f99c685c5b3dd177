/**
 * The render worker thread, one job at a time:
 * - renders: chat requests (their reasoning already restored on the
 *   service's thread) in, Harmony prompt ids and text out. Tokenizing is the
 *   costly part of a render; here it never holds up the thread that answers
 *   every connection and /healthz. A request with a JSON Schema response
 *   format also has its schema compiled here, so a schema Ajv cannot use is
 *   the client's 400 before anything is generated;
 * - answer checks: an answer asked for as JSON (`response_format`) checked
 *   against its schema with Ajv. A schema is untrusted input (its `pattern`s
 *   are regular expressions): it runs here, under the render deadline.
 * It reads its own encoder when it starts (the vocabulary's table file), and
 * says when it is ready (./deadline-worker.ts): a job's deadline starts then.
 */
import { parentPort } from "node:worker_threads";
import { Ajv, type ValidateFunction } from "ajv";
import { parseJson } from "../core/json.js";
import { renderRestored, type RenderOutcome, type Restored } from "../openai/render.js";
import { checkAnswerFormat } from "../openai/request.js";
import { loadHarmonyEncoding } from "../vocab/index.js";
import { READY } from "./deadline-worker.js";

export type RenderJob =
  | { id: number; kind: "render"; request: unknown; restored: Restored[]; answer?: "json" }
  | { id: number; kind: "check"; schema: unknown; text: string };

/** Whether an answer is JSON that matches its schema, and if not, why (at most 300 characters). */
export type AnswerCheck = { ok: true } | { ok: false; reason: string };

/**
 * A render's outcome; for a render asked for as an answer (`answer: "json"`),
 * a success is its HTTP body instead (`{"ids", "text", "restored"}` as UTF-8
 * JSON, made here and transferred, not copied), so that serialising a large
 * prompt never holds up the service's thread.
 */
export type RenderDone = { id: number; outcome: RenderOutcome } | { id: number; body: Uint8Array } | { id: number; check: AnswerCheck };

/** Schemas compiled, by their JSON text; the oldest goes past this many. */
const MAX_COMPILED = 64;

const enc = loadHarmonyEncoding();
// strict: false: OpenAI's structured-output schemas carry keywords (e.g. `strict`) Ajv's strict mode refuses
const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
const compiled = new Map<string, ValidateFunction>();

function compile(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let v = compiled.get(key);
  if (v === undefined) {
    v = ajv.compile(schema as object);
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, v);
    // Ajv keeps schemas with an $id by it: a second compile of the same $id would fail
    ajv.removeSchema(schema as object);
  }
  return v;
}

function render(request: unknown, restored: Restored[]): RenderOutcome {
  const outcome = renderRestored(request, restored, enc.encodeOrdinary);
  if (!outcome.ok) return outcome;
  const format = checkAnswerFormat(request);
  if (format.ok && format.format !== null) {
    try {
      compile(format.format.schema);
    } catch (e) {
      const message = `the response format's schema cannot be used: ${(e as Error).message}`.slice(0, 300);
      return { ok: false, error: { code: "bad_response_format", message, path: "response_format.json_schema.schema" } };
    }
  }
  return outcome;
}

function check(schema: unknown, text: string): AnswerCheck {
  const parsed = parseJson(text.trim());
  if (!parsed.ok) return { ok: false, reason: `the answer is not JSON: ${parsed.message}`.slice(0, 300) };
  let validate: ValidateFunction;
  try {
    validate = compile(schema);
  } catch (e) {
    return { ok: false, reason: `the schema cannot be used: ${(e as Error).message}`.slice(0, 300) };
  }
  if (validate(parsed.value)) return { ok: true };
  return { ok: false, reason: `the answer does not match the schema: ${ajv.errorsText(validate.errors)}`.slice(0, 300) };
}

parentPort?.on("message", (job: RenderJob) => {
  if (job.kind === "check") {
    let c: AnswerCheck;
    try {
      c = check(job.schema, job.text);
    } catch (e) {
      c = { ok: false, reason: `the check failed: ${(e as Error).message}`.slice(0, 300) };
    }
    parentPort!.postMessage({ id: job.id, check: c } satisfies RenderDone);
    return;
  }
  let outcome: RenderOutcome;
  try {
    outcome = render(job.request, job.restored);
  } catch (e) {
    // a bug, not bad input (the renderer refuses bad input with a code): said, not thrown
    outcome = { ok: false, error: { code: "bad_request", message: `the render failed: ${(e as Error).message}`.slice(0, 300), path: "" } };
  }
  if (outcome.ok && job.answer === "json") {
    const body = Buffer.from(JSON.stringify({ ids: outcome.ids, text: outcome.text, restored: outcome.restored }));
    const bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    // a large body has an ArrayBuffer of its own (Buffer's pool is for small ones): handed over, not copied
    parentPort!.postMessage({ id: job.id, body: bytes } satisfies RenderDone, body.byteLength > 4096 ? [body.buffer] : []);
    return;
  }
  parentPort!.postMessage({ id: job.id, outcome } satisfies RenderDone);
});

parentPort?.postMessage(READY);
