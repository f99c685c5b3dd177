/**
 * `loadtest --openai URL`: concurrent Chat Completions and Responses
 * requests, streamed and not, with declared tools, against any
 * OpenAI-compatible endpoint (the sidecar's front, an engine's own server,
 * the engine simulator), every answer checked (openai-check.ts). When the
 * target reports what its engine injected (the simulator's
 * `GET /simulate/requests?run=…`, passed through by the sidecar), each
 * request's intended calls are compared with the calls that came back, so
 * "tool calls lost" is exact. `--compare URL` runs the same requests
 * against a second target, and the report sets the two side by side.
 */
import cliProgress from "cli-progress";
import { Agent, request, type Dispatcher } from "undici";
import { CodedError } from "../core/errors.js";
import {
  AnswerReader,
  checkAnswer,
  OPENAI_FAILURE_KINDS,
  SchemaCheck,
  type Answer,
  type OpenAIFailureKind,
  type Reported,
} from "./openai-check.js";
import { planRequest, type Api, type PlannedRequest } from "./openai-plan.js";
import { LatencyHistogram, minSamples } from "./percentiles.js";

export interface OpenAILoadOptions {
  /** The target's base URL (`http://host:port` or `…/v1`). */
  url: string;
  /** A second target, run with the same requests after the first. */
  compare?: string;
  /** Bearer token sent to both targets. */
  token?: string;
  requests: number;
  concurrency: number;
  apis: Api[];
  stream: "both" | "on" | "off";
  seed: number;
  /** The model to name; default the target's first from GET /v1/models. */
  model?: string;
  /** Abandon a request after this long. */
  timeoutMs: number;
  /** Names this run's requests for the simulator's records (default: a random one). */
  runId?: string;
  /** Send only this request and print it in full. */
  only?: number;
  progress: boolean;
}

/** Percentiles from an HDR histogram, each within [min, max] (./percentiles.ts). */
export interface LatencySummary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** At percentiles 50 … 99.99, those the samples support (p99.9: 1,000 samples). */
  percentiles: { p: number; ms: number }[];
  /** Buckets, 4 per doubling, the non-empty ones, ascending. */
  histogram: { lower_ms: number; upper_ms: number; count: number }[];
}

export interface OpenAIExample {
  index: number;
  mode: string;
  fault: string | null;
  kind: OpenAIFailureKind;
  detail: string;
  replay: string;
}

export interface TargetReport {
  target: string;
  /** The target reported its engine's injections (the simulator, or a front passing its path through). */
  reports_injections: boolean;
  requests: number;
  /** Requests answered 200. */
  answered: number;
  failed_requests: number;
  seconds: number;
  requests_per_second: number;
  completion_tokens: number;
  tokens_per_second: number;
  /** Streams only: sending to the first delta, and between deltas. */
  ttft_ms: LatencySummary;
  itl_ms: LatencySummary;
  /** Every request: sending to the end of the answer. */
  latency_ms: LatencySummary;
  /** Requests (and tokens) completed per second, sampled about every 500 ms. */
  throughput: { t: number; requests_per_second: number; tokens_per_second: number }[];
  /** At the same instants: requests in flight, and those completed since the last sample with their latency (null: none; p99 from 100). */
  over_time: {
    t: number;
    in_flight: number;
    completed: number;
    latency_p50_ms: number | null;
    latency_p99_ms: number | null;
    latency_max_ms: number | null;
  }[];
  /** Answers by HTTP status (`network`: no answer, `timeout`). */
  status: Record<string, number>;
  http_5xx: number;
  tool_calls: {
    /** What the model meant (requests with a report only). */
    intended: number;
    recovered: number;
    lost: number;
    /** What came back: calls, and those with arguments that parse and match their schema. */
    returned: number;
    valid: number;
  };
  control_tokens: { requests: number; texts: number; beyond_model: number };
  /** By the target's report: requests with each injected fault (`none`: without one). */
  faults_injected: Record<string, number>;
  faults_failed: Record<string, number>;
  /** The target's `harmony_recoveries_total` over the run, by kind (its /metrics, before and after; every client's requests count). */
  recoveries: Record<string, number>;
  /** Requests with each kind of failure. */
  failures: Record<string, number>;
  /** Requests and failed requests by API and streaming. */
  by_mode: Record<string, { requests: number; failed: number }>;
  examples: OpenAIExample[];
}

export interface OpenAIReport {
  kind: "openai";
  seed: number;
  run_id: string;
  requests: number;
  concurrency: number;
  apis: Api[];
  stream: "both" | "on" | "off";
  targets: TargetReport[];
  /** The first target lost nothing and failed no request. */
  ok: boolean;
}

const BUCKETS_PER_DOUBLING = 4;

class Latency {
  private readonly h = new LatencyHistogram();
  private readonly buckets = new Map<number, number>();
  count = 0;

  add(ms: number): void {
    const us = Math.max(1, Math.round(ms * 1000));
    this.h.record(us);
    const b = Math.floor(Math.log2(us) * BUCKETS_PER_DOUBLING);
    this.buckets.set(b, (this.buckets.get(b) ?? 0) + 1);
    this.count++;
  }

  summary(): LatencySummary {
    const q = (p: number) => this.h.at(p);
    const edge = (b: number) => 2 ** (b / BUCKETS_PER_DOUBLING) / 1000;
    return {
      count: this.count,
      min: this.h.min,
      p50: q(50),
      p90: q(90),
      p99: q(99),
      max: this.h.max,
      percentiles: this.h.percentiles(),
      histogram: [...this.buckets.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([b, count]) => ({ lower_ms: edge(b), upper_ms: edge(b + 1), count })),
    };
  }
}

/** `http://h:p/v1/` → `http://h:p`. */
export function baseOf(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/v1$/, "");
}

const modeOf = (r: PlannedRequest) => `${r.api}${r.stream ? " stream" : ""}`;

interface Target {
  base: string;
  dispatcher: Dispatcher;
  headers: Record<string, string>;
}

async function getText(t: Target, path: string, timeoutMs: number): Promise<{ status: number; text: string } | null> {
  try {
    const res = await request(t.base + path, {
      dispatcher: t.dispatcher,
      headers: t.headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    return { status: res.statusCode, text: await res.body.text() };
  } catch {
    return null;
  }
}

/** The target's first served model (GET /v1/models). */
async function firstModel(t: Target, timeoutMs: number): Promise<string> {
  const r = await getText(t, "/v1/models", timeoutMs);
  if (r === null) throw new CodedError("unreachable", `cannot reach ${t.base}`);
  if (r.status !== 200) throw new CodedError("unreachable", `${t.base}/v1/models answered ${r.status}; give --model`);
  try {
    const j = JSON.parse(r.text) as { data?: { id?: unknown }[] };
    const id = j.data?.[0]?.id;
    if (typeof id === "string") return id;
  } catch {
    // fall through
  }
  throw new CodedError("usage", `${t.base}/v1/models lists no model; give --model`);
}

/** `harmony_recoveries_total` by kind from a Prometheus text page. */
export function recoveriesOf(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^harmony_recoveries_total\{[^}]*kind="([^"]+)"[^}]*\} ([0-9.e+]+)$/.exec(line);
    if (m) out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

/** The target's records of this run, by key (null: it keeps none). */
async function injections(t: Target, runId: string, timeoutMs: number): Promise<Map<string, Reported> | null> {
  const r = await getText(t, `/simulate/requests?run=${encodeURIComponent(runId)}`, timeoutMs);
  if (r === null || r.status !== 200) return null;
  try {
    const j = JSON.parse(r.text) as {
      data?: { key?: string; choices?: { index: number; fault: string | null; intent: Reported["intent"]; exact: boolean }[] }[];
    };
    if (!Array.isArray(j.data)) return null;
    const out = new Map<string, Reported>();
    for (const rec of j.data) {
      const c = rec.choices?.find((x) => x.index === 0);
      if (typeof rec.key === "string" && c) out.set(rec.key, { fault: c.fault, intent: c.intent, exact: c.exact === true });
    }
    return out;
  } catch {
    return null;
  }
}

/** Send one planned request and read its answer. */
export async function send(t: Target, req: PlannedRequest, timeoutMs: number, keepRaw = false): Promise<Answer> {
  const path = req.api === "chat" ? "/v1/chat/completions" : "/v1/responses";
  const started = performance.now();
  const reader = new AnswerReader(req.api, req.stream, started, keepRaw);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(t.base + path, {
      method: "POST",
      dispatcher: t.dispatcher,
      headers: { ...t.headers, "content-type": "application/json", accept: req.stream ? "text/event-stream" : "application/json" },
      body: JSON.stringify(req.body),
      signal,
    });
    const a = reader.answer;
    a.status = res.statusCode;
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      let message = text.slice(0, 300);
      try {
        const j = JSON.parse(text) as { error?: { message?: string; code?: unknown } | string; message?: string };
        const e = j.error;
        message = typeof e === "string" ? e : `${String(e?.code ?? "")} ${e?.message ?? j.message ?? ""}`.trim() || message;
      } catch {
        // not JSON: the text itself
      }
      a.error = message;
      a.totalMs = performance.now() - started;
      return a;
    }
    // the stream's content type is the target's word; the request's `stream` decides how it is read
    for await (const chunk of res.body) {
      if (!reader.push(chunk as Buffer, performance.now())) {
        res.body.destroy();
        break;
      }
    }
    return reader.end(performance.now());
  } catch (e) {
    const a = reader.answer;
    const timedOut = signal.aborted;
    if (a.status === 200) {
      // broken mid-body: what arrived, marked incomplete
      const got = reader.end(performance.now());
      got.complete = false;
      got.streamError = got.streamError ?? (timedOut ? `timed out after ${timeoutMs} ms` : `the connection broke: ${(e as Error).message}`);
      return got;
    }
    a.status = timedOut ? -1 : 0;
    a.error = timedOut ? `no answer within ${timeoutMs} ms` : (e as Error).message;
    a.totalMs = performance.now() - started;
    return a;
  }
}

interface Done {
  req: PlannedRequest;
  answer: Answer;
}

/** One pass of the run's requests over one target. */
async function pass(opts: OpenAILoadOptions, url: string, runId: string, label: string): Promise<TargetReport> {
  const base = baseOf(url);
  const dispatcher = new Agent({
    connections: opts.concurrency,
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  });
  const t: Target = { base, dispatcher, headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {} };
  try {
    const model = opts.model ?? (await firstModel(t, Math.min(opts.timeoutMs, 30_000)));
    const before = await getText(t, "/metrics", 10_000);
    const plan = { seed: opts.seed, runId, apis: opts.apis, stream: opts.stream, model };
    const first = opts.only ?? 0;
    const last = opts.only !== undefined ? opts.only + 1 : opts.requests;
    const total = last - first;
    const done: Done[] = [];
    const bar =
      opts.progress && process.stderr.isTTY && opts.only === undefined
        ? new cliProgress.SingleBar(
            { format: `${label} [{bar}] {value}/{total} requests | {rps} req/s`, stream: process.stderr, hideCursor: true },
            cliProgress.Presets.shades_classic,
          )
        : null;
    bar?.start(total, 0, { rps: 0 });
    const throughput: TargetReport["throughput"] = [];
    const overTime: TargetReport["over_time"] = [];
    const interval = new LatencyHistogram(); // requests completed since the last sample
    let inFlight = 0;
    const started = performance.now();
    let next = first;
    let tokens = 0;
    let lastTick = started;
    let lastDone = 0;
    let lastTokens = 0;
    const sample = (now: number) => {
      const dt = (now - lastTick) / 1000;
      if (dt <= 0) return;
      throughput.push({
        t: (now - started) / 1000,
        requests_per_second: (done.length - lastDone) / dt,
        tokens_per_second: (tokens - lastTokens) / dt,
      });
      const n = interval.count;
      overTime.push({
        t: (now - started) / 1000,
        in_flight: inFlight,
        completed: n,
        latency_p50_ms: n > 0 ? interval.at(50) : null,
        latency_p99_ms: n >= minSamples(99) ? interval.at(99) : null,
        latency_max_ms: n > 0 ? interval.max : null,
      });
      interval.reset();
      lastTick = now;
      lastDone = done.length;
      lastTokens = tokens;
      bar?.update(done.length, { rps: Math.round(throughput.at(-1)!.requests_per_second) });
    };
    const worker = async () => {
      while (next < last) {
        const req = planRequest(next++, plan);
        inFlight++;
        const answer = await send(t, req, opts.timeoutMs, opts.only !== undefined);
        inFlight--;
        interval.record(answer.totalMs * 1000);
        done.push({ req, answer });
        tokens += answer.completionTokens;
        const now = performance.now();
        if (now - lastTick >= 500) sample(now);
      }
    };
    await Promise.all(Array.from({ length: Math.min(opts.concurrency, total) }, worker));
    const end = performance.now();
    if (done.length > lastDone) sample(end);
    bar?.stop();
    const seconds = (end - started) / 1000;
    const reported = await injections(t, runId, 30_000);
    const after = await getText(t, "/metrics", 10_000);
    const report = summarize(opts, label, runId, done, reported, seconds, tokens, throughput);
    report.over_time = overTime;
    if (before?.status === 200 && after?.status === 200) {
      const a = recoveriesOf(after.text);
      const b = recoveriesOf(before.text);
      for (const [k, n] of a) if (n - (b.get(k) ?? 0) > 0) report.recoveries[k] = n - (b.get(k) ?? 0);
    }
    if (opts.only !== undefined) {
      for (const d of done) {
        const rep = reported?.get(d.req.key) ?? null;
        const checked = checkAnswer(d.req, d.answer, rep, new SchemaCheck());
        process.stdout.write(
          JSON.stringify(
            {
              target: label,
              index: d.req.index,
              mode: modeOf(d.req),
              request: d.req.body,
              reported: rep,
              answer: d.answer,
              failures: checked.failures,
            },
            null,
            2,
          ) + "\n",
        );
      }
    }
    return report;
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

function summarize(
  opts: OpenAILoadOptions,
  label: string,
  runId: string,
  done: Done[],
  reported: Map<string, Reported> | null,
  seconds: number,
  tokens: number,
  throughput: TargetReport["throughput"],
): TargetReport {
  const schemas = new SchemaCheck();
  const ttft = new Latency();
  const itl = new Latency();
  const latency = new Latency();
  const r: TargetReport = {
    target: label,
    reports_injections: reported !== null,
    requests: done.length,
    answered: 0,
    failed_requests: 0,
    seconds,
    requests_per_second: done.length / Math.max(seconds, 1e-9),
    completion_tokens: tokens,
    tokens_per_second: tokens / Math.max(seconds, 1e-9),
    ttft_ms: ttft.summary(),
    itl_ms: itl.summary(),
    latency_ms: latency.summary(),
    throughput,
    over_time: [],
    status: {},
    http_5xx: 0,
    tool_calls: { intended: 0, recovered: 0, lost: 0, returned: 0, valid: 0 },
    control_tokens: { requests: 0, texts: 0, beyond_model: 0 },
    faults_injected: {},
    faults_failed: {},
    recoveries: {},
    failures: {},
    by_mode: {},
    examples: [],
  };
  done.sort((a, b) => a.req.index - b.req.index);
  for (const { req, answer } of done) {
    const statusKey = answer.status === 0 ? "network" : answer.status === -1 ? "timeout" : String(answer.status);
    r.status[statusKey] = (r.status[statusKey] ?? 0) + 1;
    if (answer.status >= 500) r.http_5xx++;
    if (answer.status === 200) r.answered++;
    latency.add(answer.totalMs);
    if (answer.firstTokenMs !== null) ttft.add(answer.firstTokenMs);
    for (const g of answer.gaps) itl.add(g);
    const rep = reported?.get(req.key) ?? null;
    const fault = rep ? (rep.fault ?? "none") : null;
    if (fault !== null) r.faults_injected[fault] = (r.faults_injected[fault] ?? 0) + 1;
    const c = checkAnswer(req, answer, rep, schemas);
    r.tool_calls.intended += c.intended;
    r.tool_calls.recovered += c.recovered;
    r.tool_calls.returned += c.returned;
    r.tool_calls.valid += c.validCalls;
    r.control_tokens.texts += c.controlTokens;
    r.control_tokens.beyond_model += c.controlExcess;
    if (c.controlExcess > 0) r.control_tokens.requests++;
    const mode = modeOf(req);
    const m = (r.by_mode[mode] ??= { requests: 0, failed: 0 });
    m.requests++;
    if (c.failures.length > 0) {
      r.failed_requests++;
      m.failed++;
      if (fault !== null) r.faults_failed[fault] = (r.faults_failed[fault] ?? 0) + 1;
      for (const kind of new Set(c.failures.map((f) => f.kind))) r.failures[kind] = (r.failures[kind] ?? 0) + 1;
      for (const f of c.failures) {
        if (r.examples.filter((e) => e.kind === f.kind).length >= 3) continue;
        r.examples.push({
          index: req.index,
          mode,
          fault,
          kind: f.kind,
          detail: f.detail,
          replay: `npx harmony-sidecar loadtest --openai ${label}${opts.token ? ' --token "$TOKEN"' : ""} --seed ${opts.seed} --run-id ${runId} --only ${req.index}${opts.apis.length < 2 ? ` --apis ${opts.apis.join(",")}` : ""}${opts.stream !== "both" ? ` --stream ${opts.stream}` : ""}${opts.model ? ` --model ${opts.model}` : ""}`,
        });
      }
    }
  }
  r.tool_calls.lost = r.tool_calls.intended - r.tool_calls.recovered;
  r.ttft_ms = ttft.summary();
  r.itl_ms = itl.summary();
  r.latency_ms = latency.summary();
  return r;
}

function randomRunId(): string {
  return `lt${Math.floor(Math.random() * 36 ** 8)
    .toString(36)
    .padStart(8, "0")}`;
}

/** Run against `opts.url` (and `opts.compare`): the same requests to each, one target after the other. */
export async function runOpenAILoadtest(opts: OpenAILoadOptions): Promise<OpenAIReport> {
  const runId = opts.runId ?? randomRunId();
  const targets: TargetReport[] = [];
  // the same key for both targets: a simulator behind both samples the same generation for each request
  targets.push(await pass(opts, opts.url, runId, opts.url));
  if (opts.compare) targets.push(await pass(opts, opts.compare, runId, opts.compare));
  const main = targets[0]!;
  return {
    kind: "openai",
    seed: opts.seed,
    run_id: runId,
    requests: opts.only !== undefined ? 1 : opts.requests,
    concurrency: opts.concurrency,
    apis: opts.apis,
    stream: opts.stream,
    targets,
    ok: main.requests > 0 && main.failed_requests === 0 && main.tool_calls.lost === 0,
  };
}

const pct = (a: number, b: number) => (b === 0 ? "0" : ((100 * a) / b).toFixed(2));
const ms = (v: number) => v.toFixed(v < 10 ? 2 : 1);

/** The report as console text: one column per target. */
export function formatOpenAIReport(r: OpenAIReport): string {
  const ts = r.targets;
  const lines: string[] = [];
  lines.push(
    `OpenAI load test: ${r.requests} requests at ${r.concurrency} concurrent; apis ${r.apis.join(", ")}; stream ${r.stream}; seed ${r.seed}; run ${r.run_id}`,
  );
  lines.push("");
  lines.push(`| | ${ts.map((t) => t.target).join(" | ")} |`);
  lines.push(`|---|${ts.map(() => "---").join("|")}|`);
  const row = (label: string, f: (t: TargetReport) => string) => lines.push(`| ${label} | ${ts.map(f).join(" | ")} |`);
  row("requests", (t) => String(t.requests));
  row("answered 200", (t) => String(t.answered));
  row("HTTP 5xx", (t) => String(t.http_5xx));
  row("requests failed", (t) => `${t.failed_requests} (${pct(t.failed_requests, t.requests)}%)`);
  row("intended tool calls recovered", (t) =>
    t.reports_injections ? `${t.tool_calls.recovered} of ${t.tool_calls.intended}` : "not reported",
  );
  row("intended tool calls lost", (t) => (t.reports_injections ? String(t.tool_calls.lost) : "not reported"));
  row("calls returned (valid arguments)", (t) => `${t.tool_calls.returned} (${t.tool_calls.valid})`);
  row(
    "control-token texts (beyond the model's own)",
    (t) => `${t.control_tokens.texts} (${t.control_tokens.beyond_model}, in ${t.control_tokens.requests} requests)`,
  );
  row("duration", (t) => `${t.seconds.toFixed(1)} s`);
  row("requests/s", (t) => t.requests_per_second.toFixed(1));
  row("completion tokens/s", (t) => String(Math.round(t.tokens_per_second)));
  row("TTFT p50 / p90 / p99 / max", (t) => `${ms(t.ttft_ms.p50)} / ${ms(t.ttft_ms.p90)} / ${ms(t.ttft_ms.p99)} / ${ms(t.ttft_ms.max)} ms`);
  row(
    "inter-token p50 / p90 / p99 / max",
    (t) => `${ms(t.itl_ms.p50)} / ${ms(t.itl_ms.p90)} / ${ms(t.itl_ms.p99)} / ${ms(t.itl_ms.max)} ms`,
  );
  row(
    "latency p50 / p90 / p99 / max",
    (t) => `${ms(t.latency_ms.p50)} / ${ms(t.latency_ms.p90)} / ${ms(t.latency_ms.p99)} / ${ms(t.latency_ms.max)} ms`,
  );
  lines.push("");
  const statuses = [...new Set(ts.flatMap((t) => Object.keys(t.status)))].sort();
  lines.push(`| answers by status | ${ts.map((t) => t.target).join(" | ")} |`);
  lines.push(`|---|${ts.map(() => "---").join("|")}|`);
  for (const s of statuses) row(s, (t) => String(t.status[s] ?? 0));
  lines.push("");
  const modes = [...new Set(ts.flatMap((t) => Object.keys(t.by_mode)))].sort();
  lines.push(`| failed by API | ${ts.map((t) => t.target).join(" | ")} |`);
  lines.push(`|---|${ts.map(() => "---").join("|")}|`);
  for (const m of modes) row(m, (t) => `${t.by_mode[m]?.failed ?? 0} of ${t.by_mode[m]?.requests ?? 0}`);
  lines.push("");
  const kinds = OPENAI_FAILURE_KINDS.filter((k) => ts.some((t) => t.failures[k]));
  if (kinds.length > 0) {
    lines.push(`| failure (requests) | ${ts.map((t) => t.target).join(" | ")} |`);
    lines.push(`|---|${ts.map(() => "---").join("|")}|`);
    for (const k of kinds) row(k, (t) => String(t.failures[k] ?? 0));
    lines.push("");
  }
  const faults = [...new Set(ts.flatMap((t) => Object.keys(t.faults_injected)))].filter((k) => k !== "none").sort();
  if (faults.length > 0) {
    lines.push(`| fault injected: requests (failed) | ${ts.map((t) => t.target).join(" | ")} |`);
    lines.push(`|---|${ts.map(() => "---").join("|")}|`);
    for (const k of faults) row(k, (t) => `${t.faults_injected[k] ?? 0} (${t.faults_failed[k] ?? 0})`);
    row("none", (t) => `${t.faults_injected.none ?? 0} (${t.faults_failed.none ?? 0})`);
    lines.push("");
  }
  const recs = [...new Set(ts.flatMap((t) => Object.keys(t.recoveries)))].sort();
  if (recs.length > 0) {
    lines.push(`| recoveries (the target's /metrics) | ${ts.map((t) => t.target).join(" | ")} |`);
    lines.push(`|---|${ts.map(() => "---").join("|")}|`);
    for (const k of recs) row(k, (t) => String(t.recoveries[k] ?? 0));
    lines.push("");
  }
  for (const t of ts) {
    if (t.examples.length === 0) continue;
    lines.push(`First examples (${t.target}):`);
    for (const e of t.examples)
      lines.push(`- ${e.kind} (request ${e.index}, ${e.mode}, fault ${e.fault ?? "not reported"}): ${e.detail}\n  replay: ${e.replay}`);
    lines.push("");
  }
  if (ts[0]!.failed_requests === 0)
    lines.push(
      `No failures at ${ts[0]!.target}: every answer checked out${ts[0]!.reports_injections ? ", and every intended tool call arrived" : ""}.`,
    );
  return lines.join("\n");
}
