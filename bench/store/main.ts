/**
 * The shared reasoning store (issue #19): what restoring through Redis/Valkey
 * costs a render against the in-process store, how many writes a second the
 * pipelined writer sends, and what an outage costs a request.
 *
 *   node dist/bench/store/main.js [--iterations 2000] [--writes 100000] [--timeout-ms 5] [--json]
 *   (`make bench-store`; needs Debian's redis-server, which it starts itself)
 *
 * Setup: a real redis-server (no persistence) started by this file, on a
 * Unix socket and on a loopback TCP port; Services in this process (no HTTP:
 * Service.render is what /v1/render, the Render op and the OpenAI front
 * call). Replica A remembers every memo (into the store), replica B renders:
 * each render names fresh tool call ids, so B's local cache never has them
 * and every render is one MGET. The baseline is a memory-only service whose
 * own store holds the ids (the best case of today's single process).
 *
 * Figures:
 * (1) restore latency, p50/p99/p99.9 over --iterations renders, of a request
 *     with 1 and with 16 tool calls (each with ~1 KiB of reasoning): the
 *     restore step alone (ids, local lookups, the fetch, putting the
 *     reasoning back) and the whole render (plus tokenizing on the render
 *     thread);
 * (2) pipelined writes: --writes memos of 1 KiB through the writer, to
 *     acknowledgement (ops/s), and MGETs of 16 keys back to back;
 * (3) an outage with --timeout-ms: the store paused (SIGSTOP: accepts, never
 *     answers; a render waits out the budget) and killed (refused at once).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, createConnection } from "node:net";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { missingReasoning, restoreReasoning } from "../../src/openai/render.js";
import { DEFAULT_COT_STORE, DEFAULT_LIMITS, Service } from "../../src/service/service.js";
import { SharedStore } from "../../src/store/redis.js";
import { memoScope } from "../../src/store/store.js";

const args = process.argv.slice(2);
const opt = (name: string, def: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const ITER = opt("iterations", 2000);
const WRITES = opt("writes", 100_000);
const TIMEOUT_MS = opt("timeout-ms", 5);
const JSON_OUT = args.includes("--json");
const TENANT = "bench";
const SCOPE = memoScope(TENANT);
const COT = "The user asks for the weather; I should call get_weather with the city and then answer. ".repeat(12).slice(0, 1024);

// ---- redis-server --------------------------------------------------------

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

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

class RedisProcess {
  readonly dir = mkdtempSync(path.join(tmpdir(), "hs-store-bench-"));
  readonly socket = path.join(this.dir, "redis.sock");
  child: ChildProcess | null = null;
  constructor(readonly port: number) {}
  async start(): Promise<void> {
    const child = spawn(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--unixsocket",
        this.socket,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        this.dir,
      ],
      { stdio: "ignore" },
    );
    this.child = child;
    const end = Date.now() + 10_000;
    while (!(existsSync(this.socket) && (await ping(this.socket)))) {
      if (Date.now() > end || child.exitCode !== null) throw new Error("redis-server did not start");
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  async stop(): Promise<void> {
    const c = this.child;
    this.child = null;
    if (!c || c.exitCode !== null) return;
    const gone = new Promise((r) => c.once("exit", r));
    c.kill("SIGCONT");
    c.kill("SIGKILL");
    await gone;
    rmSync(this.socket, { force: true });
  }
}

// ---- helpers -------------------------------------------------------------

const quiet = pino({ level: process.env.STORE_BENCH_LOG ?? "silent" });

async function service(url: string | null): Promise<Service> {
  const svc = new Service({
    workers: 0,
    drainTimeoutMs: 1000,
    limits: DEFAULT_LIMITS,
    logger: quiet,
    cotStore: {
      ...DEFAULT_COT_STORE,
      maxBytes: 256 * 1024 * 1024,
      maxEntries: 1_000_000,
      ...(url ? { shared: { url, timeoutMs: TIMEOUT_MS } } : {}),
    },
  });
  svc.start();
  if (url && !(await svc.reasoning.shared!.waitReady(5000))) throw new Error(`store ${url} not reachable`);
  return svc;
}

let nextId = 0;
function ids(n: number): string[] {
  return Array.from({ length: n }, () => `call_${(nextId++).toString(36).padStart(8, "0")}`);
}

/** A turn-2 request: `calls` tool calls in one assistant message, the reasoning dropped. */
function request(callIds: string[]) {
  return {
    harmony: { current_date: "2026-11-30" },
    tools: [
      { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
    ],
    messages: [
      { role: "user", content: "Weather in Oslo and elsewhere?" },
      {
        role: "assistant",
        content: null,
        tool_calls: callIds.map((id, i) => ({ id, type: "function", function: { name: "get_weather", arguments: `{"city":"c${i}"}` } })),
      },
      ...callIds.map((id) => ({ role: "tool", tool_call_id: id, content: '{"temp_c": 3}' })),
    ],
  };
}

function stats(samples: number[]) {
  const s = [...samples].sort((x, y) => x - y);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return { p50: q(0.5), p99: q(0.99), p999: q(0.999), mean: s.reduce((a, b) => a + b, 0) / s.length };
}
const ms = (x: number) => x.toFixed(3);

/** Remember every id's reasoning through `writer` (a service whose writes go to the store); wait for the acknowledgements. */
async function remember(writer: Service, all: string[]): Promise<void> {
  const bytes = new TextEncoder().encode(COT);
  const shared = writer.reasoning.shared;
  const target = (shared?.stats.written ?? 0) + all.length;
  // in turns of 1000 (the writer's queue is bounded: a burst past 16 MiB would be dropped)
  for (let i = 0; i < all.length; i += 1000) {
    const chunk = all.slice(i, i + 1000);
    const upTo = (shared?.stats.written ?? 0) + chunk.length;
    for (const id of chunk) writer.reasoning.remember(SCOPE + id, bytes);
    while (shared && shared.stats.written < upTo && shared.stats.writeFailures === 0) await new Promise((r) => setTimeout(r, 1));
  }
  while (shared && shared.stats.written < target) {
    if (shared.stats.writeFailures > 0) throw new Error(`${shared.stats.writeFailures} writes failed while filling the store`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Case {
  restore: ReturnType<typeof stats>;
  render: ReturnType<typeof stats>;
  restored: number;
  /** Whole renders that restored nothing: the fetch ran past its budget. */
  overBudget: number;
}

/** `ITER` renders on `reader` of requests with `calls` fresh ids (remembered first through `writer`). */
async function measure(writer: Service, reader: Service, calls: number): Promise<Case> {
  const warm = 200;
  const reqs = Array.from({ length: ITER + warm }, () => request(ids(calls)));
  await remember(
    writer,
    reqs.flatMap((r) => missingReasoning(r)),
  );
  const restoreT: number[] = [];
  const renderT: number[] = [];
  let restored = 0;
  let overBudget = 0;
  for (let i = 0; i < reqs.length; i++) {
    const req = reqs[i]!;
    // the restore step alone, as Service.render does it
    const t0 = performance.now();
    let recall = (id: string) => reader.cot.recall(SCOPE + id);
    if (reader.reasoning.shared !== null) {
      const found = await reader.reasoning.recallMany(missingReasoning(req).map((id) => SCOPE + id));
      recall = (id) => found.get(SCOPE + id);
    }
    const r = restoreReasoning(req, recall);
    const t1 = performance.now();
    if (i >= warm) {
      restoreT.push(t1 - t0);
      restored += r.restored.length;
    }
  }
  // the whole render, on fresh ids again
  const reqs2 = Array.from({ length: ITER + warm }, () => request(ids(calls)));
  await remember(
    writer,
    reqs2.flatMap((r) => missingReasoning(r)),
  );
  for (let i = 0; i < reqs2.length; i++) {
    const t0 = performance.now();
    const out = await reader.render(reqs2[i]!, TENANT);
    const t1 = performance.now();
    if (!out.ok) throw new Error(`render failed: ${JSON.stringify(out).slice(0, 200)}`);
    if (i >= warm) {
      renderT.push(t1 - t0);
      if (out.restored.length !== 1) overBudget++;
    }
  }
  return { restore: stats(restoreT), render: stats(renderT), restored, overBudget };
}

async function main(): Promise<void> {
  if (spawnSync("redis-server", ["--version"]).status !== 0)
    throw new Error("the store bench needs Debian's redis-server package: apt-get install -y redis-server");
  const version = spawnSync("redis-server", ["--version"], { encoding: "utf8" }).stdout.trim();
  const redis = new RedisProcess(await freePort());
  await redis.start();
  const report: Record<string, unknown> = {
    node: process.version,
    cpus: os.availableParallelism(),
    cpu: os.cpus()[0]?.model,
    redis: version,
    iterations: ITER,
    timeout_ms: TIMEOUT_MS,
  };
  const lines: string[] = [];
  const out = (l = "") => lines.push(l);
  try {
    // (1) restore latency
    const memory = await service(null);
    const results: Record<string, Record<number, Case>> = {};
    const backends: [string, string | null][] = [
      ["memory (in-process, hit)", null],
      ["redis, unix socket (miss → MGET)", `unix://${redis.socket}`],
      ["redis, TCP 127.0.0.1 (miss → MGET)", `redis://127.0.0.1:${redis.port}`],
    ];
    for (const [name, url] of backends) {
      results[name] = {};
      const writer = url ? await service(url) : memory;
      const reader = url ? await service(url) : memory;
      for (const calls of [1, 16]) results[name]![calls] = await measure(writer, reader, calls);
      if (url) {
        await writer.close();
        await reader.close();
      }
    }
    report.restore = results;
    out(`## Reasoning store (bench/store/main.ts)`);
    out();
    out(
      `${process.version}, ${report.cpus} CPUs (${report.cpu}), ${version.split(" ").slice(0, 3).join(" ")}; ${ITER} renders per case, ~1 KiB of reasoning per call; fetch budget ${TIMEOUT_MS} ms.`,
    );
    out();
    out(
      `### (1) Restore latency, ms (restore step: ids, local lookups, one MGET of the misses, reasoning put back; render: all of Service.render)`,
    );
    out();
    out(
      `| store | tool calls | restore p50 | restore p99 | restore p99.9 | restored (restore step) | render p50 | render p99 | renders past the budget |`,
    );
    out(`|---|---|---|---|---|---|---|---|---|`);
    for (const [name] of backends)
      for (const calls of [1, 16]) {
        const c = results[name]![calls]!;
        out(
          `| ${name} | ${calls} | ${ms(c.restore.p50)} | ${ms(c.restore.p99)} | ${ms(c.restore.p999)} | ${c.restored}/${ITER} | ${ms(c.render.p50)} | ${ms(c.render.p99)} | ${c.overBudget} |`,
        );
      }

    // (2) pipelined writes and batch reads
    const url = `unix://${redis.socket}`;
    const tcp = `redis://127.0.0.1:${redis.port}`;
    out();
    out(`### (2) Store operations per second`);
    out();
    out(`| operation | transport | count | seconds | per second |`);
    out(`|---|---|---|---|---|`);
    const value = Buffer.from(COT);
    const writeRates: Record<string, number> = {};
    for (const [label, u] of [
      ["unix socket", url],
      ["TCP 127.0.0.1", tcp],
    ] as const) {
      const w = new SharedStore({ url: u, ttlMs: 60_000, timeoutMs: TIMEOUT_MS, maxPendingBytes: 1 << 30 });
      await w.waitReady(5000);
      const t0 = performance.now();
      // as the service writes: a batch per turn of the event loop (here 1000 memos a turn), at most 16k unacknowledged
      for (let i = 0; i < WRITES; i += 1000) {
        for (let j = i; j < Math.min(WRITES, i + 1000); j++) w.write(`${SCOPE}w${j}`, value);
        await new Promise((r) => setImmediate(r));
        while (i + 1000 - (w.stats.written + w.stats.writeFailures) > 16_000) await new Promise((r) => setImmediate(r));
      }
      while (w.stats.written + w.stats.writeFailures < WRITES) await new Promise((r) => setTimeout(r, 2));
      const s = (performance.now() - t0) / 1000;
      writeRates[label] = WRITES / s;
      out(`| SET … PX (pipelined, 1 KiB) | ${label} | ${WRITES} | ${s.toFixed(2)} | ${Math.round(WRITES / s)} |`);
      const keys = Array.from({ length: 16 }, (_, k) => `${SCOPE}w${k}`);
      const n = 20_000;
      const t1 = performance.now();
      for (let i = 0; i < n; i++) await w.fetch(keys);
      const s2 = (performance.now() - t1) / 1000;
      out(`| MGET of 16 keys (one at a time) | ${label} | ${n} | ${s2.toFixed(2)} | ${Math.round(n / s2)} |`);
      if (w.stats.writeFailures > 0) out(`|   (write failures: ${w.stats.writeFailures}) | | | | |`);
      await w.close();
    }
    report.writes_per_s = writeRates;

    // (3) outage
    out();
    out(`### (3) What an outage costs a render (1 tool call, restoring skipped), ms`);
    out();
    out(`| store | render p50 | render p99 | render max | restored | failures counted |`);
    out(`|---|---|---|---|---|---|`);
    const reader = await service(url);
    const outage = async (label: string) => {
      const t: number[] = [];
      let restored = 0;
      const n = Math.min(ITER, 1000);
      const before = reader.reasoning.shared!.stats.readFailures;
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const r = await reader.render(request(ids(1)), TENANT);
        t.push(performance.now() - t0);
        if (!r.ok) throw new Error("render failed in an outage");
        restored += r.restored.length;
      }
      const st = stats(t);
      const max = Math.max(...t);
      out(
        `| ${label} | ${ms(st.p50)} | ${ms(st.p99)} | ${ms(max)} | ${restored} | ${reader.reasoning.shared!.stats.readFailures - before} |`,
      );
      return { ...st, max };
    };
    const up = await outage("up (miss: the id is nowhere)");
    redis.child!.kill("SIGSTOP");
    const paused = await outage(`paused (SIGSTOP; waits the ${TIMEOUT_MS} ms budget)`);
    redis.child!.kill("SIGCONT");
    await redis.stop();
    await new Promise((r) => setTimeout(r, 100));
    const down = await outage("killed (connection refused, reconnecting)");
    report.outage = { up, paused, down };
    await reader.close();
    await memory.close();
  } finally {
    await redis.stop();
    rmSync(redis.dir, { recursive: true, force: true });
  }
  process.stdout.write(JSON_OUT ? JSON.stringify(report, null, 2) + "\n" : lines.join("\n") + "\n");
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
