/**
 * `loadtest --html FILE`: the report as one self-contained HTML page (inline
 * SVG and CSS, no script, nothing fetched), light and dark: latency
 * histogram and percentile curve, tokens/s over time, recoveries by kind,
 * faults injected against recovered, failures with their replay commands,
 * the run's settings and the machine.
 *
 * It draws what the report holds, and the numbers are the JSON report's:
 * percentiles come clamped to [min, max] and only where the samples support
 * them (./percentiles.ts); a percentile the run has too few samples for is
 * shown as such. Reports written before a field existed (per-pass histogram
 * buckets, percentiles, samples over time, failed streams per fault) say
 * what is missing instead of drawing it. Settings are listed by their CLI
 * flags.
 */
import os from "node:os";
import { FAULT_KINDS } from "./generate.js";
import { OPENAI_FAILURE_KINDS } from "./openai-check.js";
import type { LatencySummary, OpenAIReport, TargetReport } from "./openai-run.js";
import { minSamples } from "./percentiles.js";
import type { OverTime, PassReport, Report } from "./run.js";

/** Per-pass data the charts use when the run recorded it. */
export interface PassExtras {
  /** Frame latency buckets (non-empty ones, ascending). */
  latency_histogram?: { lower_ms: number; upper_ms: number; count: number }[];
  /** Frame latency at percentiles (ascending p, 0..100). */
  latency_percentiles?: { p: number; ms: number }[];
  /** Tokens per second, sampled over the run (`t` seconds from its start). */
  throughput?: { t: number; tokens_per_second: number }[];
  /** Failed streams by injected fault (`none` for unfaulted streams). */
  faults_failed?: Record<string, number>;
  /** Open streams and frame latency over the run. */
  over_time?: OverTime[];
}

/** A pass as the page reads it: fields recorded by newer load testers may be missing from an older report. */
export type HtmlPass = Omit<PassReport, keyof PassExtras | "latency_ms"> &
  PassExtras & { latency_ms: { count?: number; min?: number; p50: number; p90: number; p99: number; max: number } };
export type HtmlReport = Omit<Report, "resilient" | "strict"> & { resilient: HtmlPass; strict?: HtmlPass };

export interface Machine {
  hostname?: string;
  platform: string;
  arch: string;
  cpus: number;
  cpu_model: string;
  memory_gb: number;
  node: string;
}

export interface HtmlContext {
  /** The run's settings (LoadtestOptions, or any flat record). */
  settings?: Record<string, unknown>;
  machine?: Machine;
  /** When the report was written (default: now). */
  generatedAt?: Date;
}

/** This machine, for the report (no hostname: reports get shared). */
export function machineInfo(): Machine {
  const cpus = os.cpus();
  return {
    platform: `${os.type()} ${os.release()}`,
    arch: os.arch(),
    cpus: os.availableParallelism(),
    cpu_model: cpus[0]?.model.trim() ?? "unknown",
    memory_gb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
  };
}

const esc = (s: unknown): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** A number for people: 1234567 → "1,234,567"; fractions to `digits`. */
function fmt(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return "–";
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** An axis tick: short enough never to reach the axis label (120k, 1.5M). */
function tickText(v: number, digits: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${fmt(v / 1e6, a >= 1e7 ? 0 : 1)}M`;
  if (a >= 1e4) return `${fmt(v / 1e3, 0)}k`;
  return fmt(v, digits);
}

/** A round axis step for a range. */
function niceStep(range: number, ticks: number): number {
  const raw = range / Math.max(1, ticks);
  const mag = 10 ** Math.floor(Math.log10(raw || 1));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

const W = 560;
const H = 240;
/** Margins: the left one holds the ticks (at most 5 characters, tickText) clear of the rotated axis label. */
const M = { l: 64, r: 16, t: 14, b: 40 };

function frame(title: string, body: string, xLabel: string, yLabel: string, id: string): string {
  return `<svg class="chart" id="${id}" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-t">
<title id="${id}-t">${esc(title)}</title>
${body}
<text class="axis-label" x="${M.l + (W - M.l - M.r) / 2}" y="${H - 6}" text-anchor="middle">${esc(xLabel)}</text>
<text class="axis-label" transform="translate(13 ${M.t + (H - M.t - M.b) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>
</svg>`;
}

function yAxis(max: number, y: (v: number) => number, digits: number): string {
  const step = niceStep(max, 4);
  let out = "";
  for (let v = 0; v <= max + 1e-9; v += step) {
    out += `<line class="grid" x1="${M.l}" x2="${W - M.r}" y1="${y(v)}" y2="${y(v)}"/><text class="tick" x="${M.l - 6}" y="${y(v) + 4}" text-anchor="end">${tickText(v, digits)}</text>`;
  }
  return out;
}

/** Latency at percentiles on a "nines" axis (50, 90, 99, 99.9 …), max last. */
function percentileChart(p: HtmlPass): string {
  const l = p.latency_ms;
  const pts =
    p.latency_percentiles ??
    [
      { p: 50, ms: l.p50 },
      { p: 90, ms: l.p90 },
      { p: 99, ms: l.p99 },
    ].filter((x) => l.count === undefined || l.count >= minSamples(x.p));
  return percentileCurve(pts, l.max, "Frame latency by percentile (ms)", `${p.mode}-percentiles`);
}

/** A percentile curve: `points` (p below 100) and the maximum, in ms; no point is drawn above the maximum. */
function percentileCurve(points: { p: number; ms: number }[], maxValue: number, title: string, id: string): string {
  const pts = points.filter((x) => x.p < 100).map((x) => ({ p: x.p, ms: Math.min(x.ms, maxValue) }));
  const nines = (q: number) => -Math.log10(1 - Math.min(q, 99.9999) / 100);
  const lastX = Math.max(2, Math.ceil(nines(pts[pts.length - 1]?.p ?? 99)));
  const all = [...pts.map((x) => ({ x: nines(x.p), ms: x.ms, label: `p${x.p}` })), { x: lastX + 0.6, ms: maxValue, label: "max" }];
  const maxMs = Math.max(...all.map((a) => a.ms), 0.001) * 1.1;
  const xMin = Math.min(0, ...all.map((a) => a.x));
  const xMax = lastX + 0.6;
  const x = (v: number) => M.l + ((v - xMin) / (xMax - xMin)) * (W - M.l - M.r);
  const y = (v: number) => H - M.b - (v / maxMs) * (H - M.t - M.b);
  let body = yAxis(maxMs, y, maxMs < 10 ? 1 : 0);
  for (const [q, label] of [
    [0, "p0"],
    [50, "p50"],
    [90, "p90"],
    [99, "p99"],
    [99.9, "p99.9"],
    [99.99, "p99.99"],
  ] as const) {
    const v = nines(q);
    if (v > lastX) break;
    body += `<text class="tick" x="${x(v)}" y="${H - M.b + 16}" text-anchor="middle">${label}</text>`;
  }
  body += `<text class="tick" x="${x(lastX + 0.6)}" y="${H - M.b + 16}" text-anchor="middle">max</text>`;
  body += `<polyline class="line" points="${all.map((a) => `${x(a.x).toFixed(1)},${y(a.ms).toFixed(1)}`).join(" ")}"/>`;
  for (const a of all) {
    body += `<circle class="dot" cx="${x(a.x).toFixed(1)}" cy="${y(a.ms).toFixed(1)}" r="3.5"><title>${esc(a.label)}: ${fmt(a.ms, 3)} ms</title></circle>`;
    body += `<text class="value" x="${x(a.x).toFixed(1)}" y="${(y(a.ms) - 8).toFixed(1)}" text-anchor="middle">${fmt(a.ms, a.ms < 10 ? 2 : 1)}</text>`;
  }
  return frame(title, body, "percentile", "ms", id);
}

function histogramChart(p: HtmlPass): string | null {
  const b = p.latency_histogram;
  if (!b || b.length === 0) return null;
  return bucketChart(b, "Frame latency histogram", "frame latency, ms (bucket start)", "frames", `${p.mode}-histogram`);
}

/** Bars of latency buckets (the non-empty ones, ascending). */
function bucketChart(
  b: { lower_ms: number; upper_ms: number; count: number }[],
  title: string,
  xLabel: string,
  yLabel: string,
  id: string,
): string {
  const maxCount = Math.max(...b.map((x) => x.count), 1) * 1.1;
  const n = b.length;
  const bw = (W - M.l - M.r) / n;
  const y = (v: number) => H - M.b - (v / maxCount) * (H - M.t - M.b);
  let body = yAxis(maxCount, y, 0);
  b.forEach((bucket, i) => {
    const x0 = M.l + i * bw;
    body += `<rect class="bar" x="${(x0 + 1).toFixed(1)}" y="${y(bucket.count).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${(H - M.b - y(bucket.count)).toFixed(1)}"><title>${fmt(bucket.lower_ms, 3)}–${fmt(bucket.upper_ms, 3)} ms: ${fmt(bucket.count)} ${esc(yLabel)}</title></rect>`;
    if (n <= 12 || i % Math.ceil(n / 8) === 0)
      body += `<text class="tick" x="${(x0 + bw / 2).toFixed(1)}" y="${H - M.b + 16}" text-anchor="middle">${fmt(bucket.lower_ms, bucket.lower_ms < 1 ? 2 : bucket.lower_ms < 10 ? 1 : 0)}</text>`;
  });
  return frame(title, body, xLabel, yLabel, id);
}

/** One line of a chart over time: `points` at `t` seconds from the run's start (null: no value there, a gap). */
interface Series {
  name: string;
  /** Its CSS class (`line`, `line2`, `line3`). */
  cls: string;
  points: { t: number; v: number | null }[];
  /** How points are merged when there are more than a chart draws: the largest (latency maxima), or the mean. */
  merge?: "max" | "mean";
}

/** The most points a line draws; longer runs are merged into this many. */
const MAX_POINTS = 600;

function thin(s: Series): { t: number; v: number | null }[] {
  const pts = s.points;
  if (pts.length <= MAX_POINTS) return pts;
  const out: { t: number; v: number | null }[] = [];
  const per = pts.length / MAX_POINTS;
  for (let b = 0; b < MAX_POINTS; b++) {
    const from = Math.floor(b * per);
    const to = Math.max(from + 1, Math.floor((b + 1) * per));
    let acc: number | null = null;
    let n = 0;
    for (let i = from; i < to && i < pts.length; i++) {
      const v = pts[i]!.v;
      if (v === null) continue;
      acc = acc === null ? v : s.merge === "max" ? Math.max(acc, v) : acc + v;
      n++;
    }
    out.push({ t: pts[Math.min(to, pts.length) - 1]!.t, v: acc === null ? null : s.merge === "max" ? acc : acc / n });
  }
  return out;
}

/** Largest of many numbers without spreading them into an argument list. */
function largest(values: Iterable<number>, floor: number): number {
  let m = floor;
  for (const v of values) if (v > m) m = v;
  return m;
}

/** Values sampled over the run: one line per series (broken where a value is missing), an optional average dashed. */
function timeChart(
  series: Series[],
  o: { title: string; yLabel: string; id: string; digits?: number; avg?: number; avgLabel?: string; minMax?: number },
): string | null {
  const lines = series.map((s) => ({ ...s, points: thin(s) }));
  const values = lines.flatMap((s) => s.points.filter((p) => p.v !== null).map((p) => p.v!));
  if (values.length < 2) return null;
  const tMax = largest(
    lines.flatMap((s) => s.points.map((p) => p.t)),
    0.001,
  );
  const vMax = largest(values, o.minMax ?? 1e-6) * 1.15;
  const x = (v: number) => M.l + (v / tMax) * (W - M.l - M.r);
  const y = (v: number) => H - M.b - (v / vMax) * (H - M.t - M.b);
  let body = yAxis(vMax, y, o.digits ?? (vMax < 10 ? 1 : 0));
  const step = niceStep(tMax, 6);
  for (let t = 0; t <= tMax + 1e-9; t += step)
    body += `<text class="tick" x="${x(t).toFixed(1)}" y="${H - M.b + 16}" text-anchor="middle">${fmt(t, step < 1 ? 1 : 0)}</text>`;
  for (const s of lines) {
    let run: string[] = [];
    const flush = () => {
      if (run.length > 1) body += `<polyline class="${s.cls}" points="${run.join(" ")}"><title>${esc(s.name)}</title></polyline>`;
      else if (run.length === 1) {
        const [cx, cy] = run[0]!.split(",");
        body += `<circle class="${s.cls}-dot" cx="${cx}" cy="${cy}" r="2"><title>${esc(s.name)}</title></circle>`;
      }
      run = [];
    };
    for (const p of s.points) {
      if (p.v === null) flush();
      else run.push(`${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    }
    flush();
  }
  if (o.avg !== undefined)
    body += `<line class="avg" x1="${M.l}" x2="${W - M.r}" y1="${y(o.avg).toFixed(1)}" y2="${y(o.avg).toFixed(1)}"><title>${esc(o.avgLabel ?? `average ${fmt(o.avg, 1)}`)}</title></line>`;
  const legend =
    series.length > 1 ? `<p class="legend">${series.map((s) => `<span class="sw ${s.cls}-sw"></span> ${esc(s.name)}`).join(" ")}</p>` : "";
  return legend + frame(o.title, body, "seconds", o.yLabel, o.id);
}

function throughputChart(p: HtmlPass): string | null {
  const s = p.throughput;
  if (!s) return null;
  return timeChart([{ name: "tokens/s", cls: "line", points: s.map((a) => ({ t: a.t, v: a.tokens_per_second })) }], {
    title: "Tokens per second over the run",
    yLabel: "tokens/s",
    id: `${p.mode}-throughput`,
    digits: 0,
    minMax: 1,
    avg: p.tokens_per_second,
    avgLabel: `average ${fmt(p.tokens_per_second)} tokens/s`,
  });
}

/** Latency of what finished in each interval: its median (p99 where an interval has 100 samples) and its maximum. */
function latencyOverTime(
  rows: { t: number; latency_p50_ms: number | null; latency_p99_ms: number | null; latency_max_ms: number | null }[],
  title: string,
  id: string,
): string | null {
  const hasP99 = rows.filter((r) => r.latency_p99_ms !== null).length >= 2;
  return timeChart(
    [
      { name: "median", cls: "line", points: rows.map((r) => ({ t: r.t, v: r.latency_p50_ms })) },
      ...(hasP99 ? [{ name: "p99", cls: "line2", points: rows.map((r) => ({ t: r.t, v: r.latency_p99_ms })), merge: "max" as const }] : []),
      { name: "max", cls: "line3", points: rows.map((r) => ({ t: r.t, v: r.latency_max_ms })), merge: "max" },
    ],
    { title, yLabel: "ms", id },
  );
}

/** How many streams (or requests) were open at each sample. */
function openOverTime(rows: { t: number; open: number }[], title: string, yLabel: string, id: string): string | null {
  return timeChart([{ name: yLabel, cls: "line", points: rows.map((r) => ({ t: r.t, v: r.open })) }], {
    title,
    yLabel,
    id,
    digits: 0,
    minMax: 1,
  });
}

/** Horizontal bars: one row per label, one or two series. */
function barRows(
  rows: { label: string; a: number; b?: number | null; note?: string }[],
  aName: string,
  bName?: string,
  id = "bars",
): string {
  if (rows.length === 0) return `<p class="missing">None.</p>`;
  const max = Math.max(...rows.map((r) => Math.max(r.a, r.b ?? 0)), 1);
  const rowH = bName ? 30 : 20;
  const lw = Math.min(300, 16 + 6.7 * Math.max(...rows.map((r) => r.label.length)));
  const vw = 70;
  const h = rows.length * rowH + 8;
  const bar = (W - lw - vw - 10) / max;
  let body = "";
  rows.forEach((r, i) => {
    const y0 = 4 + i * rowH;
    body += `<text class="row-label" x="${lw - 8}" y="${y0 + (bName ? 18 : 14)}" text-anchor="end">${esc(r.label)}</text>`;
    body += `<rect class="bar" x="${lw}" y="${y0 + 3}" width="${Math.max(r.a > 0 ? 1.5 : 0, r.a * bar).toFixed(1)}" height="${bName ? 11 : 13}"><title>${esc(r.label)}: ${fmt(r.a)} ${esc(aName)}</title></rect>`;
    body += `<text class="value" x="${(lw + r.a * bar + 4).toFixed(1)}" y="${y0 + 13}">${fmt(r.a)}</text>`;
    if (bName) {
      if (r.b === null || r.b === undefined)
        body += `<text class="value missing" x="${lw + 2}" y="${y0 + 26}">${esc(r.note ?? "not recorded")}</text>`;
      else {
        body += `<rect class="bar ok" x="${lw}" y="${y0 + 16}" width="${Math.max(r.b > 0 ? 1.5 : 0, r.b * bar).toFixed(1)}" height="11"><title>${esc(r.label)}: ${fmt(r.b)} ${esc(bName)}</title></rect>`;
        body += `<text class="value" x="${(lw + r.b * bar + 4).toFixed(1)}" y="${y0 + 26}">${fmt(r.b)}</text>`;
      }
    }
  });
  const legend = bName
    ? `<p class="legend"><span class="sw bar-sw"></span> ${esc(aName)} <span class="sw ok-sw"></span> ${esc(bName)}</p>`
    : "";
  return `${legend}<svg class="chart bars" id="${id}" width="${W}" height="${h}" viewBox="0 0 ${W} ${h}" role="img" aria-label="${esc(aName)}${bName ? ` and ${esc(bName)}` : ""}">${body}</svg>`;
}

function missing(what: string, field: string): string {
  return `<p class="missing">No ${esc(what)}: this report has no <code>${esc(field)}</code> (recorded by newer load testers).</p>`;
}

function tile(label: string, value: string, cls = "", title = ""): string {
  return `<div class="tile ${cls}"${title ? ` title="${esc(title)}"` : ""}><div class="tile-value">${value}</div><div class="tile-label">${esc(label)}</div></div>`;
}

/** A percentile's tile: its value, or "–" when the run has too few samples for it (a report without counts shows the value). */
function pctTile(
  label: string,
  l: { count?: number; p50: number; p90: number; p99: number },
  p: 50 | 90 | 99,
  digits: number,
  what: string,
): string {
  const v = p === 50 ? l.p50 : p === 90 ? l.p90 : l.p99;
  if (l.count !== undefined && l.count < minSamples(p))
    return tile(label, "–", "", `${fmt(l.count)} ${what}: a p${p} needs at least ${fmt(minSamples(p))}`);
  return tile(label, `${fmt(v, digits)} ms`);
}

function passSection(p: HtmlPass, title: string): string {
  const faulted = Object.entries(p.faults_injected)
    .filter(([k]) => k !== "none")
    .sort((a, b) => b[1] - a[1]);
  // a fault with no failed stream is absent from faults_failed: 0 failed, not unknown (only a report without the field is)
  const faultRows = faulted.map(([k, n]) => {
    const failed = p.faults_failed ? (p.faults_failed[k] ?? 0) : p.failed_streams === 0 ? 0 : null;
    return { label: k, a: n, b: failed === null ? null : n - failed, note: "per-fault failures not recorded" };
  });
  const recRows = Object.entries(p.recoveries)
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => ({ label: k, a: n }));
  const ok = p.failed_streams === 0 && p.streams > 0;
  const examples = p.examples
    .map(
      (e) =>
        `<li><strong>${esc(e.kind)}</strong> (stream ${e.index}, fault ${esc(e.fault ?? "none")}): ${esc(e.detail.length > 400 ? e.detail.slice(0, 400) + "…" : e.detail)}<pre class="replay"><code>${esc(e.replay)}</code></pre></li>`,
    )
    .join("");
  const failureRows = Object.entries(p.failures)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `<tr><td>${esc(k)}</td><td class="num">${fmt(n)}</td></tr>`)
    .join("");
  const hist = histogramChart(p);
  const tput = throughputChart(p);
  const ot = p.over_time;
  const latOt = ot ? latencyOverTime(ot, "Frame latency over the run", `${p.mode}-latency-time`) : null;
  const openOt = ot
    ? openOverTime(
        ot.map((r) => ({ t: r.t, open: r.open_streams })),
        "Open streams over the run",
        "open streams",
        `${p.mode}-open-time`,
      )
    : null;
  const shortRun = `<p class="missing">Too short a run for two samples (one every 100 ms).</p>`;
  return `<section class="pass" id="pass-${esc(p.mode)}" aria-labelledby="pass-${esc(p.mode)}-h">
<h2 id="pass-${esc(p.mode)}-h">${esc(title)} <span class="verdict ${ok ? "good" : "bad"}">${ok ? "no failures" : `${fmt(p.failed_streams)} streams failed`}</span></h2>
<div class="tiles">
${tile("streams", fmt(p.streams))}
${tile("tokens", fmt(p.tokens))}
${tile("seconds", fmt(p.seconds, 1))}
${tile("tokens/s", fmt(p.tokens_per_second))}
${pctTile("frame latency p50", p.latency_ms, 50, 2, "frames")}
${pctTile("frame latency p90", p.latency_ms, 90, 2, "frames")}
${pctTile("frame latency p99", p.latency_ms, 99, 2, "frames")}
${tile("frame latency max", `${fmt(p.latency_ms.max, 2)} ms`)}
${tile("tool calls recovered", `${fmt(p.tool_calls.recovered)} / ${fmt(p.tool_calls.intended)}`, p.tool_calls.recovered === p.tool_calls.intended ? "good" : "bad")}
${tile("failed streams", fmt(p.failed_streams), p.failed_streams === 0 ? "good" : "bad")}
</div>
<div class="grid">
<figure><figcaption>Frame latency histogram</figcaption>${hist ?? missing("latency histogram", "latency_histogram")}</figure>
<figure><figcaption>Frame latency by percentile, ms${p.latency_percentiles ? "" : " (p50, p90, p99 and max: the report's four)"}</figcaption>${percentileChart(p)}</figure>
<figure><figcaption>Tokens per second over time</figcaption>${tput ?? `${p.throughput ? shortRun : missing("throughput samples", "throughput")}<p class="missing">Average over the run: <strong>${fmt(p.tokens_per_second)}</strong> tokens/s in ${fmt(p.seconds, 1)} s.</p>`}</figure>
<figure><figcaption>Frame latency over time, ms (the frames answered in each 100 ms)</figcaption>${latOt ?? (ot ? shortRun : missing("samples over time", "over_time"))}</figure>
<figure><figcaption>Open streams over time</figcaption>${openOt ?? (ot ? shortRun : missing("samples over time", "over_time"))}</figure>
<figure><figcaption>Recoveries by kind (${fmt(recRows.reduce((a, r) => a + r.a, 0))})</figcaption>${barRows(recRows, "recoveries", undefined, `${p.mode}-recoveries`)}</figure>
<figure><figcaption>Faults injected against recovered (streams; ${fmt(faulted.reduce((a, [, n]) => a + n, 0))} of ${fmt(p.streams)} had a fault)</figcaption>${barRows(faultRows, "injected", "recovered", `${p.mode}-faults`)}</figure>
</div>
<h3>Failures</h3>
${failureRows ? `<table><thead><tr><th>failure</th><th class="num">streams</th></tr></thead><tbody>${failureRows}</tbody></table><p>First examples, each with the command that replays it:</p><ol class="examples">${examples}</ol>` : `<p class="good-text">None: every intended message arrived exactly, with no protocol error and a done for every stream.</p>`}
</section>`;
}

function compareSection(r: HtmlReport): string {
  if (!r.strict) return "";
  const p = r.resilient;
  const s = r.strict;
  const row = (label: string, a: string, b: string) => `<tr><td>${esc(label)}</td><td class="num">${a}</td><td class="num">${b}</td></tr>`;
  return `<section aria-labelledby="cmp-h"><h2 id="cmp-h">Without recovery: the same streams in strict mode</h2>
<table><thead><tr><th></th><th class="num">resilient (default)</th><th class="num">strict (reference)</th></tr></thead><tbody>
${row("streams failed", fmt(p.failed_streams), fmt(s.failed_streams))}
${row("streams with a parser error", fmt(p.failures.protocol_error ?? 0), fmt(s.failures.protocol_error ?? 0))}
${row("intended tool calls recovered", `${fmt(p.tool_calls.recovered)} of ${fmt(p.tool_calls.intended)}`, `${fmt(s.tool_calls.recovered)} of ${fmt(s.tool_calls.intended)}`)}
</tbody></table></section>`;
}

/** Option keys whose flag is not the key in kebab case. */
const FLAG_OF: Record<string, string> = { durationSec: "--duration" };

/**
 * A run's settings by their CLI flags (`streamsPerFrame` → `--streams-per-frame`),
 * with lists as comma-separated words (every fault kind: "all") and the
 * token left out. `rename` maps keys with other flags (`url` → `--openai`).
 */
export function flagSettings(settings: Record<string, unknown>, rename: Record<string, string> = {}): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (const [k, v] of Object.entries(settings)) {
    if (v === undefined || k === "token" || k === "progress") continue;
    const flag = rename[k] ?? FLAG_OF[k] ?? `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    out.push([flag, readable(k, v)]);
  }
  return out;
}

function readable(key: string, v: unknown): unknown {
  if (!Array.isArray(v)) return v;
  if (key === "faults") {
    const all = v.length === FAULT_KINDS.length && FAULT_KINDS.every((f) => v.includes(f));
    if (v.length === 0) return "none";
    return all ? `all ${v.length}: ${v.join(", ")}` : v.join(", ");
  }
  return v.join(", ");
}

function dl(entries: [string, unknown][]): string {
  return `<dl>${entries.map(([k, v]) => `<dt>${k.startsWith("--") ? `<code>${esc(k)}</code>` : esc(k)}</dt><dd>${esc(typeof v === "object" && v !== null ? JSON.stringify(v) : v)}</dd>`).join("")}</dl>`;
}

const CSS = `
:root{color-scheme:light dark;--bg:#fff;--fg:#1c2128;--muted:#57606a;--panel:#f6f8fa;--border:#d0d7de;--bar:#5b8def;--ok:#1a7f37;--bad:#cf222e;--line:#0a58ca;--line2:#8250df;--grid:#e5e8eb}
@media (prefers-color-scheme:dark){:root{--bg:#0f1318;--fg:#e6edf3;--muted:#9aa5b1;--panel:#161b22;--border:#30363d;--bar:#6e9cf7;--ok:#56d364;--bad:#ff6b6b;--line:#79b8ff;--line2:#d2a8ff;--grid:#262c34}}
*{box-sizing:border-box}
body{margin:0;padding:1rem 1.4rem 2rem;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:1.4rem 0 .5rem}h3{font-size:1rem}
.sub{color:var(--muted);margin:0 0 .8rem}
.verdict{font-size:.8em;padding:.1rem .5rem;border-radius:99px;border:1px solid currentColor;margin-left:.4rem;vertical-align:middle}
.good,.good-text{color:var(--ok)}.bad{color:var(--bad)}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(9.5rem,1fr));gap:.5rem}
.tile{background:var(--panel);border:1px solid var(--border);border-radius:8px;padding:.5rem .7rem}
.tile-value{font-size:1.25rem;font-weight:650;font-variant-numeric:tabular-nums}.tile-label{color:var(--muted);font-size:.85rem}
.tile.good .tile-value{color:var(--ok)}.tile.bad .tile-value{color:var(--bad)}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,30rem),1fr));gap:1rem;margin-top:1rem}
figure{margin:0;background:var(--panel);border:1px solid var(--border);border-radius:8px;padding:.6rem .8rem}
figure.wide{grid-column:1/-1}
figcaption{font-weight:600;margin-bottom:.3rem}
.chart{width:100%;height:auto;display:block;font-size:11px}.chart.bars{width:auto;max-width:100%}
.chart text{fill:var(--fg)}.chart .tick,.chart .axis-label{fill:var(--muted)}
.chart .grid{stroke:var(--grid);stroke-width:1}
.chart .line{fill:none;stroke:var(--line);stroke-width:2.2}.chart .line2{fill:none;stroke:var(--line2);stroke-width:1.8}.chart .line3{fill:none;stroke:var(--bad);stroke-width:1.4;stroke-dasharray:3 2}
.chart .line-dot{fill:var(--line)}.chart .line2-dot{fill:var(--line2)}.chart .line3-dot{fill:var(--bad)}
.line-sw{background:var(--line)}.line2-sw{background:var(--line2)}.line3-sw{background:var(--bad)}
.chart .avg{stroke:var(--muted);stroke-dasharray:4 4}
.chart .dot{fill:var(--line)}
.chart .bar{fill:var(--bar)}.chart .bar.ok{fill:var(--ok)}
.chart .row-label{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:11px}
.chart .value{font-size:11px;font-variant-numeric:tabular-nums}.chart .missing{fill:var(--muted);font-style:italic}
.legend{margin:.1rem 0 .3rem;color:var(--muted);font-size:.85rem}
.sw{display:inline-block;width:.8rem;height:.8rem;border-radius:2px;vertical-align:-1px;margin-left:.4rem}.bar-sw{background:var(--bar)}.ok-sw{background:var(--ok)}
.missing{color:var(--muted);font-style:italic}
table{border-collapse:collapse;margin:.3rem 0}th,td{border-bottom:1px solid var(--border);padding:.25rem .7rem;text-align:left}.num{text-align:right;font-variant-numeric:tabular-nums}
.examples li{margin-bottom:.5rem}
pre.replay{background:var(--panel);border:1px solid var(--border);border-radius:6px;padding:.4rem .6rem;overflow-x:auto;margin:.3rem 0}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:.3rem 0}dt{color:var(--muted)}dd{margin:0;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px;overflow-wrap:anywhere}
.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,24rem),1fr));gap:1rem}
`;

/** The machine a report was measured on, as rows (with its host name when `withHost` and recorded). */
function machineRows(m: Machine | undefined, withHost: boolean): [string, unknown][] {
  if (!m) return [];
  const rows: [string, unknown][] = [
    ["cpu", m.cpu_model],
    ["cores", m.cpus],
    ["memory", `${m.memory_gb} GiB`],
    ["os", `${m.platform} (${m.arch})`],
    ["node", m.node],
  ];
  if (withHost && m.hostname) rows.push(["host", m.hostname]);
  return rows;
}

/** A report page: its title, the line under it (HTML), its sections (HTML), then the run's settings and machine. */
function page(title: string, sub: string, sections: string, settings: [string, unknown][], machine: [string, unknown][]): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
<header>
<h1>${esc(title)}</h1>
<p class="sub">${sub}</p>
</header>
<main>
${sections}<section class="meta" aria-label="Run settings and machine">
<div><h2>Run settings</h2>${dl(settings)}</div>
<div><h2>Machine</h2>${machine.length ? dl(machine) : `<p class="missing">Not recorded.</p>`}</div>
</section>
</main>
</body>
</html>
`;
}

/** The report as one self-contained HTML page. */
export function renderLoadtestHtml(report: HtmlReport, ctx: HtmlContext = {}): string {
  const when = (ctx.generatedAt ?? new Date()).toISOString();
  const given = ctx.settings ?? {};
  const settings: [string, unknown][] = [
    ["target", report.target],
    ...flagSettings(
      Object.keys(given).length > 0
        ? given
        : { seed: report.seed, faultRate: report.fault_rate, chunking: report.chunking, mode: report.resilient.mode },
    ),
  ];
  const title = `harmony-sidecar load test: ${report.ok ? "passed" : "FAILED"}`;
  return page(
    title,
    `${esc(report.target)} · seed ${esc(report.seed)} · fault rate ${esc(report.fault_rate)} · chunking ${esc(report.chunking)} · written ${esc(when)}`,
    `${passSection(report.resilient, report.resilient.mode === "strict" ? "Strict mode" : "Resilient mode")}
${report.strict ? passSection(report.strict, "Strict mode (comparison)") : ""}
${compareSection(report)}
`,
    settings,
    machineRows(ctx.machine, true),
  );
}

// ------------------------------------------------------------------ loadtest --openai

function latencyFigures(l: LatencySummary, name: string, what: string, id: string): string {
  const hist =
    l.histogram.length > 0 ? bucketChart(l.histogram, `${name} histogram`, `${name}, ms (bucket start)`, what, `${id}-hist`) : null;
  return `<figure><figcaption>${esc(name)} histogram (${fmt(l.count)} ${esc(what)})</figcaption>${hist ?? `<p class="missing">None measured.</p>`}</figure>
<figure><figcaption>${esc(name)} by percentile, ms</figcaption>${l.count > 0 ? percentileCurve(l.percentiles, l.max, `${name} by percentile (ms)`, `${id}-pct`) : `<p class="missing">None measured.</p>`}</figure>`;
}

function targetSection(t: TargetReport, n: number): string {
  const id = `target-${n}`;
  const ok = t.failed_requests === 0 && t.requests > 0;
  const faulted = Object.entries(t.faults_injected)
    .filter(([k]) => k !== "none")
    .sort((a, b) => b[1] - a[1]);
  const faultRows = faulted.map(([k, c]) => ({ label: k, a: c, b: c - (t.faults_failed[k] ?? 0) }));
  const recRows = Object.entries(t.recoveries)
    .sort((a, b) => b[1] - a[1])
    .map(([k, c]) => ({ label: k, a: c }));
  const statusRows = Object.entries(t.status)
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([k, c]) => ({ label: k, a: c }));
  const modeRows = Object.entries(t.by_mode)
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([k, m]) => ({ label: k, a: m.requests, b: m.requests - m.failed }));
  const failureRows = OPENAI_FAILURE_KINDS.filter((k) => t.failures[k])
    .map((k) => `<tr><td>${esc(k)}</td><td class="num">${fmt(t.failures[k]!)}</td></tr>`)
    .join("");
  const examples = t.examples
    .map(
      (e) =>
        `<li><strong>${esc(e.kind)}</strong> (request ${e.index}, ${esc(e.mode)}, fault ${esc(e.fault ?? "not reported")}): ${esc(e.detail.length > 400 ? e.detail.slice(0, 400) + "…" : e.detail)}<pre class="replay"><code>${esc(e.replay)}</code></pre></li>`,
    )
    .join("");
  const calls = t.reports_injections
    ? tile(
        "intended tool calls recovered",
        `${fmt(t.tool_calls.recovered)} / ${fmt(t.tool_calls.intended)}`,
        t.tool_calls.lost === 0 ? "good" : "bad",
      )
    : tile("intended tool calls", "not reported");
  const tput = timeChart([{ name: "requests/s", cls: "line", points: t.throughput.map((x) => ({ t: x.t, v: x.requests_per_second })) }], {
    title: "Requests per second over the run",
    yLabel: "requests/s",
    id: `${id}-throughput`,
    avg: t.requests_per_second,
    avgLabel: `average ${fmt(t.requests_per_second, 1)} requests/s`,
    minMax: 1,
  });
  const ot = t.over_time ?? [];
  const latOt = latencyOverTime(ot, "Request latency over the run", `${id}-latency-time`);
  const openOt = openOverTime(
    ot.map((r) => ({ t: r.t, open: r.in_flight })),
    "Requests in flight over the run",
    "requests in flight",
    `${id}-open-time`,
  );
  const shortRun = `<p class="missing">Too short a run for two samples (one every 500 ms).</p>`;
  return `<section class="pass" id="${id}" aria-labelledby="${id}-h">
<h2 id="${id}-h">${esc(t.target)} <span class="verdict ${ok ? "good" : "bad"}">${ok ? "no failures" : `${fmt(t.failed_requests)} requests failed`}</span></h2>
<div class="tiles">
${tile("requests", fmt(t.requests))}
${tile("answered 200", fmt(t.answered))}
${tile("HTTP 5xx", fmt(t.http_5xx), t.http_5xx === 0 ? "good" : "bad")}
${tile("requests/s", fmt(t.requests_per_second, 1))}
${tile("completion tokens/s", fmt(t.tokens_per_second))}
${pctTile("TTFT p50", t.ttft_ms, 50, 1, "streams")}
${pctTile("TTFT p90", t.ttft_ms, 90, 1, "streams")}
${pctTile("TTFT p99", t.ttft_ms, 99, 1, "streams")}
${pctTile("inter-token p99", t.itl_ms, 99, 2, "gaps")}
${pctTile("request latency p90", t.latency_ms, 90, 1, "requests")}
${tile("request latency max", `${fmt(t.latency_ms.max, 1)} ms`)}
${calls}
${tile("control-token texts", fmt(t.control_tokens.beyond_model), t.control_tokens.beyond_model === 0 ? "good" : "bad")}
${tile("failed requests", fmt(t.failed_requests), t.failed_requests === 0 ? "good" : "bad")}
</div>
<div class="grid">
${latencyFigures(t.ttft_ms, "Time to first token", "streams", `${id}-ttft`)}
${latencyFigures(t.itl_ms, "Inter-token latency", "gaps", `${id}-itl`)}
<figure><figcaption>Request latency by percentile, ms (${fmt(t.latency_ms.count)} requests)</figcaption>${t.latency_ms.count > 0 ? percentileCurve(t.latency_ms.percentiles, t.latency_ms.max, "Request latency by percentile (ms)", `${id}-lat`) : `<p class="missing">None measured.</p>`}</figure>
<figure><figcaption>Requests per second over time</figcaption>${tput ?? `<p class="missing">Average over the run: <strong>${fmt(t.requests_per_second, 1)}</strong> requests/s in ${fmt(t.seconds, 1)} s.</p>`}</figure>
<figure><figcaption>Request latency over time, ms (the requests finished in each 500 ms)</figcaption>${latOt ?? shortRun}</figure>
<figure><figcaption>Requests in flight over time</figcaption>${openOt ?? shortRun}</figure>
<figure><figcaption>Answers by HTTP status</figcaption>${barRows(statusRows, "requests", undefined, `${id}-status`)}</figure>
<figure><figcaption>Requests by API against passed</figcaption>${barRows(modeRows, "requests", "passed", `${id}-modes`)}</figure>
<figure><figcaption>Faults injected against passed (${t.reports_injections ? `${fmt(faulted.reduce((a, [, c]) => a + c, 0))} of ${fmt(t.requests)} requests had one` : "the target does not report them"})</figcaption>${t.reports_injections ? barRows(faultRows, "injected", "passed", `${id}-faults`) : `<p class="missing">Not reported.</p>`}</figure>
<figure><figcaption>Recoveries by kind (the target's /metrics; ${fmt(recRows.reduce((a, r) => a + r.a, 0))})</figcaption>${barRows(recRows, "recoveries", undefined, `${id}-recoveries`)}</figure>
</div>
<h3>Failures</h3>
${failureRows ? `<table><thead><tr><th>failure</th><th class="num">requests</th></tr></thead><tbody>${failureRows}</tbody></table><p>First examples, each with the command that sends it again:</p><ol class="examples">${examples}</ol>` : `<p class="good-text">None: every answer checked out${t.reports_injections ? ", and every intended tool call arrived" : ""}.</p>`}
</section>`;
}

function compareTargets(r: OpenAIReport): string {
  if (r.targets.length < 2) return "";
  const ts = r.targets;
  const row = (label: string, f: (t: TargetReport) => string) =>
    `<tr><td>${esc(label)}</td>${ts.map((t) => `<td class="num">${f(t)}</td>`).join("")}</tr>`;
  return `<section aria-labelledby="cmp-h"><h2 id="cmp-h">Side by side: the same requests</h2>
<table><thead><tr><th></th>${ts.map((t) => `<th class="num">${esc(t.target)}</th>`).join("")}</tr></thead><tbody>
${row("requests failed", (t) => fmt(t.failed_requests))}
${row("HTTP 5xx", (t) => fmt(t.http_5xx))}
${row("intended tool calls recovered", (t) => (t.reports_injections ? `${fmt(t.tool_calls.recovered)} of ${fmt(t.tool_calls.intended)}` : "not reported"))}
${row("calls returned (valid arguments)", (t) => `${fmt(t.tool_calls.returned)} (${fmt(t.tool_calls.valid)})`)}
${row("control-token texts beyond the model's own", (t) => fmt(t.control_tokens.beyond_model))}
${row("TTFT p50 / p99, ms", (t) => `${fmt(t.ttft_ms.p50, 1)} / ${fmt(t.ttft_ms.p99, 1)}`)}
${row("inter-token p50 / p99, ms", (t) => `${fmt(t.itl_ms.p50, 2)} / ${fmt(t.itl_ms.p99, 2)}`)}
${OPENAI_FAILURE_KINDS.filter((k) => ts.some((t) => t.failures[k]))
  .map((k) => row(k, (t) => fmt(t.failures[k] ?? 0)))
  .join("\n")}
</tbody></table></section>`;
}

/** The `loadtest --openai` report as one self-contained HTML page. */
export function renderOpenAIHtml(report: OpenAIReport, ctx: HtmlContext = {}): string {
  const when = (ctx.generatedAt ?? new Date()).toISOString();
  const given = ctx.settings ?? {};
  const settings: [string, unknown][] = flagSettings(
    {
      url: report.targets[0]?.target,
      compare: report.targets[1]?.target,
      requests: report.requests,
      concurrency: report.concurrency,
      apis: report.apis,
      stream: report.stream,
      seed: report.seed,
      runId: report.run_id,
      ...Object.fromEntries(Object.entries(given).filter(([k]) => !["url", "compare", "requests", "runId"].includes(k))),
    },
    { url: "--openai" },
  );
  const title = `harmony-sidecar OpenAI load test: ${report.ok ? "passed" : "FAILED"}`;
  return page(
    title,
    `${esc(report.targets.map((t) => t.target).join(" vs "))} · ${esc(report.requests)} requests at ${esc(report.concurrency)} concurrent · seed ${esc(report.seed)} · written ${esc(when)}`,
    `${compareTargets(report)}
${report.targets.map((t, i) => targetSection(t, i)).join("\n")}
`,
    settings,
    machineRows(ctx.machine, false),
  );
}
