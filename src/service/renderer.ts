/**
 * Rendering off the service's thread: one worker thread (workers/render.ts)
 * shared by the services of a process, started on the first render and
 * stopped when the last service closes. Each render has a deadline: past
 * it, the request gets `render_timeout` and the worker is replaced (what
 * else it was rendering gets the same answer), so a request built to be
 * slow costs a worker restart, never the process's responsiveness.
 */
import type { RenderOutcome, Restored } from "../openai/render.js";
import { builtWorker } from "../pool/built-worker.js";
import { DeadlineThread, type Outcome, type WithoutId } from "./deadline-thread.js";
import type { RenderDone, RenderJob } from "./render-job.js";

/** How long one render may take before it is refused (ms). */
export const RENDER_DEADLINE_MS = 10_000;

const failed = (message: string): RenderOutcome => ({ ok: false, error: { code: "render_timeout", message, path: "" } });

/** A job the thread is given: a render (without its id). Answer checks have a thread of their own (./checker.ts). */
type Job = WithoutId<RenderJob>;

/** A render answered as its HTTP body (UTF-8 JSON), or why it failed. */
export type RenderBody = { ok: true; body: Uint8Array } | Extract<RenderOutcome, { ok: false }>;

class RenderThread {
  private readonly thread = new DeadlineThread<RenderJob, RenderDone>(() => builtWorker("render"), "render");
  users = 0;

  render(request: unknown, restored: Restored[], deadlineMs: number): Promise<RenderOutcome> {
    return this.run({ kind: "render", request, restored }, deadlineMs).then((r) =>
      r.done !== null && "outcome" in r.done ? r.done.outcome : failed(r.why),
    );
  }

  renderBody(request: unknown, restored: Restored[], deadlineMs: number): Promise<RenderBody> {
    return this.run({ kind: "render", request, restored, answer: "json" }, deadlineMs).then((r): RenderBody => {
      if (r.done === null) return failed(r.why) as RenderBody;
      if ("body" in r.done) return { ok: true, body: r.done.body };
      if ("outcome" in r.done && !r.done.outcome.ok) return r.done.outcome;
      return failed("the render thread answered out of turn") as RenderBody;
    });
  }

  /** Run `job` on the thread: its answer, or null (and why) past the deadline or when the thread stopped. */
  private run(job: Job, deadlineMs: number): Promise<Outcome<RenderDone>> {
    return this.thread.run(job, deadlineMs, `the render took longer than ${deadlineMs} ms`);
  }

  close(): Promise<void> {
    return this.thread.close("the service is stopping");
  }
}

const shared = new RenderThread();

/** A service's handle on the process's render thread. */
export class Renderer {
  private open = true;

  constructor(private readonly deadlineMs: number = RENDER_DEADLINE_MS) {
    shared.users++;
  }

  render(request: unknown, restored: Restored[]): Promise<RenderOutcome> {
    if (!this.open) return Promise.resolve(failed("the service is stopping"));
    return shared.render(request, restored, this.deadlineMs);
  }

  /** A render's HTTP answer body, serialised on the render thread. */
  renderBody(request: unknown, restored: Restored[]): Promise<RenderBody> {
    if (!this.open) return Promise.resolve(failed("the service is stopping") as RenderBody);
    return shared.renderBody(request, restored, this.deadlineMs);
  }

  async close(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    if (--shared.users === 0) await shared.close();
  }
}
