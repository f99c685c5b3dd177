/**
 * An in-process client connection: HTTP handlers (the OpenAI-compatible
 * front) use parser sessions on the pool through the same path as remote
 * clients — same ordering, limits and crash handling — with JSON frames.
 */
import type { Connection, Transport } from "./connection.js";
import type { Service } from "./service.js";

export type LocalListener = (event: Record<string, unknown>) => void;

export class LocalConnection {
  private readonly conn: Connection;
  private readonly listeners = new Map<string, LocalListener>();
  private n = 0;
  private stray: LocalListener | null = null;
  private readonly maxIds: number;
  private readonly maxOps: number;

  constructor(service: Service, tenant: string) {
    this.maxIds = service.limits.maxIdsPerFrame;
    this.maxOps = service.limits.maxOpsPerFrame;
    const transport: Transport = {
      kind: "http",
      send: (frame, done) => {
        const text = typeof frame === "string" ? frame : Buffer.from(frame).toString("utf8");
        const { events } = JSON.parse(text) as { events: Record<string, unknown>[] };
        for (const ev of events) {
          const listener = this.listeners.get(ev.stream as string);
          if (listener) listener(ev);
          else this.stray?.(ev); // a frame's own error (its stream named "") or a stream no longer listened to
        }
        done();
      },
      // the connection's own flow control (frames in flight): the sender waits on whenFlowing()
      pause: () => {
        this.flowing ??= new Promise<void>((resolve) => (this.resumed = resolve));
      },
      resume: () => {
        const r = this.resumed;
        this.flowing = null;
        this.resumed = null;
        r?.();
      },
      end: () => undefined,
    };
    this.conn = service.newConnection(transport, tenant);
  }

  private flowing: Promise<void> | null = null;
  private resumed: (() => void) | null = null;

  /** While the connection has too many frames in flight: a promise to await before sending more; else null. */
  whenFlowing(): Promise<void> | null {
    return this.flowing;
  }

  /** A fresh stream name on this connection. */
  name(prefix: string): string {
    return `${prefix}-${++this.n}`;
  }

  listen(stream: string, listener: LocalListener): void {
    this.listeners.set(stream, listener);
  }

  unlisten(stream: string): void {
    this.listeners.delete(stream);
  }

  /** Events no listener takes: a frame's own errors, which would otherwise go nowhere. */
  onStray(listener: LocalListener): void {
    this.stray = listener;
  }

  /**
   * Send ops in as many frames as the limits need: at most `maxOpsPerFrame`
   * ops and `maxIdsPerFrame` ids a frame, a tokens op with more ids split
   * across frames (in order, so the stream sees the same ids), never one
   * frame the connection would refuse whole.
   */
  send(ops: unknown[]): void {
    let frame: unknown[] = [];
    let ids = 0;
    const flush = () => {
      if (frame.length === 0) return;
      this.conn.onFrame(JSON.stringify({ ops: frame }));
      frame = [];
      ids = 0;
    };
    for (const op of ops) {
      const tokens = (op as { tokens?: { stream: string; ids: number[] } }).tokens;
      if (tokens === undefined || !Array.isArray(tokens.ids) || tokens.ids.length <= this.maxIds - ids) {
        if (frame.length >= this.maxOps) flush();
        frame.push(op);
        if (tokens !== undefined && Array.isArray(tokens.ids)) ids += tokens.ids.length;
        continue;
      }
      for (let at = 0; at < tokens.ids.length;) {
        if (ids >= this.maxIds || frame.length >= this.maxOps) flush();
        const part = tokens.ids.slice(at, at + this.maxIds - ids);
        frame.push({ tokens: { ...tokens, ids: part } });
        ids += part.length;
        at += part.length;
      }
    }
    flush();
  }

  close(): void {
    this.listeners.clear();
    this.conn.close();
    // nothing waits on a closed connection
    this.resumed?.();
    this.flowing = null;
    this.resumed = null;
  }
}
