/** Medians and latency histograms (HDR, microsecond resolution). */
import { build as buildHistogram, type Histogram } from "hdr-histogram-js";

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

export function newHist(): Histogram {
  return buildHistogram({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
}

export interface Lat {
  count: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
  mean_ms: number;
}

export function lat(h: Histogram): Lat {
  const ms = (us: number) => us / 1000;
  return {
    count: h.totalCount,
    p50_ms: ms(h.getValueAtPercentile(50)),
    p90_ms: ms(h.getValueAtPercentile(90)),
    p99_ms: ms(h.getValueAtPercentile(99)),
    p999_ms: ms(h.getValueAtPercentile(99.9)),
    max_ms: ms(h.maxValue),
    mean_ms: ms(h.mean),
  };
}
