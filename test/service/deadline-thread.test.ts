/**
 * DeadlineThread (src/service/deadline-thread.ts): a job's deadline counts
 * from when its thread is ready, so a slow cold start (a busy machine, a
 * big table to load) is not taken for a slow job; a thread that never gets
 * ready is bounded on its own.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { afterAll, describe, expect, it } from "vitest";
import { builtWorker, type WorkerName } from "../../src/pool/built-worker.js";
import { DeadlineThread } from "../../src/service/deadline-thread.js";

const dir = mkdtempSync(path.join(tmpdir(), "deadline-worker-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A worker module that sleeps `startMs` (no CPU) before it says it is ready, then echoes jobs. */
function workerFile(name: string, startMs: number): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `import { parentPort } from "node:worker_threads";
const wait = ${startMs};
if (wait !== 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, wait < 0 ? undefined : wait);
parentPort.on("message", (job) => parentPort.postMessage({ id: job.id, echo: job.text }));
parentPort.postMessage({ id: 0 });
`,
  );
  return file;
}

type Job = { id: number; text: string };
type Done = { id: number; echo: string };

describe("DeadlineThread", () => {
  it("a job's deadline starts when the thread is ready, not when it was spawned", async () => {
    const file = workerFile("slow-start", 3000);
    const w = new DeadlineThread<Job, Done>(() => file, "slow");
    try {
      // the thread takes 3 s to start; the job is given 1.5 s, from then
      const r = await w.run({ text: "hi" }, 1500, "too late");
      expect(r).toEqual({ done: { id: 1, echo: "hi" }, why: "", timedOut: false });
      expect(w.isReady).toBe(true);
    } finally {
      await w.close("done");
    }
  });

  it("a thread that never gets ready is stopped at its start deadline, and its jobs are answered", async () => {
    const file = workerFile("never", -1);
    const w = new DeadlineThread<Job, Done>(() => file, "stuck", 1000);
    try {
      const r = await w.run({ text: "hi" }, 60_000, "too late");
      expect(r).toEqual({ done: null, why: "the stuck worker did not start within 1000 ms", timedOut: true });
      expect(w.isReady).toBe(false);
    } finally {
      await w.close("done");
    }
  });

  it("a job past its deadline on a ready thread is answered and the next job gets a fresh thread", async () => {
    const file = path.join(dir, "hang.mjs");
    writeFileSync(
      file,
      `import { parentPort } from "node:worker_threads";
parentPort.on("message", (job) => {
  if (job.text === "hang") for (;;);
  parentPort.postMessage({ id: job.id, echo: job.text });
});
parentPort.postMessage({ id: 0 });
`,
    );
    const w = new DeadlineThread<Job, Done>(() => file, "hang");
    try {
      expect(await w.run({ text: "warm" }, 30_000, "too late")).toMatchObject({ done: { echo: "warm" } });
      expect(await w.run({ text: "hang" }, 500, "too late")).toEqual({ done: null, why: "too late", timedOut: true });
      expect(await w.run({ text: "again" }, 30_000, "too late")).toMatchObject({ done: { echo: "again" } });
    } finally {
      await w.close("done");
    }
  });

  it("every thread run by a DeadlineThread says it is ready (else each of its jobs would wait out the start deadline)", async () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
    // the worker entry points the project runs this way (workers/): one per `new DeadlineThread` in src/
    const entries: WorkerName[] = ["render", "check", "inspect"];
    const owners = readdirSync(path.join(root, "src"), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith(".ts"))
      .map((e) => readFileSync(path.join(e.parentPath, e.name), "utf8"))
      .reduce((n, text) => n + (text.match(/new DeadlineThread</g)?.length ?? 0), 0);
    expect(owners).toBe(entries.length);
    for (const entry of entries) {
      const w = new Worker(builtWorker(entry));
      try {
        const first = await new Promise<unknown>((resolve, reject) => {
          w.once("message", resolve);
          w.once("error", reject);
        });
        expect(first, entry).toEqual({ id: 0 });
      } finally {
        await w.terminate();
      }
    }
  });
});
