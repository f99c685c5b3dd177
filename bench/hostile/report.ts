/**
 * The hostile bench's report (bench/hostile/main.ts): one table per run, and
 * the medians over runs attack by attack.
 */
import { MiB, type Row } from "./common.js";

const mib = (b: number | null) => (b === null ? "gone" : `${(b / MiB).toFixed(0)}`);
const ms = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : "–");
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export function table(rows: Row[]): string {
  const out = [
    "| attack | coded answer | answer bytes | duration ms | /healthz probes (failed) | p50 ms | p99 ms | max ms | service loop delay max ms | RSS before MiB | peak RSS MiB | RSS 2 s after MiB | up |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const r of rows) {
    out.push(
      `| (${r.key}) ${r.name} | ${r.answer.code}${r.answer.note ? ` (${r.answer.note})` : ""} | ${r.answer.bytes.toLocaleString("en")} | ${ms(r.durationMs)} | ${r.probe.probes} (${r.probe.failed}) | ${ms(r.probe.p50)} | ${ms(r.probe.p99)} | ${ms(r.probe.max)} | ${ms(r.loopLagMaxMs)} | ${mib(r.rssBefore)} | ${mib(r.probe.rssPeak)} | ${mib(r.probe.rssEnd)} | ${r.up ? "yes" : "**no**"} |`,
    );
  }
  return out.join("\n");
}

/** Medians over runs, attack by attack; the answers as the set seen across runs. */
export function medianTable(runs: Row[][]): string {
  const out = [
    "| attack | coded answer (all runs) | answer bytes | duration ms | sent × in the window | p50 ms | p99 ms [range] | max ms [range] | service loop delay max ms | RSS before MiB | peak RSS MiB [range] | RSS 2 s after MiB | up (runs) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  const keys = [...new Set(runs.flat().map((r) => r.key))];
  for (const k of keys) {
    const rs = runs.flatMap((run) => run.filter((r) => r.key === k));
    const m = (f: (r: Row) => number) => median(rs.map(f));
    const range = (f: (r: Row) => number, g: (v: number) => string) => {
      const v = rs.map(f);
      return `[${g(Math.min(...v))}–${g(Math.max(...v))}]`;
    };
    const codes = [...new Set(rs.map((r) => r.answer.code))].join(" / ");
    out.push(
      `| (${k}) ${rs[0]!.name} | ${codes} | ${Math.round(m((r) => r.answer.bytes)).toLocaleString("en")} | ${ms(m((r) => r.durationMs))} | ${m((r) => r.repeats)} | ${ms(m((r) => r.probe.p50))} | ${ms(m((r) => r.probe.p99))} ${range((r) => r.probe.p99, ms)} | ${ms(m((r) => r.probe.max))} ${range((r) => r.probe.max, ms)} | ${ms(m((r) => r.loopLagMaxMs))} | ${mib(m((r) => r.rssBefore))} | ${mib(m((r) => r.probe.rssPeak))} ${range((r) => r.probe.rssPeak, mib)} | ${mib(m((r) => r.probe.rssEnd ?? NaN))} | ${rs.filter((r) => r.up).length} of ${rs.length} |`,
    );
  }
  return out.join("\n");
}
