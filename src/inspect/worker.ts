/**
 * The inspector's worker thread: POST /v1/parse bodies in, answers out, one
 * at a time, so the HTTP edge's thread only reads bodies and writes answers.
 * It reads its own vocabulary and encoder when it starts (the table file),
 * then says it is ready by posting `{ id: 0 }` (src/service/deadline-worker.ts's
 * READY): a job's deadline starts then.
 */
import { parentPort } from "node:worker_threads";
import { Vocabulary } from "../core/vocab.js";
import { loadHarmonyEncoding } from "../vocab/index.js";
import { answerParse } from "./parse.js";

export interface ParseJob {
  id: number;
  body: Uint8Array;
  maxIds: number;
}

export interface ParseDone {
  id: number;
  status: number;
  /** The answer's JSON, UTF-8 (moved, not copied, to the edge's thread). */
  body: Uint8Array;
}

const enc = loadHarmonyEncoding();
const vocab = new Vocabulary(enc.table);

const utf8 = new TextEncoder();

parentPort?.on("message", (job: ParseJob) => {
  let r: { status: number; json: string };
  try {
    r = answerParse(vocab, enc.encode, job.body, job.maxIds);
  } catch (e) {
    r = { status: 500, json: JSON.stringify({ error: { code: "internal", message: `parse failed: ${(e as Error).message}` } }) };
  }
  const body = utf8.encode(r.json);
  const done: ParseDone = { id: job.id, status: r.status, body };
  parentPort!.postMessage(done, [body.buffer]);
});

parentPort?.postMessage({ id: 0 });
