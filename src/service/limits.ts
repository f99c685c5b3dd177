import { LIMIT_DEFAULTS } from "../core/defaults.js";

/** The per-connection limits (`serve` flags set them: src/commands/settings.ts; defaults in src/core/defaults.ts). */
export interface Limits {
  /** Largest client frame, bytes (WebSocket message or gRPC message). */
  maxFrameBytes: number;
  maxStreamsPerConnection: number;
  /** Token ids in one frame, over all its ops. */
  maxIdsPerFrame: number;
  /** A connection that sends nothing for this long is closed. */
  idleTimeoutMs: number;
  /** WebSocket ping interval; a peer that misses a pong is dropped. gRPC keepalive uses it too. */
  pingIntervalMs: number;
  /** Frames being parsed per connection before it stops being read. */
  maxInflightFrames: number;
  /** Answer bytes waiting for a slow reader before it stops being read. */
  maxBufferedBytes: number;
  /** Ops in one frame (a frame with more is refused whole, before its answer is built). */
  maxOpsPerFrame: number;
  /** Characters of a stream name. */
  maxStreamName: number;
  /**
   * What one connection's open streams may hold, counted as a stream's
   * bounded parser state (STREAM_BYTES) plus its name: new streams past it
   * are refused with `over_budget`.
   */
  maxConnectionBytes: number;
  /** V8 heap bytes past which no new stream is opened anywhere (`over_budget`); 0: HEAP_BUDGET_SHARE of the heap limit. */
  memoryBudgetBytes: number;
  /**
   * A client whose answers stay unread this long (its buffer over the bound,
   * nothing drained) is dropped: a streamed OpenAI answer's socket is
   * destroyed (the engine's request ends with it), a WebSocket is closed
   * 4409, a gRPC call ends RESOURCE_EXHAUSTED.
   */
  slowClientTimeoutMs: number;
}

/**
 * What an open stream holds, for the connection budget: its parser's bounded
 * state (the 512-id window, header and pending bytes: under 16 KiB, a
 * property test checks it) and its session; a tool call's arguments come on
 * top, up to 1 MiB, and are left to the process budget.
 */
export const STREAM_BYTES = 16 * 1024;

/** The defaults as `Limits` (src/core/defaults.ts). */
export const DEFAULT_LIMITS: Limits = LIMIT_DEFAULTS;
