/**
 * The simulator's `/metrics`: vLLM's `vllm:*` series (the gauges read from
 * the step loop when scraped, the counters kept as requests end) and the
 * simulator's own (`simulator_*`: faults injected, requests by endpoint).
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { StepLoop } from "./steps.js";
import { finishReason, type Run } from "./vllm.js";

const VLLM_LABELS = ["engine", "model_name"];

export class SimulatorMetrics {
  readonly registry = new Registry();
  /** vLLM's labels of every `vllm:*` sample. */
  readonly labels: { engine: string; model_name: string };
  readonly promptTokens: Counter;
  readonly faultsInjected: Counter;
  readonly requestsTotal: Counter;
  private readonly generationTokens: Counter;
  private readonly success: Counter;

  constructor(servedModelName: string, loop: StepLoop, kvCacheTokens: number) {
    const labels = { engine: "0", model_name: servedModelName };
    this.labels = labels;
    const registers = [this.registry];
    const gauge = (name: string, help: string, value: () => number) =>
      new Gauge({
        name,
        help,
        labelNames: VLLM_LABELS,
        registers,
        collect() {
          this.set(labels, value());
        },
      });
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", () => loop.running.length);
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", () => loop.waiting.length);
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", () =>
      Math.min(1, loop.running.reduce((a, j) => a + j.held(), 0) / Math.max(1, kvCacheTokens)),
    );
    const counter = (name: string, help: string, labelNames: string[]) => new Counter({ name, help, labelNames, registers });
    this.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", VLLM_LABELS);
    this.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.", VLLM_LABELS);
    this.success = counter("vllm:request_success_total", "Count of successfully processed requests.", [
      "engine",
      "finished_reason",
      "model_name",
    ]);
    for (const r of ["stop", "length", "abort", "error", "repetition"]) this.success.inc({ ...labels, finished_reason: r }, 0);
    this.faultsInjected = counter(
      "simulator_faults_injected_total",
      "Choices generated with an injected fault, by kind (none: without one).",
      ["kind"],
    );
    this.requestsTotal = counter("simulator_requests_total", "Generating requests, by endpoint and HTTP status.", ["endpoint", "status"]);
  }

  /** A request's choices have ended: their ids and finishes. */
  countFinish(runs: Run[]): void {
    for (const run of runs) {
      this.generationTokens.inc(this.labels, run.ids.length);
      this.success.inc({ ...this.labels, finished_reason: finishReason(run.end) });
    }
  }
}
