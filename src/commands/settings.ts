/**
 * Every `serve` setting in one table: its flag, environment variable, help
 * text, default and bounds. The CLI's options and help (src/cli.ts) and the
 * resolver (src/commands/serve.ts) come from here, and docs/protocol.md's
 * settings table lists the same rows (test/e2e/settings.test.ts, test/docs.test.ts);
 * a setting is added by adding a row. Each default is read from
 * src/core/defaults.ts, where the service's own fallbacks read it too.
 */
import {
  ACCESS_DEFAULTS,
  COT_STORE_DEFAULTS,
  defaultWorkers,
  HEAP_BUDGET_SHARE,
  LIMIT_DEFAULTS,
  RESPONSE_STORE_DEFAULTS,
  SERVER_DEFAULTS,
  SERVICE_DEFAULTS,
  SHARED_STORE_DEFAULTS,
  UPSTREAM_DEFAULTS,
  V8_DEFAULTS,
} from "../core/defaults.js";
import { MAX_STORE_BYTES } from "../store/memory.js";
import { connectionOptions, isStoreUrl } from "../store/redis.js";
import { STREAM_BYTES } from "../service/limits.js";
import { usableCores } from "../service/service.js";
import { ENGINE_KINDS } from "../upstream/index.js";
import { UsageError } from "./usage.js";

/** pino's levels, as `--log-level` takes them. */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

export interface Setting {
  /** The flag as commander names it (camelCase of the long flag). */
  key: string;
  /** The long flag with its argument, as `--help` shows it. */
  flag: string;
  env: string;
  help: string;
  /** The default; "" means none. */
  default: string | number;
  /**
   * An integer within [min, max], a string (one of `choices` when given), an
   * http(s) URL ("" allowed: off), or a reasoning store (`memory`, or a
   * redis://, rediss:// or unix:// URL).
   */
  type: "int" | "string" | "url" | "store";
  min?: number;
  max?: number;
  choices?: readonly string[];
  /**
   * Where `serve --help` lists it: `basic` (what a first run needs) first,
   * then everything else under "Advanced" (limits and tuning; the default).
   */
  group?: "basic" | "advanced";
}

export const SETTINGS = [
  {
    key: "host",
    group: "basic",
    flag: "--host <addr>",
    env: "HARMONY_HOST",
    help: "address to bind (both edges)",
    default: SERVER_DEFAULTS.host,
    type: "string",
  },
  {
    key: "port",
    group: "basic",
    flag: "--port <n>",
    env: "HARMONY_PORT",
    help: "HTTP + WebSocket port (0: any free port)",
    default: SERVER_DEFAULTS.port,
    type: "int",
    min: 0,
    max: 65535,
  },
  {
    key: "grpcPort",
    group: "basic",
    flag: "--grpc-port <n>",
    env: "HARMONY_GRPC_PORT",
    help: "gRPC port (0: any free port, -1: off)",
    default: SERVER_DEFAULTS.grpcPort,
    type: "int",
    min: -1,
    max: 65535,
  },
  {
    key: "workers",
    group: "basic",
    flag: "--workers <n>",
    env: "HARMONY_WORKERS",
    help: "parser worker threads (0: parse on the main thread)",
    default: defaultWorkers(usableCores()),
    type: "int",
    min: 0,
  },
  {
    key: "inline",
    flag: "--inline <n>",
    env: "HARMONY_INLINE",
    help: "streams the main thread parses itself, with no thread hop, before new ones go to workers",
    default: SERVICE_DEFAULTS.inline,
    type: "int",
    min: 0,
  },
  {
    key: "token",
    flag: "--token <secret>",
    env: "HARMONY_TOKEN",
    help: "bearer token clients must present",
    default: SERVICE_DEFAULTS.token,
    type: "string",
    group: "basic",
  },
  {
    key: "logLevel",
    group: "basic",
    flag: "--log-level <level>",
    env: "HARMONY_LOG_LEVEL",
    help: "pino log level",
    default: SERVICE_DEFAULTS.logLevel,
    type: "string",
    choices: LOG_LEVELS,
  },
  {
    key: "maxFrameBytes",
    flag: "--max-frame-bytes <n>",
    env: "HARMONY_MAX_FRAME_BYTES",
    help: "largest client frame",
    default: LIMIT_DEFAULTS.maxFrameBytes,
    type: "int",
    min: 1024,
  },
  {
    key: "maxStreams",
    flag: "--max-streams <n>",
    env: "HARMONY_MAX_STREAMS",
    help: "open streams per connection",
    default: LIMIT_DEFAULTS.maxStreamsPerConnection,
    type: "int",
    min: 1,
  },
  {
    key: "maxIdsPerFrame",
    flag: "--max-ids-per-frame <n>",
    env: "HARMONY_MAX_IDS_PER_FRAME",
    help: "token ids per frame",
    default: LIMIT_DEFAULTS.maxIdsPerFrame,
    type: "int",
    min: 1,
  },
  {
    key: "maxOpsPerFrame",
    flag: "--max-ops-per-frame <n>",
    env: "HARMONY_MAX_OPS_PER_FRAME",
    help: "ops per frame",
    default: LIMIT_DEFAULTS.maxOpsPerFrame,
    type: "int",
    min: 1,
  },
  {
    key: "maxStreamName",
    flag: "--max-stream-name <n>",
    env: "HARMONY_MAX_STREAM_NAME",
    help: "characters of a stream name",
    default: LIMIT_DEFAULTS.maxStreamName,
    type: "int",
    min: 1,
    max: 65536,
  },
  {
    key: "maxConnectionBytes",
    flag: "--max-connection-bytes <n>",
    env: "HARMONY_MAX_CONNECTION_BYTES",
    help: `what one connection's open streams may hold (${STREAM_BYTES / 1024} KiB a stream plus its name): new streams past it are refused`,
    default: LIMIT_DEFAULTS.maxConnectionBytes,
    type: "int",
    min: 65536,
  },
  {
    key: "memoryBudgetMb",
    flag: "--memory-budget-mb <n>",
    env: "HARMONY_MEMORY_BUDGET_MB",
    help: `V8 heap MiB past which no new stream opens (0: ${HEAP_BUDGET_SHARE * 100}% of the heap limit)`,
    default: LIMIT_DEFAULTS.memoryBudgetBytes / (1024 * 1024),
    type: "int",
    min: 0,
  },
  {
    key: "allowOrigin",
    flag: "--allow-origin <origins>",
    env: "HARMONY_ALLOW_ORIGIN",
    help: "web origins whose pages may use the service (comma-separated, e.g. https://app.example); requests from any other page are refused",
    default: ACCESS_DEFAULTS.allowOrigins.join(","),
    type: "string",
  },
  {
    key: "allowHost",
    flag: "--allow-host <names>",
    env: "HARMONY_ALLOW_HOST",
    help: "host names clients may address the service by, besides the bound address (comma-separated; against DNS rebinding)",
    default: ACCESS_DEFAULTS.allowHosts.join(","),
    type: "string",
  },
  {
    key: "publicMetrics",
    flag: "--public-metrics <bool>",
    env: "HARMONY_PUBLIC_METRICS",
    help: "serve /metrics without the bearer token when --token is set",
    default: String(ACCESS_DEFAULTS.publicMetrics),
    type: "string",
    choices: ["true", "false"],
  },
  {
    key: "idleTimeoutMs",
    flag: "--idle-timeout-ms <n>",
    env: "HARMONY_IDLE_TIMEOUT_MS",
    help: "close connections silent this long",
    default: LIMIT_DEFAULTS.idleTimeoutMs,
    type: "int",
    min: 1000,
  },
  {
    key: "slowClientTimeoutMs",
    flag: "--slow-client-timeout-ms <n>",
    env: "HARMONY_SLOW_CLIENT_TIMEOUT_MS",
    help: "drop a client whose answers stay unread this long (its buffer over the bound: a streamed OpenAI answer's socket is closed and the engine's request ended, a WebSocket closed 4409, a gRPC call ended RESOURCE_EXHAUSTED)",
    default: LIMIT_DEFAULTS.slowClientTimeoutMs,
    type: "int",
    min: 100,
  },
  {
    key: "pingIntervalMs",
    flag: "--ping-interval-ms <n>",
    env: "HARMONY_PING_INTERVAL_MS",
    help: "WebSocket ping / gRPC keepalive interval",
    default: LIMIT_DEFAULTS.pingIntervalMs,
    type: "int",
    min: 100,
  },
  {
    key: "drainTimeoutMs",
    flag: "--drain-timeout-ms <n>",
    env: "HARMONY_DRAIN_TIMEOUT_MS",
    help: "graceful stop deadline",
    default: SERVICE_DEFAULTS.drainTimeoutMs,
    type: "int",
    min: 0,
  },
  {
    key: "upstream",
    group: "basic",
    flag: "--upstream <url>",
    env: "HARMONY_UPSTREAM",
    help: "sidecar mode: the inference server (vLLM, SGLang, trtllm-serve, llama-server) to drive by token ids",
    default: UPSTREAM_DEFAULTS.url,
    type: "url",
  },
  {
    key: "upstreamTimeoutMs",
    flag: "--upstream-timeout-ms <n>",
    env: "HARMONY_UPSTREAM_TIMEOUT_MS",
    help: "sidecar mode: end a request when the upstream sends no event this long (SSE comments do not count)",
    default: UPSTREAM_DEFAULTS.idleTimeoutMs,
    type: "int",
    min: 100,
  },
  {
    key: "upstreamDeadlineMs",
    flag: "--upstream-deadline-ms <n>",
    env: "HARMONY_UPSTREAM_DEADLINE_MS",
    help: "sidecar mode: end one request to the upstream after this long, whatever it sends",
    default: UPSTREAM_DEFAULTS.deadlineMs,
    type: "int",
    min: 1000,
  },
  {
    key: "upstreamApiKey",
    flag: "--upstream-api-key <key>",
    env: "HARMONY_UPSTREAM_API_KEY",
    help: "sidecar mode: the engine's --api-key, sent as a bearer token on every request to it (proxied ones too) and by --upstream-kind auto's probe",
    default: UPSTREAM_DEFAULTS.apiKey,
    type: "string",
  },
  {
    key: "upstreamReadiness",
    flag: "--upstream-readiness <bool>",
    env: "HARMONY_UPSTREAM_READINESS",
    help: `sidecar mode: /readyz also needs the engine's health check to answer 200, checked every ${UPSTREAM_DEFAULTS.healthIntervalMs / 1000} s (true in a pod beside the engine, false for a tier in front of a shared engine: docs/deploy.md)`,
    default: String(UPSTREAM_DEFAULTS.readiness),
    type: "string",
    choices: ["true", "false"],
  },
  {
    key: "upstreamKind",
    group: "basic",
    flag: "--upstream-kind <kind>",
    env: "HARMONY_UPSTREAM_KIND",
    help: "sidecar mode: the engine behind --upstream (auto: probe it)",
    default: UPSTREAM_DEFAULTS.kind,
    type: "string",
    choices: ENGINE_KINDS,
  },
  {
    key: "reasoningField",
    flag: "--reasoning-field <name>",
    env: "HARMONY_REASONING_FIELD",
    help: "sidecar mode: reasoning or reasoning_content in chat deltas",
    default: UPSTREAM_DEFAULTS.reasoningField,
    type: "string",
    choices: ["reasoning", "reasoning_content"],
  },
  {
    key: "cotStoreBytes",
    flag: "--cot-store-bytes <n>",
    env: "HARMONY_COT_STORE_BYTES",
    help: `reasoning remembered per tool call id, for restoring it into prompts (0: off, and streams keep no reasoning; at most ${MAX_STORE_BYTES / 2 ** 30} GiB)`,
    default: COT_STORE_DEFAULTS.maxBytes,
    type: "int",
    min: 0,
    max: MAX_STORE_BYTES,
  },
  {
    key: "cotStoreTtlMs",
    flag: "--cot-store-ttl-ms <n>",
    env: "HARMONY_COT_STORE_TTL_MS",
    help: "how long remembered reasoning is kept",
    default: COT_STORE_DEFAULTS.ttlMs,
    type: "int",
    min: 1000,
  },
  {
    key: "cotStore",
    flag: "--cot-store <memory|url>",
    env: "HARMONY_COT_STORE",
    help: "where reasoning is remembered: memory (this process), or a Redis ≥ 7 / Valkey URL (redis://, rediss:// or unix:///path.sock) shared by every replica, with this process's store as a local cache in front",
    default: SHARED_STORE_DEFAULTS.store,
    type: "store",
  },
  {
    key: "cotStoreTimeoutMs",
    flag: "--cot-store-timeout-ms <n>",
    env: "HARMONY_COT_STORE_TIMEOUT_MS",
    help: "with a shared store: how long a render waits for it (one fetch of every missing tool call); past it the render goes on without restoring",
    default: SHARED_STORE_DEFAULTS.timeoutMs,
    type: "int",
    min: 1,
    max: 10_000,
  },
  {
    key: "responseStoreBytes",
    flag: "--response-store-bytes <n>",
    env: "HARMONY_RESPONSE_STORE_BYTES",
    help: `sidecar mode: Responses kept for previous_response_id and GET/DELETE /v1/responses/{id} (store: true, the default), in this process and in the --cot-store URL when one is set (0: off, store is ignored; at most ${MAX_STORE_BYTES / 2 ** 30} GiB)`,
    default: RESPONSE_STORE_DEFAULTS.maxBytes,
    type: "int",
    min: 0,
    max: MAX_STORE_BYTES,
  },
  {
    key: "responseStoreTtlMs",
    flag: "--response-store-ttl-ms <n>",
    env: "HARMONY_RESPONSE_STORE_TTL_MS",
    help: "how long a stored response is kept",
    default: RESPONSE_STORE_DEFAULTS.ttlMs,
    type: "int",
    min: 1000,
  },
  {
    key: "shutdownDelayMs",
    flag: "--shutdown-delay-ms <n>",
    env: "HARMONY_SHUTDOWN_DELAY_MS",
    help: "on SIGTERM, how long to keep serving while /readyz and gRPC health already say not ready, before the drain (e.g. 5000 behind a Kubernetes Service)",
    default: SERVER_DEFAULTS.shutdownDelayMs,
    type: "int",
    min: 0,
    max: 600_000,
  },
  {
    key: "heapGrowth",
    flag: "--heap-growth <percent>",
    env: "HARMONY_HEAP_GROWTH",
    help: "how far V8's old generation may grow past the live size before its next full GC (V8's --heap-growing-percent; 0: V8's own heuristics; a node --heap-growing-percent flag wins)",
    default: V8_DEFAULTS.heapGrowth,
    type: "int",
    min: 0,
    max: 1000,
  },
  {
    key: "inlineBudget",
    flag: "--inline-budget <bytes>",
    env: "HARMONY_INLINE_BUDGET",
    help: "bytecode V8 may inline into one optimized function (V8's --max-inlined-bytecode-size-cumulative; 0: V8's own, 920; a node --max-inlined-bytecode-size-cumulative flag wins)",
    default: V8_DEFAULTS.inlineBudget,
    type: "int",
    min: 0,
    max: 100_000,
  },
] as const satisfies readonly Setting[];

export type SettingKey = (typeof SETTINGS)[number]["key"];

/** `serve`'s flags as commander hands them over: text, by setting key. */
export type ServeFlags = Partial<Record<SettingKey, string>>;

const BY_KEY: ReadonlyMap<string, Setting> = new Map(SETTINGS.map((s) => [s.key, s]));

/** The `--help` line of a setting: its text, its choices, its variable and its default. */
export function helpText(s: Setting): string {
  const choices = s.choices ? `one of ${s.choices.join(", ")}; ` : "";
  return `${s.help} [${choices}env ${s.env}, default ${s.default === "" ? "none" : s.default}]`;
}

/** The long flag alone (`--port`), as a person types it. */
export function flagName(s: Setting): string {
  return s.flag.split(" ")[0]!;
}

/** An environment variable's value; set but empty counts as unset (VAR= in a compose file or a shell). */
function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === "" ? undefined : v;
}

/** A decimal integer setting: digits, an optional leading minus (not "", "1e2" or "0x10", which Number() would take). */
function decimal(raw: string): number {
  return /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
}

/** Reads settings from flags, then HARMONY_* variables, then the table's defaults, checking each against its row. */
export class SettingsReader {
  constructor(
    private readonly flags: ServeFlags,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  private row(key: SettingKey): Setting {
    return BY_KEY.get(key)!;
  }

  /** The raw text and who gave it: `--port`, or `--port (set by HARMONY_PORT)`, or the default. */
  private read(s: Setting): { raw: string; who: string } {
    const flag = this.flags[s.key as SettingKey];
    if (flag !== undefined) return { raw: flag, who: flagName(s) };
    const env = envValue(this.env, s.env);
    if (env !== undefined) return { raw: env, who: `${flagName(s)} (set by ${s.env})` };
    return { raw: String(s.default), who: `${flagName(s)} (its default)` };
  }

  /** A setting's text: its flag, else its environment variable, else the default (a value its row refuses: a UsageError naming the flag). */
  text(key: SettingKey): string {
    const s = this.row(key);
    const { raw, who } = this.read(s);
    if (s.choices && !s.choices.includes(raw))
      throw new UsageError(
        `${who} must be ${s.choices.length <= 2 ? s.choices.join(" or ") : `one of ${s.choices.join(", ")}`}, got ${JSON.stringify(raw)}`,
      );
    if (s.type === "url" && raw !== "" && !/^https?:\/\//.test(raw))
      throw new UsageError(`${who} must be an http(s) URL such as http://127.0.0.1:8000, got ${JSON.stringify(raw)}`);
    if (s.type === "store" && raw !== "memory") {
      // the URL may hold a password: never quoted back
      if (!isStoreUrl(raw)) throw new UsageError(`${who} must be memory or a redis://, rediss:// or unix:// URL`);
      try {
        connectionOptions(raw);
      } catch {
        throw new UsageError(`${who} is not a usable redis://, rediss:// or unix:// URL`);
      }
    }
    return raw;
  }

  /** An integer setting within its row's bounds. */
  int(key: SettingKey): number {
    const s = this.row(key);
    const { raw, who } = this.read(s);
    const n = decimal(raw);
    const min = s.min ?? Number.MIN_SAFE_INTEGER;
    const range = s.max !== undefined ? `an integer from ${min} to ${s.max}` : `an integer ≥ ${min}`;
    if (!Number.isInteger(n) || n < min || (s.max !== undefined && n > s.max))
      throw new UsageError(`${who} must be ${range}, got ${JSON.stringify(raw)}`);
    return n;
  }
}
