/**
 * The answer-check thread, one job at a time: an answer asked for as JSON
 * (`response_format`, Responses' `text.format`) checked against its schema
 * (./answer-schema.ts: Ajv, its patterns on a linear-time engine). It has a
 * thread of its own, not the render thread's: a check that runs long is
 * stopped at its own short deadline (./checker.ts) and reported unchecked,
 * and no render waits behind it or is failed with it. It loads no
 * vocabulary, so it starts in a few tens of milliseconds.
 */
import { parentPort } from "node:worker_threads";
import { AnswerSchemas, type AnswerCheck } from "./answer-schema.js";
import { READY } from "./deadline-worker.js";

export interface CheckJob {
  id: number;
  schema: unknown;
  text: string;
}

export interface CheckDone {
  id: number;
  check: AnswerCheck;
}

const schemas = new AnswerSchemas();

parentPort?.on("message", (job: CheckJob) => {
  parentPort!.postMessage({ id: job.id, check: schemas.check(job.schema, job.text) } satisfies CheckDone);
});

parentPort?.postMessage(READY);
