/**
 * Every `serve` setting's default, written once. The settings table
 * (src/commands/settings.ts) reads its `default` column from here, which
 * `serve --help` and docs/protocol.md show (test/e2e/settings.test.ts checks
 * both, and that no default is written a second time); the layers that take
 * partial options (Service, Server, the upstream engines, the frame readers)
 * fall back to the same values, so a library user who leaves an option out
 * gets what `serve` gives with no flags.
 *
 * Plain data, grouped by what it configures, low enough for every layer to
 * read. Off is 0, "" or false.
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const MINUTE_MS = 60_000;

/** Where `serve` listens, and how it stops. */
export const SERVER_DEFAULTS = Object.freeze({
  host: "127.0.0.1",
  /** HTTP + WebSocket. */
  port: 8765,
  /** gRPC (-1: off). */
  grpcPort: 8766,
  /** On SIGTERM: how long readiness says no while everything is still served, before the drain (0: none). */
  shutdownDelayMs: 0,
} as const);

/** A parser's own options (src/core/parser/options.ts), for a stream whose open leaves them out. */
export const PARSER_DEFAULTS = Object.freeze({
  /** Ids a token window holds before it grows (`windowSize`; the resilience contract's rolling window). */
  windowIds: 512,
  /** Header bytes resilient mode reads before the header is taken as content (`maxHeaderBytes`). */
  maxHeaderBytes: 256,
} as const);

/** The service around the parser pool. */
export const SERVICE_DEFAULTS = Object.freeze({
  /** Streams the main thread parses itself before new ones go to workers (`serve --inline`). */
  inline: 16,
  logLevel: "info",
  /** How long a graceful stop may take before connections are cut. */
  drainTimeoutMs: 10_000,
  /** No bearer token: no authentication. */
  token: "",
} as const);

/**
 * Parser worker threads for a machine with `cores` usable cores. With 3 or
 * more, one core is the main thread's (frames, sockets, the first inline
 * streams) and the rest parse, at most 8; with 2 or fewer, none: a thread
 * hop there costs more CPU than the parsing it moves, and the tail latency
 * is worse (bench/RESULTS.md has the runs).
 */
export function defaultWorkers(cores: number): number {
  return cores <= 2 ? 0 : Math.min(cores - 1, 8);
}

/** The per-connection limits (src/service/limits.ts's `Limits`, which documents each). */
export const LIMIT_DEFAULTS = Object.freeze({
  maxFrameBytes: 4 * MiB,
  maxStreamsPerConnection: 16384,
  maxIdsPerFrame: 262144,
  idleTimeoutMs: 5 * MINUTE_MS,
  pingIntervalMs: 30_000,
  maxInflightFrames: 64,
  maxBufferedBytes: 8 * MiB,
  /** A step of 16,384 streams, each an open, tokens and a close, with room to spare. */
  maxOpsPerFrame: 65536,
  maxStreamName: 1024,
  maxConnectionBytes: 256 * MiB,
  /** 0: {@link HEAP_BUDGET_SHARE} of the V8 heap limit. */
  memoryBudgetBytes: 0,
  slowClientTimeoutMs: 30_000,
} as const);

/** With no memory budget set, the share of V8's heap limit past which no new stream opens. */
export const HEAP_BUDGET_SHARE = 0.75;

/** Who may reach the HTTP edge (src/transport/access.ts): the bound address only, and no web page but the service's own. */
export const ACCESS_DEFAULTS = Object.freeze({
  allowOrigins: [] as readonly string[],
  allowHosts: [] as readonly string[],
  /** `/metrics` without the bearer token when one is set. */
  publicMetrics: false,
} as const);

/** The reasoning remembered per tool call id, for restoring it into prompts (src/store/memory.ts). */
export const COT_STORE_DEFAULTS = Object.freeze({
  /** The in-process store's budget (0: off). */
  maxBytes: 64 * MiB,
  maxEntries: 100_000,
  ttlMs: 30 * MINUTE_MS,
} as const);

/** Where reasoning and responses are shared between replicas: `memory` (this process only) or a Redis/Valkey URL. */
export const SHARED_STORE_DEFAULTS = Object.freeze({
  store: "memory",
  /** How long a render waits for the shared store (one fetch) before going on without restoring. */
  timeoutMs: 5,
} as const);

/** Stored Responses (`store`, `previous_response_id`, `GET`/`DELETE /v1/responses/{id}`). */
export const RESPONSE_STORE_DEFAULTS = Object.freeze({
  /** This process's budget (0: storing is off). */
  maxBytes: 64 * MiB,
  ttlMs: 60 * MINUTE_MS,
} as const);

/** Sidecar mode: the engine behind the OpenAI front. */
export const UPSTREAM_DEFAULTS = Object.freeze({
  /** No engine: sidecar mode is off. */
  url: "",
  kind: "vllm",
  /** No event from the engine for this long ends a request (SSE comments do not count). */
  idleTimeoutMs: 2 * MINUTE_MS,
  /** One request to the engine ends after this long whatever it sends: a long answer at a slow engine's pace. */
  deadlineMs: 30 * MINUTE_MS,
  apiKey: "",
  /** Whether /readyz also needs the engine's health check to answer 200. */
  readiness: false,
  /** How often the engine's health is read while /readyz follows it. */
  healthIntervalMs: 5000,
  reasoningField: "reasoning",
} as const);

/**
 * The V8 flags `serve` sets (src/commands/serve.ts), each 0 for V8's own.
 *
 * `heapGrowth` (V8's --heap-growing-percent): how far the old generation
 * may grow past what a full GC left alive before the next one starts. With
 * V8's own factor the service's old generation has less headroom than its
 * young generation holds, so V8 starts marking again as soon as it
 * finishes: under load, a mark-compact every fraction of a second, each a
 * pause plus marking on a thread that shares the cores. With 300 (a limit
 * of 4x the live size) the full GCs all but stop. It costs memory: up to 4x
 * the live old generation.
 *
 * `inlineBudget` (V8's --max-inlined-bytecode-size-cumulative, 920 of its
 * own): how much bytecode V8 may inline into one optimized function. Each op
 * of a step frame goes through the frame loop, the op router, the stream's
 * session, its parser and the frame writer, each a small function, and V8
 * stops inlining into a function once that budget is spent; 3000 gives the
 * step-frame path more throughput, a smaller budget less, a larger one no
 * more. It costs compile time and code space for hot functions only.
 *
 * The measurements are in bench/RESULTS.md.
 */
export const V8_DEFAULTS = Object.freeze({
  heapGrowth: 300,
  inlineBudget: 3000,
} as const);

/** The most alternatives read per token (OpenAI's `top_logprobs` goes to 20). */
export const MAX_TOP_LOGPROBS = 20;
