/** The per-connection limits, with their defaults (`serve` flags set them: src/commands/settings.ts). */
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
}

export const DEFAULT_LIMITS: Limits = {
  maxFrameBytes: 4 * 1024 * 1024,
  maxStreamsPerConnection: 16384,
  maxIdsPerFrame: 262144,
  idleTimeoutMs: 300_000,
  pingIntervalMs: 30_000,
  maxInflightFrames: 64,
  maxBufferedBytes: 8 * 1024 * 1024,
};
