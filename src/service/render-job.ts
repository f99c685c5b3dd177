/**
 * A render job, as the render thread (workers/render.ts) does it: a chat
 * request (its reasoning already restored on the service's thread) in,
 * Harmony prompt ids and text out. Tokenizing is the costly part of a
 * render; on its own thread it never holds up the thread that answers every
 * connection and /healthz. A request with a JSON Schema response format
 * also has its schema compiled here (./answer-schema.ts), so a schema Ajv
 * cannot use is the client's 400 before anything is generated; the finished
 * answer is checked against it on a thread of its own (workers/check.ts).
 */
import { renderRestored, type RenderOutcome, type Restored } from "../openai/render.js";
import { checkAnswerFormat } from "../openai/request.js";
import { loadHarmonyEncoding } from "../vocab/index.js";
import { AnswerSchemas } from "./answer-schema.js";

export type RenderJob = { id: number; kind: "render"; request: unknown; restored: Restored[]; answer?: "json" };

/**
 * A render's outcome; for a render asked for as an answer (`answer: "json"`),
 * a success is its HTTP body instead (`{"ids", "text", "restored"}` as UTF-8
 * JSON, made on the render thread and transferred, not copied), so that
 * serialising a large prompt never holds up the service's thread.
 */
export type RenderDone = { id: number; outcome: RenderOutcome } | { id: number; body: Uint8Array };

/** A thread's renderer: its encoder (read from the vocabulary's table file) and compiled schemas, made once. */
export function createRenderJobs(): (job: RenderJob) => { done: RenderDone; transfer: ArrayBuffer[] } {
  const enc = loadHarmonyEncoding();
  const schemas = new AnswerSchemas();

  const render = (request: unknown, restored: Restored[]): RenderOutcome => {
    const outcome = renderRestored(request, restored, enc.encodeOrdinary);
    if (!outcome.ok) return outcome;
    const format = checkAnswerFormat(request);
    if (format.ok && format.format !== null) {
      try {
        schemas.compile(format.format.schema);
      } catch (e) {
        const message = `the response format's schema cannot be used: ${(e as Error).message}`.slice(0, 300);
        return { ok: false, error: { code: "bad_response_format", message, path: "response_format.json_schema.schema" } };
      }
    }
    return outcome;
  };

  return (job) => {
    let outcome: RenderOutcome;
    try {
      outcome = render(job.request, job.restored);
    } catch (e) {
      // a bug, not bad input (the renderer refuses bad input with a code): said, not thrown
      outcome = {
        ok: false,
        error: { code: "bad_request", message: `the render failed: ${(e as Error).message}`.slice(0, 300), path: "" },
      };
    }
    if (outcome.ok && job.answer === "json") {
      const body = Buffer.from(JSON.stringify({ ids: outcome.ids, text: outcome.text, restored: outcome.restored }));
      const bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
      // a large body has an ArrayBuffer of its own (Buffer's pool is for small ones): handed over, not copied
      return { done: { id: job.id, body: bytes }, transfer: body.byteLength > 4096 ? [body.buffer as ArrayBuffer] : [] };
    }
    return { done: { id: job.id, outcome }, transfer: [] };
  };
}
