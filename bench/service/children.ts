/**
 * The servers the bench measures, as child processes: the service
 * (`node dist/src/cli.js serve`) and, through ./echo.ts, the echo servers.
 * Each reports its port on a JSON log line; the rest of its output is kept.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { opts } from "./flags.js";

export interface Child {
  proc: ChildProcess;
  pid: number;
  port: number;
  /** log lines at warn level or above (the service only) */
  warnLines: string[];
  stderr: string[];
  /** stdout lines that are not JSON logs (e.g. --trace-gc), with the time they arrived */
  other: { at: number; line: string }[];
  /** the service's "serving" log record (workers, inline, …) */
  serving: Record<string, unknown>;
}

export async function spawnChild(args: string[], nodeFlags: string[], readyMsg: string): Promise<Child> {
  // taskset execs node in place, so the pid stays the service's own
  const cmd = opts.childCpus ? ["taskset", "-c", opts.childCpus, process.execPath] : [process.execPath];
  const proc = spawn(cmd[0]!, [...cmd.slice(1), ...nodeFlags, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const child: Child = { proc, pid: proc.pid!, port: 0, warnLines: [], stderr: [], other: [], serving: {} };
  createInterface({ input: proc.stderr! }).on("line", (l) => child.stderr.push(l));
  const lines = createInterface({ input: proc.stdout! });
  child.port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child did not start: ${child.stderr.join("\n")}`)), 60_000);
    proc.once("exit", (code) => reject(new Error(`child exited (${code}): ${child.stderr.join("\n")}`)));
    lines.on("line", (l) => {
      let rec: { msg?: string; port?: number; level?: number } = {};
      try {
        rec = JSON.parse(l) as typeof rec;
      } catch {
        if (child.other.length < 100_000) child.other.push({ at: performance.now(), line: l });
        return;
      }
      if (rec.msg === readyMsg && typeof rec.port === "number") {
        clearTimeout(timer);
        child.serving = rec;
        resolve(rec.port);
      } else if ((rec.level ?? 0) >= 40) child.warnLines.push(l);
    });
  });
  return child;
}

export async function stopChild(c: Child): Promise<void> {
  if (opts.childOutput) {
    mkdirSync(opts.childOutput, { recursive: true });
    writeFileSync(path.join(opts.childOutput, `${c.pid}.txt`), c.other.map((o) => `${o.at.toFixed(1)} ${o.line}\n`).join(""));
  }
  if (c.proc.exitCode !== null) return;
  const exited = once(c.proc, "exit");
  c.proc.kill("SIGTERM");
  const t = setTimeout(() => c.proc.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(t);
}

const CLI = fileURLToPath(new URL("../../src/cli.js", import.meta.url));

export function startService(workers: number | undefined, profDir?: string): Promise<Child> {
  const flags = [...opts.serverFlags.split(" ").filter(Boolean), ...(profDir ? ["--cpu-prof", "--cpu-prof-dir", profDir] : [])];
  // --log-level info: at warn the "serving" line (the only place the port of
  // --port 0 appears) is not printed
  const args = [
    CLI,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--grpc-port",
    "-1",
    ...(workers === undefined ? [] : ["--workers", String(workers)]),
    "--log-level",
    "info",
    ...opts.serveFlags.split(" ").filter(Boolean),
  ];
  return spawnChild(args, flags, "harmony-sidecar serving");
}

/** Where the service parses: its own report at start-up (the "serving" log record). */
export function layoutOf(srv: Child): string {
  return `${String(srv.serving.workers)} worker threads, inline streams: ${String(srv.serving.inline)}`;
}
