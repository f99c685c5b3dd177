/**
 * `harmony-sidecar serve`: flags first, then HARMONY_* environment
 * variables, then defaults that work with no configuration.
 */
import { setFlagsFromString } from "node:v8";
import { Service, DEFAULTS, DEFAULT_COT_STORE, DEFAULT_LIMITS, type Limits, type ServiceOptions } from "../service/service.js";
import { MAX_STORE_BYTES } from "../service/cot-store.js";

/**
 * How far V8 lets the old generation grow past what a full GC left alive
 * before it starts the next one, in percent (V8's --heap-growing-percent).
 * V8's own factor left the service's old generation less headroom than its
 * young generation holds, and V8 then starts marking at once: at half of
 * the peak step-frame load that was a mark-compact every 0.3-0.65 s, each
 * a pause of ~7-8 ms (up to 17) plus ~80 ms of marking on a thread that
 * shares the cores.
 * With 300 (a limit of 4x the live size) there were 0-1 per run
 * (bench/RESULTS.md). It costs memory: up to 4x the live old generation,
 * tens of MB for a service holding ~25 MB.
 */
export const DEFAULT_HEAP_GROWTH = 300;

export interface ServeFlags {
  host?: string;
  port?: string;
  grpcPort?: string;
  workers?: string;
  inline?: string;
  token?: string;
  logLevel?: string;
  maxFrameBytes?: string;
  maxStreams?: string;
  maxIdsPerFrame?: string;
  idleTimeoutMs?: string;
  pingIntervalMs?: string;
  drainTimeoutMs?: string;
  upstream?: string;
  upstreamTimeoutMs?: string;
  reasoningField?: string;
  cotStoreBytes?: string;
  cotStoreTtlMs?: string;
  heapGrowth?: string;
}

/** Every setting: flag name, environment variable, default. */
export const SETTINGS = [
  ["host", "HARMONY_HOST", DEFAULTS.host],
  ["port", "HARMONY_PORT", DEFAULTS.port],
  ["grpcPort", "HARMONY_GRPC_PORT", DEFAULTS.grpcPort],
  ["workers", "HARMONY_WORKERS", DEFAULTS.workers],
  ["inline", "HARMONY_INLINE", DEFAULTS.inline],
  ["token", "HARMONY_TOKEN", ""],
  ["logLevel", "HARMONY_LOG_LEVEL", DEFAULTS.logLevel],
  ["maxFrameBytes", "HARMONY_MAX_FRAME_BYTES", DEFAULT_LIMITS.maxFrameBytes],
  ["maxStreams", "HARMONY_MAX_STREAMS", DEFAULT_LIMITS.maxStreamsPerConnection],
  ["maxIdsPerFrame", "HARMONY_MAX_IDS_PER_FRAME", DEFAULT_LIMITS.maxIdsPerFrame],
  ["idleTimeoutMs", "HARMONY_IDLE_TIMEOUT_MS", DEFAULT_LIMITS.idleTimeoutMs],
  ["pingIntervalMs", "HARMONY_PING_INTERVAL_MS", DEFAULT_LIMITS.pingIntervalMs],
  ["drainTimeoutMs", "HARMONY_DRAIN_TIMEOUT_MS", DEFAULTS.drainTimeoutMs],
  ["upstream", "HARMONY_UPSTREAM", ""],
  ["upstreamTimeoutMs", "HARMONY_UPSTREAM_TIMEOUT_MS", 120_000],
  ["reasoningField", "HARMONY_REASONING_FIELD", "reasoning"],
  ["cotStoreBytes", "HARMONY_COT_STORE_BYTES", DEFAULT_COT_STORE.maxBytes],
  ["cotStoreTtlMs", "HARMONY_COT_STORE_TTL_MS", DEFAULT_COT_STORE.ttlMs],
  ["heapGrowth", "HARMONY_HEAP_GROWTH", DEFAULT_HEAP_GROWTH],
] as const;

/** An environment variable's value; set but empty counts as unset (VAR= in a compose file or a shell). */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === "" ? undefined : v;
}

/** A decimal integer setting: digits, an optional leading minus (not "", "1e2" or "0x10", which Number() would take). */
function decimal(raw: string): number {
  return /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
}

/** A setting's text: its flag, else its environment variable, else the default. */
function setting(flags: ServeFlags, env: NodeJS.ProcessEnv, key: keyof ServeFlags, envName: string, def: string | number): string {
  return flags[key] ?? envValue(env, envName) ?? String(def);
}

/** An integer setting of at least `min`. */
function intSetting(flags: ServeFlags, env: NodeJS.ProcessEnv, key: keyof ServeFlags, envName: string, def: number, min: number): number {
  const raw = setting(flags, env, key, envName, def);
  const n = decimal(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${key} (${envName}) must be an integer ≥ ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

function atMost(n: number, max: number, what: string): number {
  if (n > max) throw new Error(`${what} must be at most ${max}, got ${n}`);
  return n;
}

/** The heap growth setting (percent; 0: V8's own heuristics). */
export function resolveHeapGrowth(flags: ServeFlags, env: NodeJS.ProcessEnv): number {
  return atMost(
    intSetting(flags, env, "heapGrowth", "HARMONY_HEAP_GROWTH", DEFAULT_HEAP_GROWTH, 0),
    1000,
    "heapGrowth (HARMONY_HEAP_GROWTH)",
  );
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

export function resolveOptions(flags: ServeFlags, env: NodeJS.ProcessEnv): ServiceOptions {
  const get = (key: keyof ServeFlags, envName: string, def: string | number): string => setting(flags, env, key, envName, def);
  const int = (key: keyof ServeFlags, envName: string, def: number, min: number): number => intSetting(flags, env, key, envName, def, min);
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    maxFrameBytes: int("maxFrameBytes", "HARMONY_MAX_FRAME_BYTES", DEFAULT_LIMITS.maxFrameBytes, 1024),
    maxStreamsPerConnection: int("maxStreams", "HARMONY_MAX_STREAMS", DEFAULT_LIMITS.maxStreamsPerConnection, 1),
    maxIdsPerFrame: int("maxIdsPerFrame", "HARMONY_MAX_IDS_PER_FRAME", DEFAULT_LIMITS.maxIdsPerFrame, 1),
    idleTimeoutMs: int("idleTimeoutMs", "HARMONY_IDLE_TIMEOUT_MS", DEFAULT_LIMITS.idleTimeoutMs, 1000),
    pingIntervalMs: int("pingIntervalMs", "HARMONY_PING_INTERVAL_MS", DEFAULT_LIMITS.pingIntervalMs, 100),
  };
  const upstreamUrl = get("upstream", "HARMONY_UPSTREAM", "");
  if (upstreamUrl !== "" && !/^https?:\/\//.test(upstreamUrl))
    throw new Error(`upstream (HARMONY_UPSTREAM) must be an http(s) URL, got ${JSON.stringify(upstreamUrl)}`);
  const reasoningField = get("reasoningField", "HARMONY_REASONING_FIELD", "reasoning");
  if (reasoningField !== "reasoning" && reasoningField !== "reasoning_content") {
    throw new Error(`reasoningField (HARMONY_REASONING_FIELD) must be reasoning or reasoning_content`);
  }
  return {
    upstream:
      upstreamUrl === ""
        ? undefined
        : {
            url: upstreamUrl,
            idleTimeoutMs: int("upstreamTimeoutMs", "HARMONY_UPSTREAM_TIMEOUT_MS", 120_000, 100),
            reasoningField,
          },
    host: get("host", "HARMONY_HOST", DEFAULTS.host),
    port: int("port", "HARMONY_PORT", DEFAULTS.port, 0),
    grpcPort: int("grpcPort", "HARMONY_GRPC_PORT", DEFAULTS.grpcPort, -1),
    workers: int("workers", "HARMONY_WORKERS", DEFAULTS.workers, 0),
    inline: int("inline", "HARMONY_INLINE", DEFAULTS.inline ?? 0, 0),
    token: get("token", "HARMONY_TOKEN", "") || undefined,
    logLevel: get("logLevel", "HARMONY_LOG_LEVEL", DEFAULTS.logLevel ?? "info"),
    drainTimeoutMs: int("drainTimeoutMs", "HARMONY_DRAIN_TIMEOUT_MS", DEFAULTS.drainTimeoutMs, 0),
    cotStore: {
      ...DEFAULT_COT_STORE,
      maxBytes: atMost(
        int("cotStoreBytes", "HARMONY_COT_STORE_BYTES", DEFAULT_COT_STORE.maxBytes, 0),
        MAX_STORE_BYTES,
        "cotStoreBytes (HARMONY_COT_STORE_BYTES)",
      ),
      ttlMs: int("cotStoreTtlMs", "HARMONY_COT_STORE_TTL_MS", DEFAULT_COT_STORE.ttlMs, 1000),
    },
    limits,
  };
}

export async function runServe(flags: ServeFlags): Promise<void> {
  let options: ServiceOptions;
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
  const service = new Service(options);
  await service.start();
  service.logger.info({ heap_growing_percent: heap === "set" ? heapGrowth : null, heap_growth: heap }, "V8 heap growth");
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.logger.info({ signal }, "signal received");
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
