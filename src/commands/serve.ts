/**
 * `harmony-sidecar serve`: flags first, then HARMONY_* environment
 * variables, then defaults that work with no configuration; every setting
 * is a row of ./settings.ts.
 */
import { setFlagsFromString } from "node:v8";
import { pino } from "pino";
import { SERVICE_DEFAULTS } from "../core/defaults.js";
import { installLastResort, ListenError, Server, type ServerOptions } from "../server.js";
import { DEFAULT_COT_STORE, DEFAULT_LIMITS, type Limits } from "../service/service.js";
import type { EngineKind } from "../upstream/index.js";
import { commaList } from "./lists.js";
import { consoleDestination } from "./console-log.js";
import { SettingsReader, type ServeFlags } from "./settings.js";
import { listenProblem, USAGE_EXIT, UsageError } from "./usage.js";
import { packageVersion } from "./version.js";

export type { ServeFlags } from "./settings.js";

/** The V8 flags `serve` sets itself, each from its setting (0: V8's own value). */
export const V8_SETTINGS = [
  { key: "heapGrowth", flag: "--heap-growing-percent" },
  { key: "inlineBudget", flag: "--max-inlined-bytecode-size-cumulative" },
] as const;

/** Each V8 flag of V8_SETTINGS with its setting's value. */
export function resolveV8Settings(flags: ServeFlags, env: NodeJS.ProcessEnv): { flag: string; value: number }[] {
  const r = new SettingsReader(flags, env);
  return V8_SETTINGS.map(({ key, flag }) => ({ flag, value: r.int(key) }));
}

/**
 * Give V8 one of its flags, unless the value is 0 or node was started with
 * that flag, which then wins (node refuses V8 flags in NODE_OPTIONS, so the
 * command line is the only other place). Says which of the three happened.
 *
 * Node calls V8 flags changed after start-up undefined behaviour in
 * general. These two are read when they are used: the heap growth each
 * time V8 sets the next old-generation limit, the inlining budget each time
 * it optimizes a function (the service's hot functions are optimized after
 * start-up); the benchmark shows both taking effect (bench/RESULTS.md).
 * They are process-wide: worker threads get them too. Only
 * --max-old-space-size caps the heap's growth, not a container's memory
 * limit.
 */
export function applyV8Flag(
  flag: string,
  value: number,
  node: { execArgv: readonly string[]; setFlags: (flags: string) => void },
): "set" | "node flag" | "off" {
  if (value === 0) return "off";
  // V8 reads - and _ alike in a flag's name; its value follows = or comes next
  const canonical = (arg: string) => arg.split("=")[0]!.replace(/_/g, "-");
  if (node.execArgv.some((a) => canonical(a) === flag)) return "node flag";
  node.setFlags(`${flag}=${value}`);
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
    slowClientTimeoutMs: r.int("slowClientTimeoutMs"),
  };
  const upstreamUrl = r.text("upstream");
  const reasoningField = r.text("reasoningField") as "reasoning" | "reasoning_content";
  return {
    upstream:
      upstreamUrl === ""
        ? undefined
        : {
            url: upstreamUrl,
            idleTimeoutMs: r.int("upstreamTimeoutMs"),
            reasoningField,
            deadlineMs: r.int("upstreamDeadlineMs"),
            apiKey: r.text("upstreamApiKey") || undefined,
            readiness: r.text("upstreamReadiness") === "true",
          },
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

/**
 * Serve until SIGTERM or SIGINT. A setting its row refuses, or a port that
 * cannot be bound, is one line on stderr and exit 2; on a terminal the
 * start is a banner (where everything is, how to stop) and the log lines
 * are short, elsewhere they are pino's JSON.
 */
export async function runServe(flags: ServeFlags, tty: boolean = process.stdout.isTTY === true): Promise<void> {
  let options: ServerOptions;
  let v8: ReturnType<typeof resolveV8Settings>;
  try {
    options = resolveOptions(flags, process.env);
    v8 = resolveV8Settings(flags, process.env);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`serve: ${e.message}\n`);
    process.exitCode = USAGE_EXIT;
    return;
  }
  if (tty)
    options.logger = pino(
      { level: options.logLevel ?? SERVICE_DEFAULTS.logLevel, base: { service: "harmony-sidecar" } },
      consoleDestination(process.stdout, packageVersion()),
    );
  // process-wide, so set here rather than by Service (which tests and
  // benchmarks also run inside other processes)
  const node = { execArgv: process.execArgv, setFlags: setFlagsFromString };
  const applied = v8.map(({ flag, value }) => ({ flag, value, outcome: applyV8Flag(flag, value, node) }));
  const server = new Server(options);
  const service = server.service;
  // the handlers come first: a Ctrl+C as soon as the banner shows (or before) stops the server once it has started
  const starting = server.start();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (tty && signal === "SIGINT") process.stdout.write("\n"); // after the terminal's ^C
    service.logger.info({ signal }, "signal received");
    starting
      .then(() => server.stop())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  try {
    await starting;
  } catch (e) {
    // the edges and workers are already stopped (Server.start): say why in one line and leave
    const line =
      e instanceof ListenError
        ? listenProblem(e.reason, {
            host: e.host,
            port: e.port,
            flag: e.edge === "http" ? "--port" : "--grpc-port",
            what: e.edge === "http" ? "the HTTP/WebSocket" : "the gRPC",
          })
        : `could not start: ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`;
    process.stderr.write(`serve: ${line}\n`);
    process.exit(e instanceof ListenError ? USAGE_EXIT : 1);
  }
  // from here on, a bug nothing handled is logged and counted, and the process goes on serving
  installLastResort(service);
  // start-up detail: under the banner on a terminal only at debug level
  for (const a of applied)
    service.logger[tty ? "debug" : "info"]({ flag: a.flag, value: a.outcome === "set" ? a.value : null, outcome: a.outcome }, "V8 flag");
}
