/** The load tester's report: percentiles within [min, max] and only where the samples allow, its page's numbers, replay commands. */
import { describe, expect, it } from "vitest";
import { FAULT_KINDS } from "../../src/loadtest/generate.js";
import { flagSettings, renderLoadtestHtml, renderOpenAIHtml, type HtmlReport } from "../../src/loadtest/html.js";
import type { OpenAIReport, TargetReport } from "../../src/loadtest/openai-run.js";
import { LatencyHistogram, minSamples } from "../../src/loadtest/percentiles.js";
import { replayCommand, type LoadtestOptions, type PassReport } from "../../src/loadtest/run.js";
import { loadtestOptions } from "../helpers.js";

const opts: LoadtestOptions = loadtestOptions({ streams: 10, concurrency: 4, streamsPerFrame: 4 });

function pass(over: Partial<PassReport> = {}): PassReport {
  return {
    mode: "resilient",
    streams: 120,
    tokens: 12_000,
    seconds: 1.5,
    tokens_per_second: 8000,
    latency_ms: { count: 40, min: 0.5, p50: 2, p90: 4, p99: 7, max: 7.25 },
    faults_injected: { none: 90, double_start: 20, stray_stop_between_messages: 10 },
    recoveries: { double_start: 20, stray_stop: 10 },
    tool_calls: { intended: 50, recovered: 49 },
    failed_streams: 1,
    failures: { tool_call_lost: 1 },
    examples: [],
    latency_histogram: [{ lower_ms: 0.5, upper_ms: 1, count: 40 }],
    latency_percentiles: [
      { p: 50, ms: 2 },
      { p: 75, ms: 3 },
      { p: 90, ms: 4 },
    ],
    throughput: [
      { t: 0.1, tokens_per_second: 7000 },
      { t: 0.2, tokens_per_second: 9000 },
    ],
    over_time: [
      { t: 0.1, open_streams: 4, frames: 20, latency_p50_ms: 2, latency_p99_ms: null, latency_max_ms: 5 },
      { t: 0.2, open_streams: 3, frames: 20, latency_p50_ms: 2.5, latency_p99_ms: null, latency_max_ms: 7.25 },
    ],
    // only the fault that lost a stream has a count: the other had none
    faults_failed: { double_start: 1 },
    ...over,
  };
}

describe("percentiles", () => {
  it("never lie above the largest value or below the smallest, whatever the histogram's buckets say", () => {
    const h = new LatencyHistogram();
    // values where HDR's 3-digit buckets round up: 689,900 µs answers ~690.2 ms for a top percentile
    for (const us of [1_003, 1_005, 689_900, 2_047, 100_001]) h.record(us);
    for (const p of [0, 50, 90, 99, 99.9, 99.99, 100]) {
      expect(h.at(p)).toBeLessThanOrEqual(h.max);
      expect(h.at(p)).toBeGreaterThanOrEqual(h.min);
    }
    expect(h.max).toBe(689.9);
    expect(h.min).toBe(1.003);
  });

  it("are listed only where the samples support them", () => {
    expect([50, 90, 99, 99.9, 99.99].map(minSamples)).toEqual([2, 10, 100, 1000, 10000]);
    const h = new LatencyHistogram();
    for (let i = 1; i <= 150; i++) h.record(i * 1000);
    expect(h.percentiles().map((x) => x.p)).toEqual([50, 75, 90, 99]);
    for (let i = 0; i < 1000; i++) h.record(5000);
    expect(h.percentiles().map((x) => x.p)).toEqual([50, 75, 90, 99, 99.9]);
    h.reset();
    expect([h.count, h.at(50), h.max, h.percentiles()]).toEqual([0, 0, 0, []]);
  });
});

describe("the HTML report", () => {
  const report: HtmlReport = {
    target: "ws://127.0.0.1:9/v1/stream",
    seed: 7,
    fault_rate: 0.3,
    chunking: "random",
    resilient: pass(),
    ok: false,
  };
  const page = renderLoadtestHtml(report, { settings: { ...opts }, generatedAt: new Date(0) });

  it("says 0 failed for a fault with no failed stream, never 'not recorded'", () => {
    expect(page).not.toContain("not recorded");
    // stray_stop_between_messages: 10 injected, 10 recovered
    expect(page).toMatch(/stray_stop_between_messages: 10 recovered/);
    expect(page).toMatch(/double_start: 19 recovered/);
  });

  it("has p90 and max tiles, and hides a p99 that 40 frames cannot give", () => {
    expect(page).toContain('<div class="tile-value">4.00 ms</div><div class="tile-label">frame latency p90</div>');
    expect(page).toContain('<div class="tile-value">7.25 ms</div><div class="tile-label">frame latency max</div>');
    expect(page).toMatch(
      /title="40 frames: a p99 needs at least 100"><div class="tile-value">–<\/div><div class="tile-label">frame latency p99/,
    );
    // the curve: the three listed percentiles and max, none above max
    const dots = [...page.matchAll(/<circle class="dot"[^>]*><title>([^<]+)<\/title>/g)].map((m) => m[1]);
    expect(dots).toEqual(["p50: 2.000 ms", "p75: 3.000 ms", "p90: 4.000 ms", "max: 7.250 ms"]);
  });

  it("draws latency and open streams over time", () => {
    expect(page).toContain('id="resilient-latency-time"');
    expect(page).toContain('id="resilient-open-time"');
    expect(page).not.toContain("No samples over time");
  });

  it("lists the settings by their flags, the faults as words, no token", () => {
    expect(page).toContain("<dt><code>--streams-per-frame</code></dt><dd>4</dd>");
    expect(page).toContain("<dt><code>--duration</code></dt><dd>0</dd>");
    expect(page).toContain(`<dt><code>--faults</code></dt><dd>all ${FAULT_KINDS.length}: ${FAULT_KINDS.join(", ")}</dd>`);
    expect(flagSettings({ token: "s3cret", faults: ["double_start"], url: "http://x" }, { url: "--openai" })).toEqual([
      ["--faults", "double_start"],
      ["--openai", "http://x"],
    ]);
  });

  it("keeps short ticks clear of the axis label (tokens/s in thousands)", () => {
    const fast = renderLoadtestHtml({
      ...report,
      resilient: pass({
        throughput: [
          { t: 0.1, tokens_per_second: 180_000 },
          { t: 0.2, tokens_per_second: 240_000 },
        ],
      }),
    });
    const ticks = [...fast.matchAll(/<svg class="chart" id="resilient-throughput"[\s\S]*?<\/svg>/g)][0]![0];
    const labels = [...ticks.matchAll(/<text class="tick" x="58"[^>]*>([^<]+)<\/text>/g)].map((m) => m[1]!);
    expect(labels.length).toBeGreaterThan(2);
    for (const l of labels) expect(l.length, l).toBeLessThanOrEqual(5);
    expect(labels).toContain("100k");
  });
});

describe("replay commands", () => {
  it("name the target, the faults and the chunking of the run, and never the token", () => {
    expect(replayCommand({ ...opts, url: "ws://10.0.0.1:8765/v1/stream" }, "strict", 12, false)).toBe(
      "npx harmony-sidecar loadtest --url ws://10.0.0.1:8765/v1/stream --seed 7 --only 12 --fault-rate 0.3 --mode strict",
    );
    expect(
      replayCommand({ ...opts, grpc: "10.0.0.1:8766", token: "s3cret", faults: ["double_start"], chunking: "step" }, "resilient", 3, false),
    ).toBe(
      'npx harmony-sidecar loadtest --grpc 10.0.0.1:8766 --token "$TOKEN" --seed 7 --only 3 --fault-rate 0.3 --faults double_start --chunking step --step-tokens 4 --mode resilient',
    );
    // a server the load tester started itself: the replay starts one too
    expect(replayCommand({ ...opts, url: "ws://127.0.0.1:40000/v1/stream" }, "resilient", 1, true)).toBe(
      "npx harmony-sidecar loadtest --seed 7 --only 1 --fault-rate 0.3 --mode resilient",
    );
  });
});

describe("the --openai report", () => {
  it("has the p90 and max tiles, latency and requests in flight over time, and the settings by flag", () => {
    const lat = (count: number) => ({
      count,
      min: 1,
      p50: 10,
      p90: 20,
      p99: 30,
      max: 31,
      percentiles: [{ p: 50, ms: 10 }],
      histogram: [{ lower_ms: 8, upper_ms: 16, count }],
    });
    const t = {
      target: "http://127.0.0.1:8765",
      reports_injections: false,
      requests: 20,
      answered: 20,
      failed_requests: 0,
      seconds: 2,
      requests_per_second: 10,
      completion_tokens: 100,
      tokens_per_second: 50,
      ttft_ms: lat(12),
      itl_ms: lat(200),
      latency_ms: lat(20),
      throughput: [
        { t: 0.5, requests_per_second: 8, tokens_per_second: 40 },
        { t: 1, requests_per_second: 12, tokens_per_second: 60 },
      ],
      over_time: [
        { t: 0.5, in_flight: 4, completed: 4, latency_p50_ms: 10, latency_p99_ms: null, latency_max_ms: 20 },
        { t: 1, in_flight: 2, completed: 6, latency_p50_ms: 12, latency_p99_ms: null, latency_max_ms: 31 },
      ],
      status: { "200": 20 },
      http_5xx: 0,
      tool_calls: { intended: 0, recovered: 0, lost: 0, returned: 3, valid: 3 },
      control_tokens: { requests: 0, texts: 0, beyond_model: 0 },
      faults_injected: {},
      faults_failed: {},
      recoveries: {},
      failures: {},
      by_mode: { chat: { requests: 20, failed: 0 } },
      examples: [],
    } satisfies TargetReport;
    const r: OpenAIReport = {
      kind: "openai",
      seed: 1,
      run_id: "r1",
      requests: 20,
      concurrency: 4,
      apis: ["chat"],
      stream: "both",
      targets: [t],
      ok: true,
    };
    const page = renderOpenAIHtml(r, { settings: { url: t.target, requests: 20, timeoutMs: 5000, token: "x" } });
    expect(page).toContain('<div class="tile-value">20.0 ms</div><div class="tile-label">TTFT p90</div>');
    expect(page).toMatch(/title="12 streams: a p99 needs at least 100"><div class="tile-value">–<\/div><div class="tile-label">TTFT p99/);
    expect(page).toContain('<div class="tile-value">31.0 ms</div><div class="tile-label">request latency max</div>');
    expect(page).toContain('id="target-0-latency-time"');
    expect(page).toContain('id="target-0-open-time"');
    expect(page).toContain("<dt><code>--openai</code></dt><dd>http://127.0.0.1:8765</dd>");
    expect(page).toContain("<dt><code>--timeout-ms</code></dt><dd>5000</dd>");
    expect(page).not.toContain(">x<");
  });
});
