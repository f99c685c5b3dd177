/**
 * The composition root: builds the service and starts its edges around it
 * (WebSocket + HTTP, gRPC, and in sidecar mode the OpenAI front over an
 * upstream engine). Everything below this file is wired here; nothing in
 * src/service/ knows a transport.
 */
import { getHeapStatistics } from "node:v8";
import { SERVER_DEFAULTS, UPSTREAM_DEFAULTS } from "./core/defaults.js";
import { cgroupCpuLimit, cgroupMemoryLimit, Service, type ServiceOptions } from "./service/service.js";
import { CodedError } from "./core/errors.js";
import { redactUrl } from "./store/redis.js";
import { startGrpc, type GrpcEdge } from "./transport/grpc.js";
import type { AccessPolicy } from "./transport/access.js";
import { startHttp, wsMasking, type HttpEdge } from "./transport/http.js";
import { OpenAIFront } from "./transport/openai-front.js";
import type { EngineVocabulary, UpstreamConfig } from "./upstream/engine.js";
import { createEngine, type EngineKind } from "./upstream/index.js";
import { EngineWatch } from "./upstream/watch.js";
import type { HarmonyEncoding } from "./vocab/index.js";

/** The vocabulary as the engines use it: ids checked against it, llama-server's held text re-encoded with it. */
function engineVocabulary(enc: HarmonyEncoding): EngineVocabulary {
  return {
    table: enc.table,
    firstSpecial: enc.preset.firstSpecial,
    specials: enc.preset.specials,
    encode: (t) => enc.encode(t),
    encodeOrdinary: (t) => enc.encodeOrdinary(t),
  };
}

export interface ServerOptions extends ServiceOptions {
  host: string;
  /** HTTP + WebSocket port (0: any free port). */
  port: number;
  /** gRPC port (0: any free port, -1: no gRPC). */
  grpcPort: number;
  /** Sidecar mode: the inference server to drive by token ids. */
  upstream?: UpstreamConfig | undefined;
  /** Which engine it is (default UPSTREAM_DEFAULTS.kind; auto probes it). */
  upstreamKind?: EngineKind;
  /** Which browsers and host names may reach the HTTP edge (default: none but the bound address, no page). */
  access?: AccessPolicy;
  /** On stop: how long readiness says no while everything is still served, before the drain (default SERVER_DEFAULTS.shutdownDelayMs). */
  shutdownDelayMs?: number;
}

/** At most one last-resort log line per this many ms; the errors in between are counted in the next line. */
export const LAST_RESORT_LOG_MS = 1000;

/**
 * The last resort, for the serve command (a process of its own): a promise
 * rejected with no handler, or an exception nothing caught (a bug: every
 * input is answered with a code before it gets here), is logged (at most
 * one line a second, with how many were left out) and counted in
 * `harmony_uncaught_errors_total{kind}`, and the process goes on serving
 * what it can. Node would otherwise exit and take every client with it.
 * Returns what removes the handlers.
 */
export function installLastResort(
  svc: Pick<Service, "logger" | "metrics">,
  proc: Pick<NodeJS.Process, "on" | "off"> = process,
  now: () => number = () => performance.now(),
): () => void {
  let last = -Infinity;
  let unlogged = 0;
  const handle = (kind: "rejection" | "exception", e: unknown) => {
    svc.metrics.uncaught.inc({ kind });
    const t = now();
    if (t - last < LAST_RESORT_LOG_MS) {
      unlogged++;
      return;
    }
    last = t;
    const err = e instanceof Error ? { message: e.message, stack: e.stack?.split("\n").slice(0, 8).join("\n") } : { message: String(e) };
    svc.logger.error({ kind, err, ...(unlogged > 0 ? { unlogged } : {}) }, "an error nothing handled (a bug): logged, and serving goes on");
    unlogged = 0;
  };
  const onRejection = (reason: unknown) => handle("rejection", reason);
  const onException = (e: unknown) => handle("exception", e);
  proc.on("unhandledRejection", onRejection);
  proc.on("uncaughtException", onException);
  return () => {
    proc.off("unhandledRejection", onRejection);
    proc.off("uncaughtException", onException);
  };
}

/** How long start waits for the shared reasoning store before serving without it (it keeps reconnecting). */
const STORE_CONNECT_WAIT_MS = 2000;

/** The info line that says where the server listens (the serve command shows it as a banner on a terminal). */
export const SERVING_MESSAGE = "harmony-sidecar serving";

/** An edge that could not listen (a port in use, a host that is not this machine's): what start rejects with, the service already stopped. */
export class ListenError extends CodedError {
  constructor(
    readonly edge: "http" | "grpc",
    readonly host: string,
    readonly port: number,
    readonly reason: unknown,
  ) {
    super(
      "listen_failed",
      `the ${edge} edge cannot listen on ${host}:${port}: ${reason instanceof Error ? reason.message : String(reason)}`,
    );
  }
}

export class Server {
  readonly service: Service;
  private http?: HttpEdge;
  private grpc?: GrpcEdge;
  private stopping?: Promise<void>;
  private watch?: EngineWatch;

  constructor(readonly options: ServerOptions) {
    this.service = new Service(options);
  }

  /** Start the workers, then the edges; resolves with the ports bound. */
  async start(): Promise<{ port: number; grpcPort: number | null }> {
    const t0 = performance.now();
    const svc = this.service;
    svc.start();
    const configured = this.options.upstream;
    const up: UpstreamConfig | undefined = configured && { ...configured, vocab: configured.vocab ?? engineVocabulary(svc.encoding) };
    const kind = this.options.upstreamKind ?? UPSTREAM_DEFAULTS.kind;
    const engine = up ? createEngine(kind, up) : null;
    const front = up && engine ? new OpenAIFront(svc, engine, up) : null;
    // the engine's watch counts in readiness from the first request; it starts once the ports are bound
    if (up && engine) {
      const logger = svc.logger;
      const watch = new EngineWatch(engine, up, {
        log: (level, fields, message) => logger[level](fields, message),
        up: (healthy) => svc.metrics.upstreamUp.set(healthy ? 1 : 0),
        info: (labels) => {
          svc.metrics.upstreamInfo.reset();
          svc.metrics.upstreamInfo.set(labels, 1);
        },
      });
      svc.addReadiness(
        "upstream",
        () => watch.ready(),
        () => watch.detail(),
      );
      this.watch = watch;
    }
    const { host, port, grpcPort } = this.options;
    try {
      this.http = await startHttp(svc, front, host, port, this.options.access);
    } catch (e) {
      await svc.close();
      throw new ListenError("http", host, port, e);
    }
    if (grpcPort >= 0) {
      try {
        this.grpc = await startGrpc(svc, host, grpcPort);
      } catch (e) {
        await this.http.close();
        await svc.close();
        throw new ListenError("grpc", host, grpcPort, e);
      }
    }
    this.watch?.start();
    const shared = svc.reasoning.shared ?? svc.responses.shared;
    if (shared !== null && !(await shared.waitReady(STORE_CONNECT_WAIT_MS)))
      svc.logger.warn(
        { cot_store: redactUrl(shared.options.url) },
        "the shared reasoning store is not reachable yet: serving without it, and reconnecting",
      );
    this.warnContainer();
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
        upstream_kind: up ? kind : null,
        cot_store: shared === null ? "memory" : redactUrl(shared.options.url),
        cpu_limit: cgroupCpuLimit(),
        ws_masking: wsMasking(),
        vocabulary: svc.encoding.source,
        vocabulary_ms: Math.round(svc.encoding.loadMs),
      },
      SERVING_MESSAGE,
    );
    return ports;
  }

  /**
   * A V8 heap allowed to grow past the container's memory limit ends in the
   * kernel's OOM kill rather than in V8's own heap limit (and the memory
   * budget, a share of the heap limit, never refuses a stream in time).
   */
  private warnContainer(): void {
    const memory = cgroupMemoryLimit();
    const heap = getHeapStatistics().heap_size_limit;
    if (memory !== null && heap > memory)
      this.service.logger.warn(
        { heap_limit_bytes: heap, memory_limit_bytes: memory },
        "V8's heap limit exceeds the container's memory limit: set NODE_OPTIONS=--max-old-space-size to about 60% of the limit (MiB)",
      );
  }

  /**
   * Graceful stop: readiness goes first (/readyz 503, gRPC health
   * NOT_SERVING) and everything is still served for `shutdownDelayMs`, so
   * that load balancers take the replica out before it stops accepting; then stop accepting, let frames in flight finish, end every
   * open stream (`error` shutting_down, then `done`), close connections, stop
   * the workers. Connections still open after `drainTimeoutMs` are cut.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const svc = this.service;
      svc.withdrawReadiness();
      this.watch?.stop();
      const delay = this.options.shutdownDelayMs ?? SERVER_DEFAULTS.shutdownDelayMs;
      if (delay > 0) {
        svc.logger.info({ shutdown_delay_ms: delay }, "not ready; serving until the drain");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
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
