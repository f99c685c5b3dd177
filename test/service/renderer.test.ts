/**
 * Answer checks (src/service/checker.ts, workers/check.ts) run on
 * a thread of their own, off the render thread's queue, with their
 * patterns on a linear-time engine (re2js) and a short deadline: a check
 * past it is unchecked, and a render in flight meanwhile is not failed.
 */
import { afterAll, describe, expect, it } from "vitest";
import { AnswerChecker } from "../../src/service/checker.js";
import { Renderer } from "../../src/service/renderer.js";

// generous: the thread's start is inside the first check's deadline
const checker = new AnswerChecker(10_000);
afterAll(() => checker.close());

describe("answer checks on their own thread", () => {
  it("matches, mismatches and non-JSON, with the reason", async () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    expect(await checker.check(schema, ' {"n": 3}\n')).toEqual({ ok: true });
    expect(await checker.check(schema, '{"n": "3"}')).toEqual({ ok: false, reason: expect.stringMatching(/must be integer/) });
    expect(await checker.check(schema, "three")).toEqual({ ok: false, reason: expect.stringMatching(/not JSON/) });
    expect(await checker.check(schema, "[".repeat(100) + "]".repeat(100))).toEqual({
      ok: false,
      reason: expect.stringMatching(/not JSON/),
    });
  });

  it("a schema with the same $id twice compiles both times; one that cannot compile is a reason, not a crash", async () => {
    const schema = { $id: "https://example.com/s", type: "string" };
    expect(await checker.check(schema, '"a"')).toEqual({ ok: true });
    expect(await checker.check({ ...schema, minLength: 2 }, '"a"')).toEqual({ ok: false, reason: expect.stringMatching(/fewer than 2/) });
    expect(await checker.check({ type: "no-such-type" }, '"a"')).toEqual({ ok: false, reason: expect.stringMatching(/cannot be used/) });
  });

  it("patterns run in linear time: `^(a+)+$` answers at once; ECMAScript syntax and Unicode classes read as ECMAScript does", async () => {
    const evil = { type: "string", pattern: "^(a+)+$" };
    expect(await checker.check(evil, JSON.stringify(`${"a".repeat(40)}b`))).toEqual({
      ok: false,
      reason: expect.stringMatching(/must match pattern/),
    });
    expect(await checker.check(evil, JSON.stringify("a".repeat(100_000)))).toEqual({ ok: true });
    const cases: [string, string, boolean][] = [
      ["^[a-z0-9_-]{1,64}$", "my_name", true],
      ["^\\p{Lu}\\p{Ll}+$", "Émile", true],
      ["^\\u00e9$", "é", true],
      ["^(?<year>\\d{4})-\\d{2}$", "2024-05", true],
      ["^\\d{4}-\\d{2}-\\d{2}$", "2024-5-06", false],
    ];
    for (const [pattern, text, ok] of cases)
      expect((await checker.check({ type: "string", pattern }, JSON.stringify(text))) as { ok: boolean }, pattern).toMatchObject({ ok });
    // a pattern that needs backtracking (a lookahead, a backreference) is not run
    for (const pattern of ["^(?=.*[A-Z]).{8,}$", "^(a)\\1$"])
      expect(await checker.check({ type: "string", pattern }, '"Aaaaaaaaa"'), pattern).toEqual({
        ok: false,
        reason: expect.stringMatching(/schema cannot be used/),
      });
  });

  it("a check past its short deadline is unchecked; a render in flight on the render thread is not failed; the next check runs", async () => {
    const renderer = new Renderer(60_000);
    const quick = new AnswerChecker(300);
    try {
      // uniqueItems over 30,000 distinct objects: Ajv compares them pairwise, far past 300 ms
      const slow = JSON.stringify(Array.from({ length: 30_000 }, (_, i) => ({ i })));
      const rendering = renderer.render({ messages: [{ role: "user", content: "x".repeat(50_000) }] }, []);
      const checked = await quick.check({ type: "array", uniqueItems: true }, slow);
      expect(checked).toEqual({ unchecked: expect.stringMatching(/did not finish within 300 ms/) });
      const r = await rendering;
      expect(r.ok).toBe(true);
      expect(await checker.check({ type: "string" }, '"ok"')).toEqual({ ok: true });
    } finally {
      await quick.close();
      await renderer.close();
    }
  });
});
