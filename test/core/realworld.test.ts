/**
 * Real gpt-oss outputs quoted in public bug reports (test/fixtures/realworld/,
 * each case with its source), parsed as a new user would (`parse --input
 * text`, resilient): whole and one token at a time. HARMONY.md §4 rules 8–12
 * are what make them safe:
 * - no call nobody meant (rule 11), no control-token text in any delta (rule 9),
 *   no answer after a closing stop (rule 8), for every case;
 * - the intended calls and answer for at least 90% of the unambiguous cases.
 *
 * The text is encoded with the specials allowed, as the quoted text most
 * likely was tokenized. A case that declares calls is parsed with those tools
 * declared (the OpenAI front passes the request's tools; the quotes do not
 * show them, but the client evidently offered the tools the model meant).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { HarmonyEvent } from "../../src/core/events.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { FIXTURES, harmony } from "../helpers.js";

interface Call {
  recipient: string;
  name: string;
  arguments: string;
}

interface RealCase {
  id: string;
  source: { url: string };
  engine: string;
  after_prompt: boolean;
  text: string;
  expected: { calls: Call[]; answer: string | null; after_stop: boolean };
  ambiguous: boolean;
  note: string;
}

const cases: RealCase[] = readFileSync(`${FIXTURES}realworld/cases.jsonl`, "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l) as RealCase);

const { enc, vocab } = harmony();
const MARKER = /<\|[a-z_0-9]+\|>/;

/** What a client takes from the events: calls (with their whole arguments), the answer, and what went wrong. */
interface Outcome {
  calls: { recipient: string; raw: string; arguments: string | null }[];
  answer: string | null;
  markerInDelta: string | null;
  afterStopAnswer: boolean;
}

function outcome(events: HarmonyEvent[]): Outcome {
  const calls: Outcome["calls"] = [];
  const byIndex = new Map<number, Outcome["calls"][number]>();
  let answer: string | null = null;
  let markerInDelta: string | null = null;
  let ended = false;
  let afterStopAnswer = false;
  for (const e of events) {
    if (e.type === "tool_call_start") {
      const c = { recipient: e.recipient, raw: "", arguments: null };
      calls.push(c);
      byIndex.set(e.index, c);
    } else if (e.type === "tool_call_end") {
      const c = byIndex.get(e.index);
      if (c) c.arguments = e.arguments;
    } else if (e.type === "delta") {
      if (MARKER.test(e.text)) markerInDelta = e.text;
      if (e.kind === "tool_args") {
        const c = byIndex.get(e.index);
        if (c) c.raw += e.text;
      } else if (e.kind === "content") {
        answer = (answer ?? "") + e.text;
        if (ended) afterStopAnswer = true;
      }
    } else if (e.type === "message_end" && (e.stop === "call" || e.stop === "return")) {
      // a later answer would be one the model wrote past a stop the engine should have honoured
      const start = events.find((s) => s.type === "tool_call_start" && s.index === e.index);
      if (e.stop === "call" ? start !== undefined : true) ended = true;
    }
  }
  return { calls, answer, markerInDelta, afterStopAnswer };
}

const bare = (recipient: string) => recipient.replace(/^functions\./, "");

function sameJson(a: string, b: string): boolean {
  try {
    return JSON.stringify(JSON.parse(a)) === JSON.stringify(JSON.parse(b));
  } catch {
    return false;
  }
}

/** Whether the outcome is what the case says the model meant. */
function asIntended(c: RealCase, o: Outcome): boolean {
  const want = c.expected;
  if (o.calls.length !== want.calls.length) return false;
  for (const [i, w] of want.calls.entries()) {
    const got = o.calls[i]!;
    if (bare(got.recipient) !== bare(w.recipient)) return false;
    const args = got.arguments ?? got.raw;
    if (got.raw !== w.arguments && args !== w.arguments && !sameJson(args, w.arguments)) return false;
  }
  return (o.answer ?? null) === want.answer || (o.answer !== null && want.answer !== null && o.answer.trim() === want.answer.trim());
}

function parse(c: RealCase, perToken: boolean): HarmonyEvent[] {
  const tools = c.expected.calls.map((k) => bare(k.recipient)).filter((n) => !n.includes("."));
  const p = new HarmonyParser(vocab, { role: c.after_prompt ? "assistant" : null, tools: tools.length > 0 ? tools : null });
  const ids = enc.encode(c.text);
  const out: HarmonyEvent[] = [];
  if (perToken) for (let i = 0; i < ids.length; i++) out.push(...p.write(ids, i, i + 1));
  else out.push(...p.write(ids));
  out.push(...p.end());
  return out;
}

describe("real-world gpt-oss outputs (test/fixtures/realworld/)", () => {
  it("holds at least 40 cases, each with its source", () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    for (const c of cases) {
      expect(c.source.url, c.id).toMatch(/^https:\/\//);
      expect(c.text, c.id).toContain("<|");
    }
  });

  for (const [name, perToken] of [
    ["whole", false],
    ["one token at a time", true],
  ] as const) {
    it(`no call nobody meant, no control-token text, no answer after a closing stop (${name})`, () => {
      for (const c of cases) {
        const events = parse(c, perToken);
        const o = outcome(events);
        expect(o.markerInDelta, `${c.id}: a delta carries control-token text`).toBeNull();
        expect(o.afterStopAnswer, `${c.id}: an answer after a closing stop`).toBe(false);
        const meant = new Set(c.expected.calls.map((k) => bare(k.recipient)));
        for (const call of o.calls) {
          // an ambiguous case may resolve either way; a call must still be one of the calls it could mean
          if (!c.ambiguous || meant.size > 0)
            expect(meant.has(bare(call.recipient)), `${c.id}: a call to ${call.recipient} nobody meant`).toBe(true);
        }
        expect(events.at(-1)?.type, c.id).toBe("done");
      }
    });

    it(`at least 90% of the unambiguous cases come out exactly as intended (${name})`, () => {
      const clear = cases.filter((c) => !c.ambiguous);
      const missed = clear.filter((c) => !asIntended(c, outcome(parse(c, perToken)))).map((c) => c.id);
      const score = (clear.length - missed.length) / clear.length;
      expect(score, `missed: ${missed.join(", ")}`).toBeGreaterThanOrEqual(0.9);
    });
  }
});
