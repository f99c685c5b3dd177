/**
 * The answer-check thread, one job at a time: an answer asked for as JSON
 * (`response_format`, Responses' `text.format`) checked against its schema
 * (src/service/answer-schema.ts: Ajv, its patterns on a linear-time engine).
 * It has a thread of its own, not the render thread's: a check that runs
 * long is stopped at its own short deadline (src/service/checker.ts) and
 * reported unchecked, and no render waits behind it or is failed with it.
 * It loads no vocabulary, so it starts in a few tens of milliseconds.
 */
import { parentPort } from "node:worker_threads";
import { AnswerSchemas } from "../src/service/answer-schema.js";
import type { CheckDone, CheckJob } from "../src/service/checker.js";
import { READY } from "../src/service/deadline-thread.js";

const schemas = new AnswerSchemas();

parentPort?.on("message", (job: CheckJob) => {
  parentPort!.postMessage({ id: job.id, check: schemas.check(job.schema, job.text) } satisfies CheckDone);
});

parentPort?.postMessage(READY);
