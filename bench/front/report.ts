/**
 * One run's figures (a set-up at a pace and a number of streams, one
 * round), their medians over rounds, the ratios against the pass-through
 * in the same run, and the Markdown table.
 */
import { decodeFromCompressedBase64, type Histogram } from "hdr-histogram-js";

export interface Figures {
  setup: string;
  /** engine steps/s (0: flat out) */
  rate: number;
  streams: number;
  round: number;
  tokens: number;
  expectedTokens: number;
  chars: number;
  expectedChars: number | null;
  events: number;
  requests: number;
  errors: string[];
  wallMs: number;
  tokensPerS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  gapP50Ms: number;
  gapP99Ms: number;
  /** CPU µs per token of each process; front: the relay or the sidecar (null for the engine alone) */
  engineUsPerToken: number;
  frontUsPerToken: number | null;
  clientUsPerToken: number;
  /** the front's CPU over the run's wall time, in cores */
  frontCores: number | null;
  /** the front's user and system CPU, read and write system calls and context switches, per token (./procs.ts procCounters) */
  frontPerToken: { userUs: number; sysUs: number; reads: number; writes: number; switches: number } | null;
}

export function histogramOf(encoded: string[]): Histogram {
  const [first, ...rest] = encoded.map((e) => decodeFromCompressedBase64(e));
  for (const h of rest) first!.add(h);
  return first!;
}

export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface Row {
  setup: string;
  rate: number;
  streams: number;
  rounds: number;
  /** every round delivered every token (and, through the fronts, every delta character) */
  complete: boolean;
  errors: number;
  tokensPerS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  gapP50Ms: number;
  gapP99Ms: number;
  engineUsPerToken: number;
  frontUsPerToken: number | null;
  clientUsPerToken: number;
  frontCores: number | null;
  /** against the pass-through at the same pace, streams and round: the median over rounds of each round's ratio */
  vsRelay: { tokensPerS: number; frontUsPerToken: number | null; ttftP99: number; gapP99: number } | null;
}

export function rows(all: Figures[], relay: string): Row[] {
  const keys = [...new Set(all.map((f) => `${f.rate}\u0000${f.streams}\u0000${f.setup}`))];
  const out: Row[] = keys.map((k) => {
    const fs = all.filter((f) => `${f.rate}\u0000${f.streams}\u0000${f.setup}` === k);
    const f0 = fs[0]!;
    const med = (pick: (f: Figures) => number | null) => {
      const xs = fs.map(pick).filter((x): x is number => x !== null);
      return xs.length === 0 ? null : median(xs);
    };
    return {
      setup: f0.setup,
      rate: f0.rate,
      streams: f0.streams,
      rounds: fs.length,
      complete: fs.every((f) => f.tokens === f.expectedTokens && (f.expectedChars === null || f.chars === f.expectedChars)),
      errors: fs.reduce((a, f) => a + f.errors.length, 0),
      tokensPerS: med((f) => f.tokensPerS)!,
      ttftP50Ms: med((f) => f.ttftP50Ms)!,
      ttftP99Ms: med((f) => f.ttftP99Ms)!,
      gapP50Ms: med((f) => f.gapP50Ms)!,
      gapP99Ms: med((f) => f.gapP99Ms)!,
      engineUsPerToken: med((f) => f.engineUsPerToken)!,
      frontUsPerToken: med((f) => f.frontUsPerToken),
      clientUsPerToken: med((f) => f.clientUsPerToken)!,
      frontCores: med((f) => f.frontCores),
      vsRelay: null,
    };
  });
  for (const r of out) {
    const base = out.find((b) => b.setup === relay && b.rate === r.rate && b.streams === r.streams);
    if (!base) continue;
    // each round's figure over the relay's in the same round (alternated, so close in time), then the median over rounds
    const mine = all.filter((f) => f.setup === r.setup && f.rate === r.rate && f.streams === r.streams);
    const perRound = (pick: (f: Figures) => number | null): number | null => {
      const xs: number[] = [];
      for (const f of mine) {
        const b = all.find((x) => x.setup === relay && x.rate === f.rate && x.streams === f.streams && x.round === f.round);
        const num = pick(f);
        const den = b ? pick(b) : null;
        if (num !== null && den !== null && den > 0) xs.push(num / den);
      }
      return xs.length === 0 ? null : median(xs);
    };
    r.vsRelay = {
      tokensPerS: perRound((f) => f.tokensPerS)!,
      frontUsPerToken: perRound((f) => f.frontUsPerToken),
      ttftP99: perRound((f) => f.ttftP99Ms)!,
      gapP99: perRound((f) => f.gapP99Ms)!,
    };
  }
  return out;
}

const n0 = (x: number) => Math.round(x).toLocaleString("en-US");
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const us = (x: number | null) => (x === null ? "–" : x >= 10 ? x.toFixed(0) : x.toFixed(1));
const ratio = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? "–" : `${x.toFixed(2)}×`);

export function markdown(rs: Row[]): string {
  const lines: string[] = [];
  for (const rate of [...new Set(rs.map((r) => r.rate))]) {
    lines.push(`### ${rate > 0 ? `paced at ${rate} engine steps/s` : "flat out"}`, "");
    lines.push(
      "| streams | set-up | tokens/s | ×relay | TTFT p50 / p99 ms | ×relay p99 | gap p50 / p99 ms | ×relay p99 | front CPU µs/token | ×relay | front cores | engine µs/token | client µs/token | all delivered |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    );
    for (const r of rs.filter((x) => x.rate === rate)) {
      const v = r.vsRelay;
      lines.push(
        `| ${r.streams} | ${r.setup} | ${n0(r.tokensPerS)} | ${ratio(v?.tokensPerS)} | ${ms(r.ttftP50Ms)} / ${ms(r.ttftP99Ms)} | ${ratio(v?.ttftP99)} | ${ms(r.gapP50Ms)} / ${ms(r.gapP99Ms)} | ${ratio(v?.gapP99)} | ${us(r.frontUsPerToken)} | ${ratio(v?.frontUsPerToken)} | ${r.frontCores === null ? "–" : r.frontCores.toFixed(2)} | ${us(r.engineUsPerToken)} | ${us(r.clientUsPerToken)} | ${r.complete && r.errors === 0 ? "yes" : `**no** (${r.errors} errors)`} |`,
      );
    }
    lines.push("");
  }
  return lines.join("\n");
}

/**
 * With two or more sidecars: each one's set-ups against the first's (`chat
 * new` over `chat base`), the median over rounds of each round's ratio.
 */
export function versusFirst(all: Figures[], labels: string[]): string {
  if (labels.length < 2) return "";
  const [first, ...rest] = labels;
  const lines = [
    `### against the sidecar ${first}, round by round (medians of the ratios)`,
    "",
    "| pace | streams | set-up | tokens/s | TTFT p99 | gap p99 | front CPU µs/token |",
    "|---|---|---|---|---|---|---|",
  ];
  const keys = [...new Set(all.map((f) => `${f.rate}\u0000${f.streams}`))];
  for (const key of keys) {
    const [rate, streams] = key.split("\u0000").map(Number) as [number, number];
    for (const label of rest)
      for (const kind of ["chat", "responses", "codex", "ws"]) {
        const mine = all.filter((f) => f.setup === `${kind} ${label}` && f.rate === rate && f.streams === streams);
        if (mine.length === 0) continue;
        const ratio = (pick: (f: Figures) => number | null) => {
          const xs: number[] = [];
          for (const f of mine) {
            const b = all.find((x) => x.setup === `${kind} ${first}` && x.rate === rate && x.streams === streams && x.round === f.round);
            const num = pick(f);
            const den = b ? pick(b) : null;
            if (num !== null && den !== null && den > 0) xs.push(num / den);
          }
          return xs.length === 0 ? "–" : `${median(xs).toFixed(2)}×`;
        };
        lines.push(
          `| ${rate > 0 ? `${rate} steps/s` : "flat out"} | ${streams} | ${kind} ${label} | ${ratio((f) => f.tokensPerS)} | ${ratio((f) => f.ttftP99Ms)} | ${ratio((f) => f.gapP99Ms)} | ${ratio((f) => f.frontUsPerToken)} |`,
        );
      }
  }
  lines.push("");
  return lines.join("\n");
}
