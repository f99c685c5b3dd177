/**
 * Recovery log lines are bounded: a stream of malformed model output must not
 * become a stream of synchronous log writes on the service's thread (nor fill
 * a disk), while the metrics still count every recovery.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { OpsResult } from "../../src/pool/task.js";
import { DEFAULT_LIMITS, DEFAULTS, RECOVERY_LOG_LINES, Service } from "../../src/service/service.js";

/** A batch's result carrying `n` after_stop recoveries. */
function batch(n: number): OpsResult {
  return {
    bin: null,
    json: null,
    counts: { tokens: 1, events: { recovery: n }, recoveries: { after_stop: n }, errors: {} },
    notes: Array.from({ length: n }, (_, at) => ({
      stream: "s",
      kind: "after_stop",
      at,
      detail: "1 token after the end of the completion; dropped",
    })),
    memos: [],
    sessions: 0,
  };
}

describe("recovery log lines", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("one warn line per batch, at most RECOVERY_LOG_LINES a second; the rest counted in the next line, all in the metrics", async () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const svc = new Service({ ...DEFAULTS, limits: DEFAULT_LIMITS, logger });
    for (let i = 0; i < 30; i++) svc.recordCounts(batch(2), 7);
    expect(lines).toHaveLength(RECOVERY_LOG_LINES);
    expect(lines[0]).toMatchObject({
      msg: "recovered malformed model output",
      conn: 7,
      recoveries: [
        { stream: "s", kind: "after_stop", at: 0 },
        { stream: "s", kind: "after_stop", at: 1 },
      ],
    });
    expect(lines.filter((l) => "unlogged" in l)).toEqual([]);
    // a second later the next batch is logged, with the count of what was left out
    vi.advanceTimersByTime(1000);
    svc.recordCounts(batch(1), 7);
    expect(lines).toHaveLength(RECOVERY_LOG_LINES + 1);
    expect(lines.at(-1)).toMatchObject({ unlogged: 2 * (30 - RECOVERY_LOG_LINES), recoveries: [{ kind: "after_stop" }] });
    const metrics = await svc.metrics.registry.getSingleMetricAsString("harmony_recoveries_total");
    expect(metrics).toContain('harmony_recoveries_total{kind="after_stop"} 61');
  });
});
