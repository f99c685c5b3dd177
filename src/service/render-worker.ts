/**
 * The render worker thread: chat requests (their reasoning already restored
 * on the service's thread) in, Harmony prompt ids and text out, one at a
 * time. Tokenizing is the costly part of a render; here it never holds up
 * the thread that answers every connection and /healthz. It builds its own
 * encoder when it starts (about a second, once).
 */
import { parentPort } from "node:worker_threads";
import { renderRestored, type RenderOutcome, type Restored } from "../openai/render.js";
import { loadHarmonyEncoding } from "../vocab/index.js";

export interface RenderJob {
  id: number;
  request: unknown;
  restored: Restored[];
}

export interface RenderDone {
  id: number;
  outcome: RenderOutcome;
}

const enc = loadHarmonyEncoding();

parentPort?.on("message", (job: RenderJob) => {
  let outcome: RenderOutcome;
  try {
    outcome = renderRestored(job.request, job.restored, enc.encodeOrdinary);
  } catch (e) {
    // a bug, not bad input (the renderer refuses bad input with a code): said, not thrown
    outcome = { ok: false, error: { code: "bad_request", message: `the render failed: ${(e as Error).message}`.slice(0, 300), path: "" } };
  }
  const done: RenderDone = { id: job.id, outcome };
  parentPort!.postMessage(done);
});
