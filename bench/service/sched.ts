/**
 * --sched: the machine's scheduler recorded by `perf sched` while a paced
 * figure runs, and how long a thread waited for a CPU and what ran instead.
 */
import { execSync, spawn } from "node:child_process";
import { once } from "node:events";
import { rmSync } from "node:fs";
import type { Span } from "./gc.js";
import { sleep } from "./util.js";

/** performance.now() + MONO_OFFSET_MS = CLOCK_MONOTONIC in ms (what perf's -k CLOCK_MONOTONIC stamps). */
const MONO_OFFSET_MS = Number(process.hrtime.bigint()) / 1e6 - performance.now();

/** One line of `perf sched timehist`: a task ran on `cpu` for `run` ms until `end` (performance.now() clock), after waiting `delay` ms for it. */
export interface SchedRun {
  end: number;
  cpu: number;
  task: string;
  tid: number;
  pid: number;
  delay: number;
  run: number;
}

/** Record the machine's scheduler events (`perf sched record`) until stop() (null: perf is missing or not allowed). */
export function startSched(file: string): { stop(): Promise<SchedRun[] | null> } {
  const proc = spawn("perf", ["sched", "record", "-k", "CLOCK_MONOTONIC", "-o", file], { stdio: ["ignore", "ignore", "pipe"] });
  const err: string[] = [];
  proc.stderr!.on("data", (d: Buffer) => err.push(d.toString()));
  const exited = once(proc, "exit").catch(() => undefined);
  proc.on("error", () => undefined);
  // never leave perf recording the machine after the bench is gone
  const onExit = () => {
    if (proc.exitCode === null) proc.kill("SIGINT");
  };
  process.once("exit", onExit);
  return {
    async stop() {
      process.off("exit", onExit);
      if (proc.exitCode === null && proc.pid !== undefined) proc.kill("SIGINT");
      await Promise.race([exited, sleep(10_000)]);
      let text: string;
      try {
        text = execSync(`perf sched timehist -i ${JSON.stringify(file)}`, {
          encoding: "utf8",
          maxBuffer: 1 << 30,
          stdio: ["ignore", "pipe", "ignore"],
        });
      } catch {
        process.stderr.write(`[service-bench] --sched: perf sched gave nothing (${err.join("").trim().split("\n")[0] ?? ""})\n`);
        return null;
      } finally {
        rmSync(file, { force: true });
      }
      const out: SchedRun[] = [];
      const re = /^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:\/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)/;
      for (const line of text.split("\n")) {
        const m = re.exec(line);
        if (!m) continue;
        const tid = Number(m[4]);
        out.push({
          end: Number(m[1]) * 1000 - MONO_OFFSET_MS,
          cpu: Number(m[2]),
          task: m[3]!.trim(),
          tid,
          pid: m[5] === undefined ? tid : Number(m[5]),
          delay: Number(m[7]),
          run: Number(m[8]),
        });
      }
      return out;
    },
  };
}

/**
 * How long a thread waited for a CPU (runnable, not running) between
 * `from` and `to`, and what ran on that CPU meanwhile: tasks by name, the
 * bench's own processes by `names` (pid to name), a process's own other
 * threads as such. A wait is charged to the CPU the thread then ran on
 * (right when it was pinned; approximate for a thread that migrated).
 */
export function schedWaits(runs: SchedRun[], tid: number, from: number, to: number, names: ReadonlyMap<number, string>, min = 1) {
  const mine = runs.filter((r) => r.tid === tid && r.end - r.run >= from && r.end - r.run <= to);
  const waits: (Span & { cpu: number })[] = mine
    .filter((r) => r.delay > min)
    .map((r) => ({ a: r.end - r.run - r.delay, b: r.end - r.run, cpu: r.cpu }));
  let maxDelay = 0;
  for (const r of mine) if (r.delay > maxDelay) maxDelay = r.delay;
  const instead = new Map<string, number>();
  const pidOf = mine[0]?.pid ?? tid;
  for (const w of waits) {
    for (const r of runs) {
      if (r.cpu !== w.cpu || r.tid === tid) continue;
      const a = Math.max(w.a, r.end - r.run);
      const b = Math.min(w.b, r.end);
      if (b <= a) continue;
      const name = r.pid === pidOf ? "its own process's other threads" : (names.get(r.pid) ?? r.task.replace(/[-/:]\d.*$/, ""));
      instead.set(name, (instead.get(name) ?? 0) + (b - a));
    }
  }
  return {
    spans: waits,
    summary: {
      switch_ins: mine.length,
      waits_over_ms: min,
      waits: waits.length,
      waits_over_2ms: mine.filter((r) => r.delay > 2).length,
      max_wait_ms: maxDelay,
      total_wait_ms: waits.reduce((x, w) => x + (w.b - w.a), 0),
      ran_instead_ms: Object.fromEntries([...instead.entries()].sort((x, y) => y[1] - x[1]).slice(0, 6)),
    },
  };
}
