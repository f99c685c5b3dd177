/**
 * Latency percentiles for the load tester's reports, from an HDR histogram
 * (3 significant digits) with the exact extremes beside it. An HDR
 * histogram answers a percentile with the top of the bucket the value fell
 * in, which can lie above the largest value recorded (a p99.99 above the
 * max): every percentile is clamped to [min, max].
 * A percentile is only given where the run has the samples for it: p99.9
 * needs 1,000 (one sample in a thousand above it), p99.99 10,000.
 */
import hdr from "hdr-histogram-js";

/** The percentiles a report lists, where the samples allow. */
export const PERCENTILES = [50, 75, 90, 99, 99.9, 99.99] as const;

/** The fewest samples percentile `p` is read from: enough that one sample in (100 − p)% lies above it. */
export function minSamples(p: number): number {
  return Math.ceil(100 / (100 - p) - 1e-9);
}

/** Microseconds in, milliseconds out. */
export class LatencyHistogram {
  private readonly h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });
  count = 0;
  private minUs = Infinity;
  private maxUs = 0;

  record(us: number): void {
    const v = Math.min(3_600_000_000, Math.max(1, Math.round(us)));
    this.h.recordValue(v);
    this.count++;
    if (v < this.minUs) this.minUs = v;
    if (v > this.maxUs) this.maxUs = v;
  }

  reset(): void {
    this.h.reset();
    this.count = 0;
    this.minUs = Infinity;
    this.maxUs = 0;
  }

  /** The smallest and largest values recorded (ms; 0 when none). */
  get min(): number {
    return this.count === 0 ? 0 : this.minUs / 1000;
  }
  get max(): number {
    return this.count === 0 ? 0 : this.maxUs / 1000;
  }

  /** Percentile `p` in ms, within [min, max] (0 when nothing was recorded). */
  at(p: number): number {
    if (this.count === 0) return 0;
    return Math.min(this.maxUs, Math.max(this.minUs, this.h.getValueAtPercentile(p))) / 1000;
  }

  /** The report's percentiles that the samples support, each within [min, max]. */
  percentiles(): { p: number; ms: number }[] {
    return PERCENTILES.filter((p) => this.count >= minSamples(p)).map((p) => ({ p, ms: this.at(p) }));
  }
}
