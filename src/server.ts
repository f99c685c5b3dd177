/**
 * The composition root: builds the service and starts its edges around it
 * (WebSocket + HTTP, gRPC, and in sidecar mode the OpenAI front over an
 * upstream engine). Everything below this file is wired here; nothing in
 * src/service/ knows a transport.
 */
import { Service, type ServiceOptions } from "./service/service.js";
import { startGrpc, type GrpcEdge } from "./transport/grpc.js";
import type { AccessPolicy } from "./transport/access.js";
import { startHttp, wsMasking, type HttpEdge } from "./transport/http.js";
import { OpenAIFront } from "./transport/openai-front.js";
import type { UpstreamConfig } from "./upstream/engine.js";
import { VllmEngine } from "./upstream/vllm.js";

export interface ServerOptions extends ServiceOptions {
  host: string;
  /** HTTP + WebSocket port (0: any free port). */
  port: number;
  /** gRPC port (0: any free port, -1: no gRPC). */
  grpcPort: number;
  /** Sidecar mode: the inference server to drive by token ids. */
  upstream?: UpstreamConfig | undefined;
  /** Which browsers and host names may reach the HTTP edge (default: none but the bound address, no page). */
  access?: AccessPolicy;
}

export const SERVER_DEFAULTS = { host: "127.0.0.1", port: 8765, grpcPort: 8766 } as const;

export class Server {
  readonly service: Service;
  private http?: HttpEdge;
  private grpc?: GrpcEdge;
  private stopping?: Promise<void>;

  constructor(readonly options: ServerOptions) {
    this.service = new Service(options);
  }

  /** Start the workers, then the edges; resolves with the ports bound. */
  async start(): Promise<{ port: number; grpcPort: number | null }> {
    const t0 = performance.now();
    const svc = this.service;
    svc.start();
    const up = this.options.upstream;
    const front = up ? new OpenAIFront(svc, new VllmEngine(up), up) : null;
    this.http = await startHttp(svc, front, this.options.host, this.options.port, this.options.access);
    if (this.options.grpcPort >= 0) this.grpc = await startGrpc(svc, this.options.host, this.options.grpcPort);
    const ports = { port: this.http.port, grpcPort: this.grpc?.port ?? null };
    // where it listens is always worth saying, even when info lines are off
    svc.logger[svc.logger.isLevelEnabled("info") ? "info" : "warn"](
      {
        ...ports,
        host: this.options.host,
        workers: svc.pool.workers,
        inline: this.options.workers === 0 ? "all" : (this.options.inline ?? 0),
        startup_ms: Math.round(performance.now() - t0),
        auth: !!svc.token,
        upstream: up?.url ?? null,
        ws_masking: wsMasking(),
      },
      "harmony-sidecar serving",
    );
    return ports;
  }

  /**
   * Graceful stop: stop accepting, let frames in flight finish, end every
   * open stream (`error` shutting_down, then `done`), close connections, stop
   * the workers. Connections still open after `drainTimeoutMs` are cut.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const svc = this.service;
      svc.logger.info({ connections: svc.connectionCount }, "draining");
      this.http?.stopAccepting();
      this.grpc?.stopAccepting();
      const outcome = await svc.drain();
      if (outcome === "timeout") svc.logger.warn("drain timed out; cutting the remaining connections");
      await this.http?.close();
      await this.grpc?.close();
      await svc.close();
      svc.logger.info({ outcome }, "stopped");
    })();
    return this.stopping;
  }
}
