/**
 * Garbage collections: this process's (the client's) pauses, observed all
 * along, and the service's, read from its `--trace-gc-nvp` lines; both as
 * time spans to find the slow frames they overlapped.
 */
import { PerformanceObserver } from "node:perf_hooks";

/** GC pauses of this (the client) process, ms, for the report. */
export const clientGc: { at: number; ms: number; kind: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    clientGc.push({ at: e.startTime, ms: e.duration, kind: (e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0 });
}).observe({ entryTypes: ["gc"] });

/** One GC of the service, from a `--trace-gc-nvp` line; `at` is when the line arrived (just after the pause). */
export interface GcEvent {
  at: number;
  kind: "s" | "mc";
  pause: number;
  survived: number;
  promoted: number;
}

/** The service's scavenges and mark-compacts whose lines arrived in [from, to]. */
export function gcEvents(lines: { at: number; line: string }[], from: number, to: number): GcEvent[] {
  const field = (line: string, name: string) => {
    const m = new RegExp(`(?:^|\\s)${name}=([0-9.]+)`).exec(line);
    return m ? Number(m[1]) : NaN;
  };
  const out: GcEvent[] = [];
  for (const { at, line } of lines) {
    if (at < from || at > to) continue;
    const kind = /(?:^|\s)gc=(s|mc)(?:\s|$)/.exec(line)?.[1] as GcEvent["kind"] | undefined;
    if (kind)
      out.push({ at, kind, pause: field(line, "pause"), survived: field(line, "new_space_survived"), promoted: field(line, "promoted") });
  }
  return out;
}

/** The service's GCs while (d) ran (none without --trace-gc-nvp). */
export interface GcSummary {
  scavenges: number;
  scavenge_pause_ms: { p50: number; max: number };
  /** Mean bytes alive (copied) and promoted per scavenge. */
  survived_kb: number;
  promoted_kb: number;
  mark_compacts: number;
  mark_compact_pause_ms: { p50: number; max: number };
}

export function summariseGc(events: GcEvent[]): GcSummary | undefined {
  const sc = events.filter((e) => e.kind === "s");
  const mc = events.filter((e) => e.kind === "mc").map((e) => e.pause);
  if (events.length === 0) return undefined;
  const p50 = (xs: number[]) => (xs.length === 0 ? 0 : [...xs].sort((x, y) => x - y)[xs.length >> 1]!);
  const max = (xs: number[]) => (xs.length === 0 ? 0 : Math.max(...xs));
  const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((x, y) => x + y, 0) / xs.length);
  return {
    scavenges: sc.length,
    scavenge_pause_ms: { p50: p50(sc.map((x) => x.pause)), max: max(sc.map((x) => x.pause)) },
    survived_kb: mean(sc.map((x) => x.survived)) / 1024,
    promoted_kb: mean(sc.map((x) => x.promoted)) / 1024,
    mark_compacts: mc.length,
    mark_compact_pause_ms: { p50: p50(mc), max: max(mc) },
  };
}

/** A time span on this process's performance.now() clock, ms. */
export interface Span {
  a: number;
  b: number;
}

/** This process's GC pauses as spans. */
export function clientGcSpans(): Span[] {
  return clientGc.map((g) => ({ a: g.at, b: g.at + g.ms }));
}

/** The service's GC pauses as spans: a --trace-gc-nvp line arrives just after its pause. */
export function serviceGcSpans(events: GcEvent[]): Span[] {
  return events.map((g) => ({ a: g.at - g.pause - 0.5, b: g.at }));
}
