/**
 * A real redis-server for a test suite (Debian's package `redis-server`,
 * which `make test` installs): on a Unix socket in a temporary directory,
 * with no persistence, stopped (and restartable on the same socket) by the
 * suite itself.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createConnection } from "node:net";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll } from "vitest";
import type { SharedStore } from "../../src/store/redis.js";

const BINARY = process.env.REDIS_SERVER ?? "redis-server";

/** Whether redis-server can be run here; the message names the package when not. */
export function redisServerMissing(): string | null {
  const r = spawnSync(BINARY, ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0)
    return "these tests need a real redis-server: Debian's package redis-server (`make test` installs it as root; else sudo apt-get install -y redis-server)";
  return null;
}

/** One PING over the socket: true when answered +PONG. */
function ping(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = createConnection(socket);
    const done = (ok: boolean) => {
      c.destroy();
      resolve(ok);
    };
    c.setTimeout(500, () => done(false));
    c.on("error", () => done(false));
    c.on("data", (d) => done(d.toString().startsWith("+PONG")));
    c.on("connect", () => c.write("PING\r\n"));
  });
}

export class RedisServer {
  readonly dir: string;
  readonly socket: string;
  private child: ChildProcess | null = null;
  /** What the server printed, for a failing test's message. */
  log = "";

  constructor() {
    this.dir = mkdtempSync(path.join(tmpdir(), "hs-redis-"));
    this.socket = path.join(this.dir, "redis.sock");
  }

  /** The store URL the service takes. */
  get url(): string {
    return `unix://${this.socket}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Start (or restart) the server on the socket; resolves once it answers PING. */
  async start(): Promise<void> {
    const missing = redisServerMissing();
    if (missing) throw new Error(missing);
    const child = spawn(
      BINARY,
      ["--port", "0", "--unixsocket", this.socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", this.dir],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.child = child;
    child.stdout!.on("data", (d) => (this.log += d.toString()));
    child.stderr!.on("data", (d) => (this.log += d.toString()));
    const exited = new Promise<never>((_, reject) =>
      child.once("exit", (code) => reject(new Error(`redis-server exited (${code}) at start:\n${this.log}`))),
    );
    const deadline = Date.now() + 10_000;
    const up = (async () => {
      while (Date.now() < deadline) {
        if (existsSync(this.socket) && (await ping(this.socket))) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`redis-server did not answer on ${this.socket} within 10 s:\n${this.log}`);
    })();
    await Promise.race([up, exited]);
    child.removeAllListeners("exit");
  }

  /** Stop the server (SIGKILL: the store dies, as a crashed one would; `graceful` sends SIGTERM). */
  async stop(graceful = false): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(graceful ? "SIGTERM" : "SIGKILL");
    await gone;
    rmSync(this.socket, { force: true });
  }

  /** Pause / resume the server (a store that accepts but does not answer). */
  pause(): void {
    this.child?.kill("SIGSTOP");
  }
  resume(): void {
    this.child?.kill("SIGCONT");
  }

  /** Stop it and remove its directory. */
  async dispose(): Promise<void> {
    if (this.child) this.resume();
    await this.stop(true);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A redis-server for the suite (a file or a describe block) that calls this:
 * started before its tests and stopped after them, with `probe`, a client on
 * it for checking keys, and `opened`, the stores a test opens (closed after
 * each test).
 */
export function redisSuite(): { server: RedisServer; readonly probe: Redis; opened: SharedStore[]; restart(): Promise<void> } {
  const server = new RedisServer();
  const connect = () => new Redis({ path: server.socket, protocol: 2 });
  let probe: Redis | null = null;
  const opened: SharedStore[] = [];
  beforeAll(async () => {
    await server.start();
    probe = connect();
  });
  afterAll(async () => {
    probe?.disconnect();
    await server.dispose();
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });
  return {
    server,
    get probe(): Redis {
      if (probe === null) throw new Error("the redis-server suite has not started");
      return probe;
    },
    opened,
    /** Start a stopped server again (same socket, no data), and the probe on it. */
    async restart() {
      await server.start();
      probe?.disconnect();
      probe = connect();
    },
  };
}
