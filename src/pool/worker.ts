/**
 * The piscina worker: one SessionHost (many parser sessions, per
 * connection and stream) answering one task of ops with one batch of
 * encoded events. The vocabulary table arrives on SharedArrayBuffers via
 * workerData, so a worker starts without rebuilding it.
 */
import { workerData } from "node:worker_threads";
import { Vocabulary } from "../core/vocab.js";
import { SessionHost } from "./host.js";
import { schema } from "../protocol/schema.js";
import type { OpsResult, Task, WorkerData } from "./task.js";

const data = workerData as WorkerData;
const host = new SessionHost(new Vocabulary(data.table), schema());

export default function handle(task: Task): OpsResult | { sessions: number } {
  if (task.t === "crash") {
    // a fault drill: take this thread down the way a real crash would
    process.exit(70);
  }
  if (task.t === "drop") return { sessions: host.drop(task.conn) };
  try {
    return host.run(task);
  } catch (e) {
    // A bug, not bad input (the parser never throws on input). A half-applied
    // task leaves this thread's sessions in an unknown state, and a task that
    // merely failed would lose its events without a word; so the thread ends,
    // and the pool fails its streams with worker_crashed and starts a new one.
    process.stderr.write(`parser worker: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exit(70);
  }
}
