/**
 * The hostile bench's service child (`node dist/src/cli.js serve` on
 * loopback, bench/hostile/main.ts) and the store's stand-in it is given: a
 * RESP peer on a Unix socket that answers MGET with whatever an attack sets.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { MiB } from "./common.js";

/** A RESP peer on a Unix socket: enough for ioredis to connect; MGET answered with `target.mget`, everything else +OK. */
export async function startStorePeer(store: { mget: string }): Promise<{ url: string; close(): void }> {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "hs-bench-resp-")), "peer.sock");
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    let pending = "";
    socket.on("data", (c: Buffer) => {
      pending += c.toString("latin1");
      // commands are arrays of bulk strings: *N\r\n($len\r\nvalue\r\n)×N
      for (;;) {
        const m = /^\*(\d+)\r\n/.exec(pending);
        if (!m) return;
        let at = m[0].length;
        const parts: string[] = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const l = /^\$(\d+)\r\n/.exec(pending.slice(at));
          if (!l || pending.length < at + l[0].length + Number(l[1]) + 2) return;
          parts.push(pending.slice(at + l[0].length, at + l[0].length + Number(l[1])));
          at += l[0].length + Number(l[1]) + 2;
        }
        pending = pending.slice(at);
        const name = parts[0]!.toUpperCase();
        if (name === "INFO") socket.write("$22\r\n# Server\r\nloading:0\r\n\r\n");
        else if (name === "MGET") socket.write(store.mget);
        else socket.write("+OK\r\n");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(file, resolve));
  return { url: `unix://${file}`, close: () => server.close() };
}

export interface Service {
  proc: ChildProcess;
  pid: number;
  port: number;
  grpcPort: number;
  stderr: string[];
  warnLines: string[];
}

/** The service's clocks on the engine, and its bound on a client that leaves its answer unread. */
export const UPSTREAM_TIMEOUT_MS = 2000;
export const UPSTREAM_DEADLINE_MS = 15_000;
export const SLOW_CLIENT_TIMEOUT_MS = 2000;
/** (n): over all the calls of one HTTP/2 connection (1,000 streams) */
export const MAX_CONNECTION_BYTES = 16 * MiB;

const CLI = fileURLToPath(new URL("../../src/cli.js", import.meta.url));

export async function startService(
  nodeFlags: string[],
  serveFlags: string[],
  cpus: string | undefined,
  upstream: string,
  store: string,
): Promise<Service> {
  // taskset execs node in place, so the pid stays the service's own
  const cmd = cpus ? ["taskset", "-c", cpus, process.execPath] : [process.execPath];
  const args = [
    ...cmd.slice(1),
    ...nodeFlags,
    CLI,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--grpc-port",
    "0",
    "--log-level",
    "info",
    // the OpenAI front on, over the engine that misbehaves as scripted ((h)'s POST meets the access check
    // before it); the clocks on the engine: no event for 2 s ((t)), 15 s for any one request ((u)); the idle
    // clock does not run while the sidecar holds the engine's stream back for a slow client ((k)), the deadline
    // does, and (k)'s client is dropped only once the buffers between it and the engine are full
    "--upstream",
    upstream,
    "--upstream-timeout-ms",
    String(UPSTREAM_TIMEOUT_MS),
    "--upstream-deadline-ms",
    String(UPSTREAM_DEADLINE_MS),
    // the shared store: the RESP peer of (i)
    "--cot-store",
    store,
    "--cot-store-timeout-ms",
    "100",
    "--slow-client-timeout-ms",
    String(SLOW_CLIENT_TIMEOUT_MS),
    "--max-connection-bytes",
    String(MAX_CONNECTION_BYTES),
    ...serveFlags,
  ];
  const proc = spawn(cmd[0]!, args, { stdio: ["ignore", "pipe", "pipe"] });
  const svc: Service = { proc, pid: proc.pid!, port: 0, grpcPort: 0, stderr: [], warnLines: [] };
  createInterface({ input: proc.stderr! }).on("line", (l) => svc.stderr.length < 1000 && svc.stderr.push(l));
  svc.port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start: ${svc.stderr.join("\n")}`)), 60_000);
    proc.once("exit", (code) => reject(new Error(`the service exited (${code}): ${svc.stderr.join("\n")}`)));
    createInterface({ input: proc.stdout! }).on("line", (l) => {
      let rec: { msg?: string; port?: number; grpcPort?: number; level?: number } = {};
      try {
        rec = JSON.parse(l) as typeof rec;
      } catch {
        return;
      }
      if (rec.msg === "harmony-sidecar serving" && typeof rec.port === "number") {
        clearTimeout(timer);
        svc.grpcPort = rec.grpcPort ?? 0;
        resolve(rec.port);
      } else if ((rec.level ?? 0) >= 40 && svc.warnLines.length < 1000) svc.warnLines.push(l.slice(0, 300));
    });
  });
  return svc;
}

export async function stopService(s: Service): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
  const exited = new Promise((resolve) => s.proc.once("exit", resolve));
  s.proc.kill("SIGTERM");
  const t = setTimeout(() => s.proc.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(t);
}

export function healthz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", timeout: 5000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}
