/**
 * The render thread: render jobs (src/service/render-job.ts) one at a time,
 * for the process's services (src/service/renderer.ts). It says when it is
 * ready (src/service/deadline-thread.ts's READY): a job's deadline starts then.
 */
import { parentPort } from "node:worker_threads";
import { READY } from "../src/service/deadline-thread.js";
import { createRenderJobs, type RenderJob } from "../src/service/render-job.js";

const run = createRenderJobs();

parentPort?.on("message", (job: RenderJob) => {
  const { done, transfer } = run(job);
  parentPort!.postMessage(done, transfer);
});

parentPort?.postMessage(READY);
