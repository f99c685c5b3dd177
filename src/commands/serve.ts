/**
 * `harmony-sidecar serve`: flags first, then HARMONY_* environment
 * variables, then defaults that work with no configuration.
 */
import { Service, DEFAULTS, DEFAULT_COT_STORE, DEFAULT_LIMITS, type Limits, type ServiceOptions } from "../service/service.js";
import { MAX_STORE_BYTES } from "../service/cot-store.js";

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
] as const;

export function resolveOptions(flags: ServeFlags, env: NodeJS.ProcessEnv): ServiceOptions {
  const get = (key: keyof ServeFlags, envName: string, def: string | number): string =>
    flags[key] ?? env[envName] ?? String(def);
  const int = (key: keyof ServeFlags, envName: string, def: number, min: number): number => {
    const raw = get(key, envName, def);
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`${key} (${envName}) must be an integer ≥ ${min}, got ${JSON.stringify(raw)}`);
    return n;
  };
  const atMost = (n: number, max: number, what: string): number => {
    if (n > max) throw new Error(`${what} must be at most ${max}, got ${n}`);
    return n;
  };
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    maxFrameBytes: int("maxFrameBytes", "HARMONY_MAX_FRAME_BYTES", DEFAULT_LIMITS.maxFrameBytes, 1024),
    maxStreamsPerConnection: int("maxStreams", "HARMONY_MAX_STREAMS", DEFAULT_LIMITS.maxStreamsPerConnection, 1),
    maxIdsPerFrame: int("maxIdsPerFrame", "HARMONY_MAX_IDS_PER_FRAME", DEFAULT_LIMITS.maxIdsPerFrame, 1),
    idleTimeoutMs: int("idleTimeoutMs", "HARMONY_IDLE_TIMEOUT_MS", DEFAULT_LIMITS.idleTimeoutMs, 1000),
    pingIntervalMs: int("pingIntervalMs", "HARMONY_PING_INTERVAL_MS", DEFAULT_LIMITS.pingIntervalMs, 100),
  };
  const upstreamUrl = get("upstream", "HARMONY_UPSTREAM", "");
  if (upstreamUrl !== "" && !/^https?:\/\//.test(upstreamUrl)) throw new Error(`upstream (HARMONY_UPSTREAM) must be an http(s) URL, got ${JSON.stringify(upstreamUrl)}`);
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
      maxBytes: atMost(int("cotStoreBytes", "HARMONY_COT_STORE_BYTES", DEFAULT_COT_STORE.maxBytes, 0), MAX_STORE_BYTES, "cotStoreBytes (HARMONY_COT_STORE_BYTES)"),
      ttlMs: int("cotStoreTtlMs", "HARMONY_COT_STORE_TTL_MS", DEFAULT_COT_STORE.ttlMs, 1000),
    },
    limits,
  };
}

export async function runServe(flags: ServeFlags): Promise<void> {
  let options: ServiceOptions;
  try {
    options = resolveOptions(flags, process.env);
  } catch (e) {
    process.stderr.write(`serve: ${(e as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  const service = new Service(options);
  await service.start();
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
