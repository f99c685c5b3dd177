/** The load tester: generator, checker, and short runs against a real server. */
import { describe, expect, it } from "vitest";
import type { HarmonyEvent } from "../../src/core/events.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { check, observe } from "../../src/loadtest/check.js";
import { FAULT_KINDS, generateStream } from "../../src/loadtest/generate.js";
import { loadtest } from "../../src/commands/loadtest.js";
import { formatReport, type LoadtestOptions } from "../../src/loadtest/run.js";
import { harmony, loadtestOptions } from "../helpers.js";

const { enc, vocab } = harmony();

const base: LoadtestOptions = loadtestOptions({ streams: 400, faultRate: 1 });

describe("generator", () => {
  it("is deterministic per (seed, index)", () => {
    const a = generateStream(42, { seed: 3, faultRate: 0.5, faults: FAULT_KINDS }, enc, vocab);
    const b = generateStream(42, { seed: 3, faultRate: 0.5, faults: FAULT_KINDS }, enc, vocab);
    expect(b).toEqual(a);
  });

  it("can inject every fault kind, and resilient mode recovers each in process", () => {
    const seen = new Set<string>();
    for (let i = 0; seen.size < FAULT_KINDS.length && i < 5000; i++) {
      const s = generateStream(i, { seed: 11, faultRate: 1, faults: FAULT_KINDS }, enc, vocab);
      if (s.fault) seen.add(s.fault);
      const p = new HarmonyParser(vocab);
      const r = check(s.intended, observe([...p.write(s.tokens), ...p.end()]));
      expect(r.failures, `stream ${i} (${s.fault}): ${JSON.stringify(r.failures)}`).toEqual([]);
    }
    expect([...seen].sort()).toEqual([...FAULT_KINDS].sort());
  });
});

describe("checker", () => {
  const s = generateStream(5, { seed: 1, faultRate: 0, faults: [] }, enc, vocab);
  const events = (() => {
    const p = new HarmonyParser(vocab);
    return [...p.write(s.tokens), ...p.end()];
  })();

  it("passes the parser's own events", () => {
    expect(check(s.intended, observe(events)).failures).toEqual([]);
  });

  it("catches a lost delta, a missing done and a protocol error", () => {
    const firstDelta = events.findIndex((e) => e.type === "delta");
    const tampered = events.filter((_, i) => i !== firstDelta && i !== events.length - 1);
    tampered.push({ type: "error", code: "unexpected_token", message: "x", at: 0, token: 1 } as HarmonyEvent);
    const kinds = check(s.intended, observe(tampered)).failures.map((f) => f.kind);
    expect(kinds).toContain("missing_done");
    expect(kinds).toContain("protocol_error");
    expect(kinds.some((k) => k === "reasoning_lost" || k === "message_mismatch")).toBe(true);
  });
});

describe("runs against a real server", () => {
  it("every fault kind, zero loss (resilient)", async () => {
    const r = await loadtest(base, enc, vocab);
    expect(r.resilient.streams).toBe(400);
    expect(r.resilient.failed_streams, formatReport(r)).toBe(0);
    expect(r.resilient.tool_calls.recovered).toBe(r.resilient.tool_calls.intended);
    expect(Object.keys(r.resilient.faults_injected).length).toBeGreaterThan(10);
    expect(r.ok).toBe(true);
  });

  it("every fault kind, zero loss with streams named by handle, one token per op", async () => {
    const r = await loadtest({ ...base, streams: 200, handles: true, chunking: "one" }, enc, vocab);
    expect(r.resilient.failed_streams, formatReport(r)).toBe(0);
    expect(r.resilient.tool_calls.recovered).toBe(r.resilient.tool_calls.intended);
    expect(r.ok).toBe(true);
  });

  it("fails when recovery is switched off: strict mode loses faulted streams, and says how to replay them", async () => {
    const r = await loadtest({ ...base, streams: 150, mode: "strict" }, enc, vocab);
    expect(r.ok).toBe(false);
    expect(r.resilient.failed_streams).toBeGreaterThan(0);
    expect(r.resilient.failures.protocol_error).toBeGreaterThan(0);
    expect(r.resilient.examples[0]!.replay).toMatch(/--seed 7 --only \d+/);
    expect(formatReport(r)).toContain("First examples:");
  });

  it("--compare-strict reports the same streams without recovery", async () => {
    const r = await loadtest({ ...base, streams: 150, faultRate: 0.5, compareStrict: true, chunking: "one" }, enc, vocab);
    expect(r.ok).toBe(true);
    expect(r.strict!.streams).toBe(150);
    expect(r.strict!.failed_streams).toBeGreaterThan(0);
    expect(formatReport(r)).toContain("strict (reference)");
  });
});
