/**
 * The bench's processes: the engine, the relay and the sidecars as spawned
 * children that say where they listen on stdout, the clients as forked
 * children driven over IPC, and each one's CPU time read from /proc.
 */
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import { createInterface } from "node:readline";

export interface Proc {
  name: string;
  proc: ChildProcess;
  pid: number;
  port: number;
  /** The ready line (engine: `chars`, `ids`). */
  ready: Record<string, unknown>;
  stderr: string[];
}

const TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User and system CPU of a process (all its threads), µs; /proc/PID/stat's utime and stime. */
function cpuTimes(pid: number): { userUs: number; sysUs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields 14 and 15 of stat(5), counted from the third (state) here
  return { userUs: (Number(f[11]) * 1e6) / TICKS, sysUs: (Number(f[12]) * 1e6) / TICKS };
}

/** User + system CPU of a process (all its threads), µs. */
export function cpuMicros(pid: number): number {
  const { userUs, sysUs } = cpuTimes(pid);
  return userUs + sysUs;
}

/** What the kernel counted of a process (all its threads): CPU µs in user and system mode, read and write system calls, context switches. */
export interface ProcCounters {
  userUs: number;
  sysUs: number;
  reads: number;
  writes: number;
  switches: number;
}

/** {@link cpuTimes}, /proc/PID/io's syscr and syscw, and each thread's voluntary and involuntary switches (proc(5)). */
export function procCounters(pid: number): ProcCounters {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  const field = (text: string, name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)`, "m").exec(text)?.[1] ?? NaN);
  let switches = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/status`, "utf8");
      switches += field(st, "voluntary_ctxt_switches") + field(st, "nonvoluntary_ctxt_switches");
    } catch {
      // (a thread that ended between the listing and the read)
    }
  }
  return {
    ...cpuTimes(pid),
    reads: field(io, "syscr"),
    writes: field(io, "syscw"),
    switches,
  };
}

/**
 * Spawn `node ARGS` and wait for the line `isReady` accepts (a JSON line with
 * the port); everything else on stdout is dropped, stderr is kept.
 */
export function spawnNode(
  name: string,
  args: string[],
  isReady: (rec: Record<string, unknown>) => boolean,
  nodeFlags: string[] = [],
): Promise<Proc> {
  const proc = spawn(process.execPath, [...nodeFlags, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const p: Proc = { name, proc, pid: proc.pid!, port: 0, ready: {}, stderr: [] };
  createInterface({ input: proc.stderr! }).on("line", (l) => {
    if (p.stderr.length < 200) p.stderr.push(l);
  });
  const lines = createInterface({ input: proc.stdout! });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start in 120 s: ${p.stderr.join("\n")}`)), 120_000);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready: ${p.stderr.join("\n")}`));
    });
    lines.on("line", (l) => {
      if (p.port !== 0 || !l.startsWith("{")) return;
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(l) as Record<string, unknown>;
      } catch {
        return;
      }
      if (isReady(rec) && typeof rec.port === "number") {
        clearTimeout(timer);
        p.port = rec.port;
        p.ready = rec;
        resolve(p);
      }
    });
  });
}

export function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on("error", reject);
  });
}

export function post(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * The sidecar's /readyz, asked again (each answer awaited, 50 ms apart)
 * until it is 200: the serving line comes when the edges listen, readiness
 * may follow a moment later.
 */
export async function awaitReady(base: string): Promise<void> {
  let last = "";
  for (let i = 0; i < 600; i++) {
    const r = await get(`${base}/readyz`).catch((e: Error) => ({ status: 0, body: e.message }));
    if (r.status === 200) return;
    last = `${r.status} ${r.body.slice(0, 200)}`;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`${base}/readyz never answered 200: ${last}`);
}

export interface ClientProc {
  proc: ChildProcess;
  pid: number;
  request<T>(msg: unknown): Promise<T>;
}

export function forkClient(script: string): Promise<ClientProc> {
  const proc = fork(script, [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  let pending: { resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;
  return new Promise((resolve, reject) => {
    proc.once("exit", (code) => {
      const e = new Error(`client exited (${code})`);
      if (pending) pending.reject(e);
      else reject(e);
    });
    proc.on("message", (m: { ready?: boolean; result?: unknown; failed?: string }) => {
      if (m.ready) {
        resolve({
          proc,
          pid: proc.pid!,
          request<T>(msg: unknown): Promise<T> {
            return new Promise<T>((res, rej) => {
              pending = { resolve: res as (v: unknown) => void, reject: rej };
              proc.send(msg as object);
            });
          },
        });
        return;
      }
      const p = pending;
      pending = null;
      if (!p) return;
      if (m.failed !== undefined) p.reject(new Error(m.failed));
      else p.resolve(m.result);
    });
  });
}

export async function stop(p: { proc: ChildProcess }): Promise<void> {
  if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
  const exited = new Promise((r) => p.proc.once("exit", r));
  p.proc.kill("SIGTERM");
  const timer = setTimeout(() => p.proc.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}
