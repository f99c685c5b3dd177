/**
 * Answer checks off the render thread: one thread of their own
 * (workers/check.ts) shared by the services of a process, started on
 * first use and stopped when the last service closes. Each check has a
 * short deadline: past it the check is reported unchecked (the answer says
 * so), the thread is replaced (the checks on it at the time are unchecked
 * too), and nothing else waits or fails: renders run on their own thread
 * (./renderer.ts).
 */
import type { AnswerCheck } from "./answer-schema.js";
import { builtWorker } from "../pool/built-worker.js";
import { DeadlineThread } from "./deadline-thread.js";

/** An answer to check against its schema, for the check thread (workers/check.ts). */
export interface CheckJob {
  id: number;
  schema: unknown;
  text: string;
}

/** The check thread's answer. */
export interface CheckDone {
  id: number;
  check: AnswerCheck;
}

/** How long one answer check may take before it is reported unchecked (ms). */
export const CHECK_DEADLINE_MS = 2000;

/** A check's outcome: matched, not matched (why), or not checked (why: its deadline, or the service stopping). */
export type CheckOutcome = AnswerCheck | { unchecked: string };

class CheckThread {
  readonly thread = new DeadlineThread<CheckJob, CheckDone>(() => builtWorker("check"), "answer check");
  users = 0;
}

const shared = new CheckThread();

/** A service's handle on the process's answer-check thread. */
export class AnswerChecker {
  private open = true;

  constructor(private readonly deadlineMs: number = CHECK_DEADLINE_MS) {
    shared.users++;
  }

  /** Check `text` against `schema` within the deadline. Never rejects. */
  async check(schema: unknown, text: string): Promise<CheckOutcome> {
    if (!this.open) return { unchecked: "the service is stopping" };
    const late = `the check did not finish within ${this.deadlineMs} ms`;
    try {
      const r = await shared.thread.run({ schema, text }, this.deadlineMs, late);
      return r.done !== null ? r.done.check : { unchecked: r.why };
    } catch (e) {
      return { unchecked: `the check thread could not start: ${(e as Error).message}` };
    }
  }

  /** Start the thread now (a request that will need a check is on its way), so its start is not the check's. */
  warm(): void {
    if (!this.open) return;
    try {
      shared.thread.start();
    } catch {
      // not built: the check itself says so
    }
  }

  async close(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    if (--shared.users === 0) await shared.thread.close("the service is stopping");
  }
}
