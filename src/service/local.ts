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

  constructor(service: Service, tenant: string) {
    const transport: Transport = {
      kind: "http",
      send: (frame, done) => {
        const text = typeof frame === "string" ? frame : Buffer.from(frame).toString("utf8");
        const { events } = JSON.parse(text) as { events: Record<string, unknown>[] };
        for (const ev of events) this.listeners.get(ev.stream as string)?.(ev);
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

  send(ops: unknown[]): void {
    this.conn.onFrame(JSON.stringify({ ops }));
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
