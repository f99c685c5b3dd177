/**
 * The render thread's answer checks (src/service/renderer.ts,
 * src/service/render-worker.ts): a response format's schema is untrusted
 * input, so it is compiled and run there, under the deadline.
 */
import { afterAll, describe, expect, it } from "vitest";
import { Renderer } from "../../src/service/renderer.js";

const renderer = new Renderer(1500);
afterAll(() => renderer.close());

describe("answer checks on the render thread", () => {
  it("matches, mismatches and non-JSON, with the reason", async () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    expect(await renderer.check(schema, ' {"n": 3}\n')).toEqual({ ok: true });
    expect(await renderer.check(schema, '{"n": "3"}')).toEqual({ ok: false, reason: expect.stringMatching(/must be integer/) });
    expect(await renderer.check(schema, "three")).toEqual({ ok: false, reason: expect.stringMatching(/not JSON/) });
    expect(await renderer.check(schema, "[".repeat(100) + "]".repeat(100))).toEqual({
      ok: false,
      reason: expect.stringMatching(/not JSON/),
    });
  });

  it("a schema with the same $id twice compiles both times; one that cannot compile is a reason, not a crash", async () => {
    const schema = { $id: "https://example.com/s", type: "string" };
    expect(await renderer.check(schema, '"a"')).toEqual({ ok: true });
    expect(await renderer.check({ ...schema, minLength: 2 }, '"a"')).toEqual({ ok: false, reason: expect.stringMatching(/fewer than 2/) });
    expect(await renderer.check({ type: "no-such-type" }, '"a"')).toEqual({ ok: false, reason: expect.stringMatching(/cannot be used/) });
  });

  it("a pattern that backtracks for ever is stopped at the deadline, and the next check runs on a fresh thread", async () => {
    const evil = { type: "string", pattern: "^(a+)+$" };
    const t0 = performance.now();
    expect(await renderer.check(evil, JSON.stringify(`${"a".repeat(40)}b`))).toBeNull();
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(await renderer.check({ type: "string" }, '"ok"')).toEqual({ ok: true });
  });
});
