/**
 * The piscina worker: one SessionHost (many parser sessions, per
 * connection and stream) answering one task of ops with one batch of
 * encoded events. The vocabulary table arrives on SharedArrayBuffers via
 * workerData, so a worker starts without rebuilding it.
 */
import { workerData } from "node:worker_threads";
import { Vocabulary } from "../src/core/vocab.js";
import { SessionHost } from "../src/pool/host.js";
import { schema } from "../src/protocol/schema.js";
import type { OpsResult, Task, WorkerData } from "../src/pool/task.js";

const data = workerData as WorkerData;
const host = new SessionHost(new Vocabulary(data.table), schema());

export default function handle(task: Task): OpsResult | { sessions: number } {
  if (task.t === "crash") {
    // a fault drill: take this thread down the way a real crash would
    process.exit(70);
  }
  if (task.t === "drop") return { sessions: host.drop(task.conn) };
  return host.run(task);
}
