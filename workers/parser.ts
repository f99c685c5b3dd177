/**
 * The parser worker thread (piscina): one SessionHost (many parser sessions, per
 * connection and stream) answering one task of ops with one batch of
 * encoded events. The vocabulary table arrives on SharedArrayBuffers via
 * workerData, and the wire schema as JSON (built, with protobufjs loaded,
 * when an event first needs it), so a worker starts without reading or
 * rebuilding either.
 *
 * piscina does not load this module itself: it loads the CommonJS entry
 * workers/parser-entry.cts (which says why), which imports this one and
 * hands piscina its `handle`. The handler stays a named export with no
 * default export beside it, so that a require() of this module, should
 * anything do one, builds no facade module (whose failed instantiation is
 * a CHECK in node's module_wrap.cc that aborts the whole process).
 */
import { workerData } from "node:worker_threads";
import { Vocabulary } from "../src/core/vocab.js";
import { SessionHost } from "../src/pool/host.js";
import type { OpsResult, Task, WorkerData } from "../src/pool/task.js";
import { lazySchemaFromJson } from "../src/protocol/schema.js";

const data = workerData as WorkerData;
const host = new SessionHost(new Vocabulary(data.table), lazySchemaFromJson(data.schema));

export function handle(task: Task): OpsResult | { sessions: number } {
  if (task.t === "crash") {
    // a fault drill: take this thread down the way a real crash would
    process.exit(70);
  }
  if (task.t === "drop") return { sessions: host.drop(task.conn) };
  try {
    if (task.t === "throw") throw DRILL;
    return host.run(task);
  } catch (e) {
    // A bug, not bad input (the parser never throws on input). A half-applied
    // task leaves this thread's sessions in an unknown state, and a task that
    // merely failed would lose its events without a word; so the thread ends,
    // and the pool fails its streams with worker_crashed and starts a new one.
    // A drill says so in one line: a stack trace in the log is for real bugs.
    process.stderr.write(
      e === DRILL ? "parser worker: fault drill: ending this thread\n" : `parser worker: ${(e as Error)?.stack ?? String(e)}\n`,
    );
    process.exit(70);
  }
}

/** What the `throw` drill throws: the handler's failure path, taken on purpose. */
const DRILL = new Error("fault drill");
