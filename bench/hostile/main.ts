/**
 * The hostile bench: attacks at full size against the real service (`node
 * dist/src/cli.js serve`, a child process on loopback, ./service.ts), one at a
 * time, while a probe GETs /healthz every 10 ms and the service's RSS is read
 * from /proc/<pid>/status every 10 ms (both on a worker thread, ./probe.ts, so
 * that building and reading the attacks on this thread does not delay them).
 * The service's --cot-store is a fake RESP peer on a Unix socket that answers
 * MGET as an attack sets it; its --upstream an engine that misbehaves as each
 * attack scripts it (bench/peers/hostile-engine.ts, in this process on
 * loopback; its writes wait for 'drain' as vLLM's uvicorn does), with
 * --upstream-timeout-ms 2000, --upstream-deadline-ms 15000 (longer than (k) takes to fill its buffers and drop its client),
 * --slow-client-timeout-ms 2000 and --max-connection-bytes 16 MiB.
 *   (0) no attack: /healthz alone for 1 s, the machine's own noise beside the rows it precedes.
 * Issue #16's (./attacks-16.ts):
 *   (a) a 20 KB WebSocket JSON frame whose `ids` hold 10,000 nested arrays;
 *   (b) POST /v1/render with `reasoning_effort` nested 10,000 deep;
 *   (c) one JSON frame of 130,000 ids 200007 (<|end|>) on one stream;
 *   (d) POST /v1/render with one 120,000-character word;
 *   (e) POST /v1/render of ~4 MiB of 120,000-character words (just under --max-frame-bytes);
 *   (f) a 4 MB binary frame of 2M empty ops (bytes 0x0a 0x00 repeated);
 *   (g) 600 opens with 4 MB stream names on one connection, one open per frame, then a disconnect;
 *   (h) a WebSocket upgrade with `Origin: https://evil.example`, and a text/plain POST to
 *       /v1/chat/completions (the refusal is the access check's, before the engine).
 * Issue #32's (./attacks-32.ts):
 *   (i) POST /v1/render naming tool calls while the store answers MGET with `:1`, then `*1 :5`;
 *   (j) a chat whose response_format pattern is `^(a+)+$`, the engine's answer 40 a's and a b;
 *   (k) a streamed chat client that never reads an answer of 2^20 tokens (the engine's sent ids noted;
 *       the drop read from the service's harmony_slow_clients_dropped_total);
 *   (l) a WebSocket client that never reads its openai.chat answers (600 frames of 5,000 ids; the drop
 *       read from the service's counter, then the close code the client reads once it resumes);
 *   (m) GET //x/health, //tokenize/x/../../health and an absolute-form target;
 *   (n) 8 gRPC Stream calls on one HTTP/2 connection, 2,000 opens each (16 MiB over all).
 * Issue #31's, the engine as the peer that misbehaves (./attacks-31.ts):
 *   (o) an engine that ignores max_tokens and streams ids forever, a chat request with max_tokens 1000;
 *   (p) the same, streamed to the client;
 *   (q) one SSE event of 300,000 ids (the whole answer, parsed in frames);
 *   (r) ids that are not token ids (-1, 1.5, "x", 2^32, null, one after another);
 *   (s) one event that never ends, sent in 4 KiB pieces up to 17 MiB;
 *   (t) SSE comments every 300 ms and nothing else;
 *   (u) events with nothing in them, every 50 ms, past the deadline;
 *   (v) GET /metrics while the engine's /metrics is 80 MB.
 * For each: the coded answer, the answer's bytes, the attack's duration (first byte sent to the last
 * answer), /healthz latency p50/p99/max over the probes scheduled meanwhile (measured from the time
 * each was due, so a frozen service is not under-counted; an attack over in under 1 s is sent again, back to
 * back, until 1 s has passed, so that ~100 probes see it), the service's RSS before, its peak from the
 * attack's start to 2 s after its end, and 2 s after its end; the service's own event-loop delay at most
 * from 2 s before the attack's start (the settling time) to 2 s after its end (its /metrics: a slow /healthz with a short delay is the machine's, not the service's);
 * and whether the process is still up
 * (./report.ts prints the table). Every run starts a fresh service, answers one well-formed chat (a
 * served sidecar is warm), and runs the attacks in order in it; every loop is bounded.
 *
 *   node dist/bench/hostile/main.js [--runs 3] [--only 0abcdefghijklmnopqrstuv] [--json-file FILE]
 *   taskset -c 0 node dist/bench/hostile/main.js --child-cpus 1   (the service alone on CPU 1)
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import os from "node:os";
import { Worker } from "node:worker_threads";
import { Command } from "commander";
import { startHostileEngine } from "../peers/hostile-engine.js";
import { ATTACKS_16 } from "./attacks-16.js";
import { ATTACKS_31, CONTROL, HEAD, HI, RETURN } from "./attacks-31.js";
import { ATTACKS_32 } from "./attacks-32.js";
import { chat, LOOP_LAG, serviceSeries } from "./client.js";
import {
  loadavg,
  MiB,
  MIN_WINDOW_MS,
  PROBE_MS,
  rssOf,
  SETTLE_MS,
  sleep,
  type Answer,
  type ProbeReport,
  type Row,
  type Target,
} from "./common.js";
import { medianTable, table } from "./report.js";
import {
  healthz,
  MAX_CONNECTION_BYTES,
  SLOW_CLIENT_TIMEOUT_MS,
  startService,
  startStorePeer,
  stopService,
  UPSTREAM_DEADLINE_MS,
  UPSTREAM_TIMEOUT_MS,
} from "./service.js";

const ATTACKS = [CONTROL, ...ATTACKS_16, ...ATTACKS_32, ...ATTACKS_31];
const ALL = ATTACKS.map((a) => a.key).join("");
const PROBE = new URL("./probe.js", import.meta.url);

async function runOnce(
  only: string,
  nodeFlags: string[],
  serveFlags: string[],
  cpus: string | undefined,
  log: (s: string) => void,
): Promise<Row[]> {
  const store = { mget: "*1\r\n$-1\r\n" };
  const peer = await startStorePeer(store);
  // 2,000,000 tokens of context: (k)'s answer of 2^20 tokens and (q)'s 300,000 fit under the token limit
  const engine = await startHostileEngine(2_000_000);
  const svc = await startService(nodeFlags, serveFlags, cpus, engine.url, peer.url);
  const target: Target = {
    port: svc.port,
    http: `http://127.0.0.1:${svc.port}`,
    ws: `ws://127.0.0.1:${svc.port}/v1/stream`,
    grpc: `127.0.0.1:${svc.grpcPort}`,
    store,
    engine,
    loopLag: { maxS: 0 },
  };
  const worker = new Worker(PROBE, { workerData: { port: svc.port, pid: svc.pid } });
  const reports: ProbeReport[] = [];
  let wake: (() => void) | null = null;
  worker.on("message", (r: ProbeReport) => {
    reports.push(r);
    wake?.();
  });
  const nextReport = () =>
    new Promise<ProbeReport>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no probe report in 90 s")), 90_000);
      const check = () => {
        const r = reports.shift();
        if (r) {
          clearTimeout(t);
          wake = null;
          resolve(r);
        } else wake = check;
      };
      check();
    });
  const rows: Row[] = [];
  try {
    await sleep(SETTLE_MS);
    // a served sidecar is warm: one well-formed answer first (its first render starts the render thread)
    engine.script({ kind: "ok", ids: [...HEAD, HI, RETURN] });
    await chat(target, { model: "gpt-oss", messages: [{ role: "user", content: "hi" }] });
    // each scrape starts the service's event-loop delay over: from here, each attack's last read is the next one's
    // start (a read just before an attack would also fill the one-second cache of the engine's metrics that (v) reads)
    await serviceSeries(target, LOOP_LAG).catch(() => NaN);
    target.loopLag.maxS = 0;
    for (const a of ATTACKS) {
      if (!only.includes(a.key)) continue;
      if (svc.proc.exitCode !== null || svc.proc.signalCode !== null) {
        log(`(${a.key}) skipped: the service is gone`);
        continue;
      }
      const send = a.prepare(target);
      await sleep(SETTLE_MS);
      const rssBefore = rssOf(svc.pid) ?? 0;
      const load0 = loadavg();
      worker.postMessage("begin");
      const t0 = performance.now();
      let answer: Answer;
      try {
        answer = await send();
      } catch (e) {
        answer = { code: `client error: ${(e as Error).message}`, bytes: 0 };
      }
      const durationMs = performance.now() - t0;
      // an attack over in less than MIN_WINDOW_MS is sent again, back to back, until then, so that the
      // probes see it (the answer and duration are the first one's)
      let repeats = 1;
      while (performance.now() - t0 < MIN_WINDOW_MS && repeats < 10_000) {
        try {
          await send();
        } catch {
          // counted as sent; the first answer is the one reported
        }
        repeats++;
      }
      if (repeats > 1) answer.note = `${answer.note ? `${answer.note}; ` : ""}sent ${repeats}× back to back for ${MIN_WINDOW_MS / 1000} s`;
      worker.postMessage("end");
      await sleep(SETTLE_MS);
      // the attack's own reads of /metrics ((k), (l)) are in target.loopLag too
      const lagRead = await serviceSeries(target, LOOP_LAG).then(
        () => true,
        () => false,
      );
      const loopLagMaxMs = lagRead ? 1000 * target.loopLag.maxS : NaN;
      target.loopLag.maxS = 0;
      worker.postMessage("report");
      const probe = await nextReport();
      const up = svc.proc.exitCode === null && svc.proc.signalCode === null && (await healthz(svc.port));
      const row: Row = {
        key: a.key,
        name: a.name,
        answer,
        durationMs,
        probe,
        loopLagMaxMs,
        rssBefore,
        repeats,
        up,
        load: `${load0} → ${loadavg()}`,
      };
      rows.push(row);
      log(
        `(${a.key}) ${answer.code} · ${answer.bytes} B · ${durationMs.toFixed(0)} ms · healthz p99 ${probe.p99.toFixed(1)} ms max ${probe.max.toFixed(1)} ms · loop lag max ${loopLagMaxMs.toFixed(0)} ms · RSS peak ${(probe.rssPeak / MiB).toFixed(0)} MiB · ${up ? "up" : "DOWN"}`,
      );
    }
  } finally {
    worker.postMessage("stop");
    await stopService(svc);
    await worker.terminate();
    await engine.close();
    peer.close();
  }
  if (svc.warnLines.length) log(`service warnings: ${svc.warnLines.length}, first: ${svc.warnLines[0]}`);
  return rows;
}

async function main(): Promise<void> {
  const opts = new Command()
    .option("--runs <n>", "runs, each with a fresh service (medians printed when more than one)", (v) => Number(v), 1)
    .option("--only <letters>", "run a subset of the attacks: 0 (none: the control) and a–v", ALL)
    .option("--server-flags <flags>", "extra node flags for the service child, space-separated", "")
    .option("--serve-flags <flags>", "extra `serve` flags for the service child, space-separated", "")
    .option(
      "--child-cpus <list>",
      "run the service on these CPUs only (taskset -c LIST); run the bench itself under taskset to keep it off them",
    )
    .option("--json-file <file>", "also write every run's rows as JSON to FILE")
    .parse()
    .opts<{ runs: number; only: string; serverFlags: string; serveFlags: string; childCpus?: string; jsonFile?: string }>();
  const nodeFlags = opts.serverFlags.split(" ").filter(Boolean);
  const serveFlags = opts.serveFlags.split(" ").filter(Boolean);
  const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
  // the service's heap limit, for its memory budget (75% of it by default)
  const heapLimit = await new Promise<number>((resolve) => {
    const p = spawn(process.execPath, [...nodeFlags, "-p", "v8.getHeapStatistics().heap_size_limit"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    let out = "";
    p.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    p.on("exit", () => resolve(Number(out.trim()) || 0));
  });
  const runs: Row[][] = [];
  for (let i = 0; i < opts.runs; i++) {
    log(`run ${i + 1} of ${opts.runs}, load ${loadavg()}`);
    runs.push(await runOnce(opts.only, nodeFlags, serveFlags, opts.childCpus, log));
  }
  const lines = [
    `Hostile bench — node ${process.version}, ${os.cpus()[0]?.model ?? "?"} × ${os.cpus().length}, ${opts.runs} run(s); ` +
      `the service's heap limit ${(heapLimit / MiB).toFixed(0)} MiB (memory budget 75%: ${((0.75 * heapLimit) / MiB).toFixed(0)} MiB), ` +
      `--max-connection-bytes ${MAX_CONNECTION_BYTES / MiB} MiB, --upstream-timeout-ms ${UPSTREAM_TIMEOUT_MS}, ` +
      `--upstream-deadline-ms ${UPSTREAM_DEADLINE_MS}, --slow-client-timeout-ms ${SLOW_CLIENT_TIMEOUT_MS}; /healthz probed every ${PROBE_MS} ms, latency from when each probe was due` +
      `${opts.childCpus ? `; the service on CPUs ${opts.childCpus}` : ""}.`,
    "",
  ];
  runs.forEach((rows, i) => lines.push(`Run ${i + 1}:`, "", table(rows), ""));
  if (runs.length > 1) lines.push(`Medians of ${runs.length} runs:`, "", medianTable(runs), "");
  console.log(lines.join("\n"));
  if (opts.jsonFile) writeFileSync(opts.jsonFile, JSON.stringify({ node: process.version, heapLimit, runs }, null, 2));
}

await main();
