/** Prometheus metrics (prom-client), one registry per service. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CotStore } from "../store/memory.js";

export interface Metrics {
  registry: Registry;
  connections: Gauge<"transport">;
  openStreams: Gauge;
  frames: Counter<"transport">;
  tokens: Counter;
  events: Counter<"type">;
  recoveries: Counter<"kind">;
  errors: Counter<"code">;
  frameLatency: Histogram;
  workerRestarts: Counter;
  renders: Counter<"outcome">;
  cotRestored: Counter;
  /** Shared reasoning store operations that failed or ran out of time (op: read, write). */
  cotStoreFailures: Counter<"op">;
  /** Stored responses (Responses `store`), by operation and outcome. */
  responses: Counter<"op" | "outcome">;
  /** Clients dropped for leaving their answers unread past --slow-client-timeout-ms, by edge (http, ws, grpc). */
  slowClients: Counter<"transport">;
  /** Answers checked against their response format, by outcome (ok, mismatch, unchecked). */
  answerChecks: Counter<"outcome">;
  /** Errors nothing handled, caught by the serve command's last-resort handlers (kind: rejection, exception). */
  uncaught: Counter<"kind">;
  /** Scrapes whose engine series were left out, by why (src/upstream/metrics.ts). */
  upstreamMetricsSkipped: Counter<"reason">;
  /** 1 while the engine's health check answers 200, 0 while it does not (sidecar mode). */
  upstreamUp: Gauge;
  /** 1 for what the engine serves: its kind, version, model, and whether that is a Harmony model. */
  upstreamInfo: Gauge<"kind" | "version" | "model" | "harmony">;
  /**
   * Hot-path counts (per frame, per batch): plain additions, folded into the
   * prom-client counters when they are read (a scrape), so a frame does not
   * pay for label hashing and validation.
   */
  countFrame(transport: string): void;
  countEvents(type: string, n: number): void;
  /** One error event of `code` (harmony_errors_total): a refused frame of 2,000 opens counts 2,000. */
  countError(code: string): void;
  countTokens(n: number): void;
  /** Report a CoT store's size and evictions at scrape time. */
  watchCotStore(store: CotStore): void;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "harmony_process_" });
  const frameTally = new Map<string, number>();
  const eventTally = new Map<string, number>();
  const errorTally = new Map<string, number>();
  let tokenTally = 0;
  const m: Metrics = {
    registry,
    connections: new Gauge({
      name: "harmony_connections",
      help: "Open client connections",
      labelNames: ["transport"],
      registers: [registry],
    }),
    openStreams: new Gauge({ name: "harmony_open_streams", help: "Open parser streams", registers: [registry] }),
    frames: new Counter({
      name: "harmony_frames_total",
      help: "Client frames received",
      labelNames: ["transport"],
      registers: [registry],
      collect() {
        for (const [transport, n] of frameTally) if (n > 0) this.inc({ transport }, n);
        frameTally.clear();
      },
    }),
    tokens: new Counter({
      name: "harmony_tokens_total",
      help: "Token ids parsed",
      registers: [registry],
      collect() {
        if (tokenTally > 0) this.inc(tokenTally);
        tokenTally = 0;
      },
    }),
    events: new Counter({
      name: "harmony_events_total",
      help: "Events sent, by type",
      labelNames: ["type"],
      registers: [registry],
      collect() {
        for (const [type, n] of eventTally) if (n > 0) this.inc({ type }, n);
        eventTally.clear();
      },
    }),
    recoveries: new Counter({
      name: "harmony_recoveries_total",
      help: "Resilient-mode repairs, by kind",
      labelNames: ["kind"],
      registers: [registry],
    }),
    errors: new Counter({
      name: "harmony_errors_total",
      help: "Error events, by code",
      labelNames: ["code"],
      registers: [registry],
      collect() {
        for (const [code, n] of errorTally) if (n > 0) this.inc({ code }, n);
        errorTally.clear();
      },
    }),
    frameLatency: new Histogram({
      name: "harmony_frame_latency_seconds",
      help: "Time from receiving a client frame to handing its answer to the socket",
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers: [registry],
    }),
    workerRestarts: new Counter({
      name: "harmony_worker_restarts_total",
      help: "Worker threads replaced after dying",
      registers: [registry],
    }),
    renders: new Counter({
      name: "harmony_renders_total",
      help: "Render requests, by outcome",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    cotRestored: new Counter({
      name: "harmony_cot_restored_total",
      help: "Dropped reasoning put back into rendered prompts",
      registers: [registry],
    }),
    cotStoreFailures: new Counter({
      name: "harmony_cot_store_failures_total",
      help: "Shared reasoning store operations that failed or ran out of time (op: read, a render's fetch; write, a remembered reasoning)",
      labelNames: ["op"],
      registers: [registry],
    }),
    responses: new Counter({
      name: "harmony_responses_total",
      help: "Stored responses by operation (store, get, delete) and outcome (stored, local_only, too_large, found, not_found, unavailable, deleted)",
      labelNames: ["op", "outcome"],
      registers: [registry],
    }),
    slowClients: new Counter({
      name: "harmony_slow_clients_dropped_total",
      help: "Clients dropped for leaving their answers unread past --slow-client-timeout-ms, by edge (http: a streamed OpenAI answer, ws, grpc)",
      labelNames: ["transport"],
      registers: [registry],
    }),
    answerChecks: new Counter({
      name: "harmony_answer_checks_total",
      help: "Structured answers (response_format) checked against their schema, by outcome (ok, mismatch, unchecked: past the check's deadline)",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    uncaught: new Counter({
      name: "harmony_uncaught_errors_total",
      help: "Errors nothing handled (a bug), caught by the last-resort handlers and logged while the process goes on serving (kind: rejection, exception)",
      labelNames: ["kind"],
      registers: [registry],
    }),
    upstreamMetricsSkipped: new Counter({
      name: "harmony_upstream_metrics_skipped_total",
      help: "Scrapes of /metrics that left the engine's series out (reason: unreachable, status, too_large, not_exposition, name_clash)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    upstreamUp: new Gauge({
      name: "harmony_upstream_up",
      help: "1 while the engine's health check answers 200, 0 while it does not (sidecar mode)",
      registers: [registry],
    }),
    upstreamInfo: new Gauge({
      name: "harmony_upstream_info",
      help: "What the engine serves (1): its kind, version, model, and whether the model is a Harmony model (gpt-oss)",
      labelNames: ["kind", "version", "model", "harmony"],
      registers: [registry],
    }),
    countFrame(transport) {
      frameTally.set(transport, (frameTally.get(transport) ?? 0) + 1);
    },
    countEvents(type, n) {
      eventTally.set(type, (eventTally.get(type) ?? 0) + n);
    },
    countError(code) {
      errorTally.set(code, (errorTally.get(code) ?? 0) + 1);
    },
    countTokens(n) {
      tokenTally += n;
    },
    watchCotStore(store) {
      const stats = store.stats;
      new Gauge({
        name: "harmony_cot_store_entries",
        help: "Remembered chains of thought",
        registers: [registry],
        collect() {
          this.set(stats.entries);
        },
      });
      new Gauge({
        name: "harmony_cot_store_bytes",
        help: "Approximate bytes held by remembered chains of thought",
        registers: [registry],
        collect() {
          this.set(stats.bytes);
        },
      });
      new Gauge({
        name: "harmony_cot_store_evictions",
        help: "Remembered chains of thought evicted (size or age) since start",
        registers: [registry],
        collect() {
          this.set(stats.evictions);
        },
      });
      new Gauge({
        name: "harmony_cot_store_ring_bytes",
        help: "Bytes of the remembered reasoning's ring written so far (what it can hold resident; its address space is twice the budget)",
        registers: [registry],
        collect() {
          this.set(store.arenaReach);
        },
      });
    },
  };
  return m;
}
