/** `harmony-sidecar loadtest`: fault-injected streams against a server, checked end to end. */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { Vocabulary } from "../core/vocab.js";
import { FAULT_KINDS, type FaultKind } from "../loadtest/generate.js";
import { pino } from "pino";
import { machineInfo, renderLoadtestHtml, renderOpenAIHtml } from "../loadtest/html.js";
import type { Api } from "../loadtest/openai-plan.js";
import { formatOpenAIReport, runOpenAILoadtest, type OpenAILoadOptions } from "../loadtest/openai-run.js";
import { formatReport, runLoadtest, type Chunking, type LoadtestOptions, type Report } from "../loadtest/run.js";
import { Server } from "../server.js";
import { DEFAULT_LIMITS } from "../service/service.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";
import { commaList } from "./lists.js";
import { checkWritable, USAGE_EXIT, UsageError } from "./usage.js";

export interface LoadtestFlags {
  url?: string;
  grpc?: string;
  token?: string;
  streams: string;
  /** No default of its own: 256 streams, or 16 requests with --openai. */
  concurrency?: string;
  streamsPerFrame: string;
  chunking: Chunking;
  stepTokens: string;
  faultRate: string;
  faults: string;
  seed: string;
  duration: string;
  mode: "resilient" | "strict";
  window: string;
  compareStrict: boolean;
  handles: boolean;
  only?: string;
  json?: string;
  html?: string;
  progress: boolean;
  openai?: string;
  compare?: string;
  requests: string;
  apis: string;
  stream: "both" | "on" | "off";
  model?: string;
  timeoutMs: string;
  runId?: string;
}

function num(name: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = raw.trim() === "" ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < min || n > max)
    throw new UsageError(`--${name} must be a number in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  return n;
}

/** `--url`: a WebSocket URL with a path (the sidecar's is /v1/stream); an http(s) URL is said to be the wrong kind, not tried over gRPC. */
export function checkStreamUrl(url: string): string {
  if (/^https?:\/\//i.test(url))
    throw new UsageError(
      `--url ${url} is an HTTP URL: --url takes the WebSocket URL (ws://HOST:PORT/v1/stream); for gRPC give --grpc HOST:PORT, for an OpenAI-compatible endpoint --openai ${url}`,
    );
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`--url must be a WebSocket URL such as ws://127.0.0.1:8765/v1/stream, got ${JSON.stringify(url)}`);
  }
  if (u.protocol !== "ws:" && u.protocol !== "wss:")
    throw new UsageError(`--url must be a ws:// or wss:// URL such as ws://127.0.0.1:8765/v1/stream, got ${JSON.stringify(url)}`);
  if (u.pathname === "/")
    throw new UsageError(`--url ${url} has no path: the sidecar's WebSocket streams are at ${u.protocol}//${u.host}/v1/stream`);
  return url;
}

/** `--grpc`: host:port, no scheme. */
export function checkGrpcAddress(address: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(address))
    throw new UsageError(`--grpc takes host:port without a scheme (e.g. 127.0.0.1:8766), got ${JSON.stringify(address)}`);
  if (!/^(\[[0-9a-f:.]+\]|[^\s:/[\]]+):\d{1,5}$/i.test(address))
    throw new UsageError(`--grpc must be host:port (e.g. 127.0.0.1:8766), got ${JSON.stringify(address)}`);
  return address;
}

export function loadtestOptions(f: LoadtestFlags): LoadtestOptions {
  if (f.url && f.grpc) throw new UsageError("give --url (WebSocket) or --grpc, not both");
  const faults = f.faults === "all" ? [...FAULT_KINDS] : commaList(f.faults);
  for (const k of faults) {
    if (!(FAULT_KINDS as readonly string[]).includes(k))
      throw new UsageError(`unknown fault kind ${JSON.stringify(k)} in --faults; known: ${FAULT_KINDS.join(", ")}`);
  }
  return {
    ...(f.url ? { url: checkStreamUrl(f.url) } : {}),
    ...(f.grpc ? { grpc: checkGrpcAddress(f.grpc) } : {}),
    ...(f.token ? { token: f.token } : {}),
    streams: Math.floor(num("streams", f.streams, 1)),
    concurrency: Math.floor(num("concurrency", f.concurrency ?? "256", 1, 16000)),
    streamsPerFrame: Math.floor(num("streams-per-frame", f.streamsPerFrame, 1)),
    chunking: f.chunking,
    stepTokens: Math.floor(num("step-tokens", f.stepTokens, 1)),
    faultRate: num("fault-rate", f.faultRate, 0, 1),
    faults: faults as FaultKind[],
    seed: Math.floor(num("seed", f.seed, 0, 2 ** 32 - 1)),
    durationSec: num("duration", f.duration, 0),
    mode: f.mode,
    window: Math.floor(num("window", f.window, 1, 60)),
    compareStrict: f.compareStrict,
    handles: f.handles === true,
    ...(f.only !== undefined ? { only: Math.floor(num("only", f.only, 0)) } : {}),
    progress: f.progress,
  };
}

/** Flags that only drive the parser service (WebSocket or gRPC), refused with --openai. */
const SERVICE_ONLY: [keyof LoadtestFlags, string][] = [
  ["url", "--url"],
  ["grpc", "--grpc"],
  ["compareStrict", "--compare-strict"],
  ["handles", "--handles"],
];

/** `loadtest --openai URL`'s options, checked (a usage error throws one line). */
export function openaiOptions(f: LoadtestFlags): OpenAILoadOptions {
  if (!f.openai) throw new UsageError("--compare needs --openai URL");
  for (const [k, flag] of SERVICE_ONLY) if (f[k]) throw new UsageError(`${flag} drives the parser service; it does not go with --openai`);
  const http = (name: string, u: string) => {
    if (!/^https?:\/\/[^/]/.test(u)) throw new UsageError(`--${name} must be an http(s) URL, got ${JSON.stringify(u)}`);
    return u;
  };
  const apis = commaList(f.apis);
  if (apis.length === 0 || apis.some((a) => a !== "chat" && a !== "responses"))
    throw new UsageError(`--apis must list chat and/or responses, got ${JSON.stringify(f.apis)}`);
  if (!["both", "on", "off"].includes(f.stream)) throw new UsageError(`--stream must be both, on or off, got ${JSON.stringify(f.stream)}`);
  if (f.runId !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(f.runId))
    throw new UsageError("--run-id must be 1 to 64 letters, digits, _ or -");
  const requests = Math.floor(num("requests", f.requests, 1, 10_000_000));
  const only = f.only !== undefined ? Math.floor(num("only", f.only, 0)) : undefined;
  return {
    url: http("openai", f.openai),
    ...(f.compare ? { compare: http("compare", f.compare) } : {}),
    ...(f.token ? { token: f.token } : {}),
    requests,
    concurrency: Math.floor(num("concurrency", f.concurrency ?? "16", 1, 4096)),
    apis: [...new Set(apis)] as Api[],
    stream: f.stream,
    seed: Math.floor(num("seed", f.seed, 0, 2 ** 32 - 1)),
    ...(f.model ? { model: f.model } : {}),
    timeoutMs: Math.floor(num("timeout-ms", f.timeoutMs, 100, 3_600_000)),
    ...(f.runId ? { runId: f.runId } : {}),
    ...(only !== undefined ? { only } : {}),
    progress: f.progress,
  };
}

/** `loadtest --openai`: exit 0 when the first target lost nothing, 1 on a loss or failure, 2 on a usage error or an unreachable target. */
async function runOpenAICommand(flags: LoadtestFlags): Promise<number> {
  let opts: OpenAILoadOptions;
  try {
    opts = openaiOptions(flags);
    checkOutputs(flags);
  } catch (e) {
    process.stderr.write(`loadtest: ${(e as Error).message}\n`);
    return USAGE_EXIT;
  }
  let report;
  try {
    report = await runOpenAILoadtest(opts);
  } catch (e) {
    process.stderr.write(`loadtest: ${(e as Error).message.split("\n")[0]}\n`);
    return 2;
  }
  if (opts.only === undefined) process.stdout.write(formatOpenAIReport(report) + "\n");
  const wrote = writeReports(flags, JSON.stringify(report, null, 2) + "\n", () =>
    renderOpenAIHtml(report, { settings: { ...opts }, machine: machineInfo() }),
  );
  if (wrote !== null) return wrote;
  return report.ok ? 0 : 1;
}

/** `--json` and `--html` checked before the run: a file that could not be written is said now, not after it. */
function checkOutputs(flags: LoadtestFlags): void {
  if (flags.json) checkWritable("--json", flags.json);
  if (flags.html) checkWritable("--html", flags.html);
}

/**
 * Write the JSON and HTML reports, and say where (on stdout after the
 * report; on stderr with --only, whose stdout is the stream's dump). A
 * write that fails even so is one line and exit 2 (null: written).
 */
function writeReports(flags: LoadtestFlags, json: string, html: () => string): number | null {
  const say = (line: string) => (flags.only === undefined ? process.stdout : process.stderr).write(line + "\n");
  try {
    if (flags.json) {
      writeFileSync(flags.json, json);
      say(`Wrote the JSON report to ${path.resolve(flags.json)}`);
    }
    if (flags.html) {
      writeFileSync(flags.html, html());
      say(`Wrote the HTML report to ${path.resolve(flags.html)} (open it in a browser)`);
    }
  } catch (e) {
    process.stderr.write(`loadtest: could not write the report: ${(e as Error).message.split("\n")[0]}\n`);
    return USAGE_EXIT;
  }
  return null;
}

/** Run the load test against `opts.url` or `opts.grpc`, or, with neither, against a server started here on a free loopback port. */
export async function loadtest(opts: LoadtestOptions, enc: HarmonyEncoding, vocab: Vocabulary): Promise<Report> {
  if (opts.url || opts.grpc) return runLoadtest(opts, enc, vocab);
  const server = new Server({
    host: "127.0.0.1",
    port: 0,
    grpcPort: -1,
    workers: 2,
    drainTimeoutMs: 5000,
    limits: DEFAULT_LIMITS,
    logger: pino({ level: "silent" }),
  });
  try {
    const { port } = await server.start();
    return await runLoadtest({ ...opts, url: `ws://127.0.0.1:${port}/v1/stream` }, enc, vocab, "in-process server on a free loopback port");
  } finally {
    await server.stop();
  }
}

export async function runLoadtestCommand(flags: LoadtestFlags): Promise<number> {
  if (flags.openai !== undefined || flags.compare !== undefined) return runOpenAICommand(flags);
  let opts: LoadtestOptions;
  try {
    opts = loadtestOptions(flags);
    checkOutputs(flags);
  } catch (e) {
    process.stderr.write(`loadtest: ${(e as Error).message}\n`);
    return USAGE_EXIT;
  }
  const enc = loadHarmonyEncoding();
  const vocab = new Vocabulary(enc.table);
  let report;
  try {
    report = await loadtest(opts, enc, vocab);
  } catch (e) {
    // a server that refuses us or goes away is not a test result: say so plainly
    const target = opts.url ?? (opts.grpc ? `grpc://${opts.grpc}` : "the in-process server");
    const message = (e as Error).message.split("\n")[0]!;
    const hint = /ECONNREFUSED/.test(message) ? " (is a server running there? npx harmony-sidecar serve starts one)" : "";
    process.stderr.write(`loadtest: ${target}: ${message}${hint}\n`);
    return USAGE_EXIT;
  }
  if (opts.only === undefined) process.stdout.write(formatReport(report) + "\n");
  const wrote = writeReports(flags, JSON.stringify(report, null, 2) + "\n", () =>
    renderLoadtestHtml(report, { settings: { ...opts }, machine: machineInfo() }),
  );
  if (wrote !== null) return wrote;
  return report.ok ? 0 : 1;
}
