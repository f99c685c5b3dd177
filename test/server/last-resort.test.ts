/**
 * The serve command's last resort (src/server.ts, installLastResort): a
 * rejection nobody handled or an exception nothing caught is logged (at most
 * one line a second, the rest counted in the next) and counted in
 * harmony_uncaught_errors_total, and the process goes on. Here on an event
 * emitter standing for the process, so that the test runner's own handlers
 * are not in the way.
 */
import { EventEmitter } from "node:events";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { installLastResort, LAST_RESORT_LOG_MS } from "../../src/server.js";
import { createMetrics } from "../../src/service/metrics.js";

describe("the last-resort handlers", () => {
  it("log and count what nothing handled, one line per interval, and come off again", async () => {
    const proc = new EventEmitter();
    const metrics = createMetrics();
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "error" }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    let now = 0;
    const remove = installLastResort({ logger, metrics }, proc as unknown as NodeJS.Process, () => now);
    proc.emit("unhandledRejection", new TypeError("r.value is not iterable"));
    proc.emit("unhandledRejection", "a string, not an error");
    proc.emit("uncaughtException", new Error("boom"));
    now += LAST_RESORT_LOG_MS;
    proc.emit("uncaughtException", new Error("again"));
    const text = await metrics.registry.getSingleMetricAsString("harmony_uncaught_errors_total");
    expect(text).toContain('harmony_uncaught_errors_total{kind="rejection"} 2');
    expect(text).toContain('harmony_uncaught_errors_total{kind="exception"} 2');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ kind: "rejection", err: { message: "r.value is not iterable" } });
    expect(lines[1]).toMatchObject({ kind: "exception", err: { message: "again" }, unlogged: 2 });
    remove();
    expect(proc.listenerCount("unhandledRejection") + proc.listenerCount("uncaughtException")).toBe(0);
  });
});
