/**
 * `harmony-sidecar serve`: flags first, then HARMONY_* environment
 * variables, then defaults that work with no configuration; every setting
 * is a row of ./settings.ts.
 */
import { setFlagsFromString } from "node:v8";
import { Server, type ServerOptions } from "../server.js";
import { DEFAULT_COT_STORE, DEFAULT_LIMITS, type Limits } from "../service/service.js";
import type { EngineKind } from "../upstream/index.js";
import { commaList } from "./lists.js";
import { SettingsReader, type ServeFlags } from "./settings.js";

export { DEFAULT_HEAP_GROWTH, type ServeFlags } from "./settings.js";

/** The heap growth setting (percent; 0: V8's own heuristics). */
export function resolveHeapGrowth(flags: ServeFlags, env: NodeJS.ProcessEnv): number {
  return new SettingsReader(flags, env).int("heapGrowth");
}

/**
 * Give V8 the heap growth setting, unless it is 0 or node was started with
 * its own --heap-growing-percent, which then wins (node refuses V8 flags in
 * NODE_OPTIONS, so the command line is the only other place). Says which
 * of the three happened.
 *
 * Node calls V8 flags changed after start-up undefined behaviour in
 * general; this one is read each time V8 sets the next old-generation
 * limit, and the benchmark shows it taking effect (bench/RESULTS.md). It is
 * process-wide: worker threads' heaps grow the same way. Only
 * --max-old-space-size caps the growth, not a container's memory limit.
 */
export function applyHeapGrowth(
  percent: number,
  node: { execArgv: readonly string[]; setFlags: (flags: string) => void },
): "set" | "node flag" | "off" {
  if (percent === 0) return "off";
  if (node.execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a))) return "node flag";
  node.setFlags(`--heap-growing-percent=${percent}`);
  return "set";
}

export function resolveOptions(flags: ServeFlags, env: NodeJS.ProcessEnv): ServerOptions {
  const r = new SettingsReader(flags, env);
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    maxFrameBytes: r.int("maxFrameBytes"),
    maxStreamsPerConnection: r.int("maxStreams"),
    maxIdsPerFrame: r.int("maxIdsPerFrame"),
    maxOpsPerFrame: r.int("maxOpsPerFrame"),
    maxStreamName: r.int("maxStreamName"),
    maxConnectionBytes: r.int("maxConnectionBytes"),
    memoryBudgetBytes: r.int("memoryBudgetMb") * 1024 * 1024,
    idleTimeoutMs: r.int("idleTimeoutMs"),
    pingIntervalMs: r.int("pingIntervalMs"),
  };
  const upstreamUrl = r.text("upstream");
  const reasoningField = r.text("reasoningField") as "reasoning" | "reasoning_content";
  return {
    upstream: upstreamUrl === "" ? undefined : { url: upstreamUrl, idleTimeoutMs: r.int("upstreamTimeoutMs"), reasoningField },
    upstreamKind: r.text("upstreamKind") as EngineKind,
    host: r.text("host"),
    port: r.int("port"),
    grpcPort: r.int("grpcPort"),
    workers: r.int("workers"),
    inline: r.int("inline"),
    token: r.text("token") || undefined,
    logLevel: r.text("logLevel"),
    drainTimeoutMs: r.int("drainTimeoutMs"),
    cotStore: {
      ...DEFAULT_COT_STORE,
      maxBytes: r.int("cotStoreBytes"),
      ttlMs: r.int("cotStoreTtlMs"),
      shared: r.text("cotStore") === "memory" ? undefined : { url: r.text("cotStore"), timeoutMs: r.int("cotStoreTimeoutMs") },
    },
    responseStore: { maxBytes: r.int("responseStoreBytes"), ttlMs: r.int("responseStoreTtlMs") },
    shutdownDelayMs: r.int("shutdownDelayMs"),
    access: {
      allowOrigins: commaList(r.text("allowOrigin")),
      allowHosts: commaList(r.text("allowHost")),
      publicMetrics: r.text("publicMetrics") === "true",
    },
    limits,
  };
}

export async function runServe(flags: ServeFlags): Promise<void> {
  let options: ServerOptions;
  let heapGrowth: number;
  try {
    options = resolveOptions(flags, process.env);
    heapGrowth = resolveHeapGrowth(flags, process.env);
  } catch (e) {
    process.stderr.write(`serve: ${(e as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  // process-wide, so set here rather than by Service (which tests and
  // benchmarks also run inside other processes)
  const heap = applyHeapGrowth(heapGrowth, { execArgv: process.execArgv, setFlags: setFlagsFromString });
  const server = new Server(options);
  const service = server.service;
  await server.start();
  service.logger.info({ heap_growing_percent: heap === "set" ? heapGrowth : null, heap_growth: heap }, "V8 heap growth");
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.logger.info({ signal }, "signal received");
    server.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
