/**
 * The inspector's parse thread: POST /v1/parse bodies in, answers out
 * (src/inspect/parse.ts), one at a time, so the HTTP edge's thread only
 * reads bodies and writes answers (src/transport/inspect.ts). It reads its
 * own vocabulary and encoder when it starts (the table file), then says it
 * is ready (src/service/deadline-thread.ts's READY): a job's deadline starts then.
 */
import { parentPort } from "node:worker_threads";
import { errorBody } from "../src/core/errors.js";
import { Vocabulary } from "../src/core/vocab.js";
import { answerParse, type ParseDone, type ParseJob } from "../src/inspect/parse.js";
import { READY } from "../src/service/deadline-thread.js";
import { loadHarmonyEncoding } from "../src/vocab/index.js";

const enc = loadHarmonyEncoding();
const vocab = new Vocabulary(enc.table);
const utf8 = new TextEncoder();

parentPort?.on("message", (job: ParseJob) => {
  let r: { status: number; json: string };
  try {
    r = answerParse(vocab, enc.encode, job.body, job.maxIds);
  } catch (e) {
    r = { status: 500, json: JSON.stringify(errorBody("internal", `parse failed: ${(e as Error).message}`)) };
  }
  const body = utf8.encode(r.json);
  const done: ParseDone = { id: job.id, status: r.status, body };
  parentPort!.postMessage(done, [body.buffer]);
});

parentPort?.postMessage(READY);
