/**
 * Real gpt-oss outputs quoted in public bug reports and logs
 * (test/fixtures/realworld/, each case with its source), parsed as a new user
 * would (`parse --input text`, resilient): whole and one token at a time.
 * HARMONY.md §4 rules 8–16 (docs/resilience.md) are what make them safe:
 * - no call nobody meant (rule 11), no control-token text in any delta (rule 9),
 *   no answer after a closing stop (rule 8), headerless text never shown as
 *   the answer before the end (rule 13), for every case;
 * - the intended calls and answer for at least 90% of the unambiguous cases;
 * - each rule of the third batch (13–16, and rule 8 for text that begins with
 *   `<|start|>assistant` or is padded past its stop) on a real case of its own.
 *
 * The text is encoded with the specials allowed, as the quoted text most
 * likely was tokenized; a case that quotes token ids (`tokens`) is parsed from
 * those ids. A case that declares calls is parsed with those tools declared
 * (the OpenAI front passes the request's tools; the quotes do not show them,
 * but the client evidently offered the tools the model meant).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { HarmonyEvent, RecoveryEvent } from "../../src/core/events.js";
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
  /** The ids themselves, when the source gives them (then `text` is their decoding). */
  tokens?: number[];
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
  reasoning: string;
  markerInDelta: string | null;
  afterStopAnswer: boolean;
}

function outcome(events: HarmonyEvent[]): Outcome {
  const calls: Outcome["calls"] = [];
  const byIndex = new Map<number, Outcome["calls"][number]>();
  let answer: string | null = null;
  let reasoning = "";
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
      } else if (e.kind === "reasoning") reasoning += e.text;
    } else if (e.type === "message_end" && (e.stop === "call" || e.stop === "return")) {
      // a later answer would be one the model wrote past a stop the engine should have honoured
      const start = events.find((s) => s.type === "tool_call_start" && s.index === e.index);
      if (e.stop === "call" ? start !== undefined : true) ended = true;
    }
  }
  return { calls, answer, reasoning, markerInDelta, afterStopAnswer };
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
  const ids = c.tokens ?? enc.encode(c.text);
  const out: HarmonyEvent[] = [];
  if (perToken) for (let i = 0; i < ids.length; i++) out.push(...p.write(ids, i, i + 1));
  else out.push(...p.write(ids));
  out.push(...p.end());
  return out;
}

describe("real-world gpt-oss outputs (test/fixtures/realworld/)", () => {
  it("holds at least 60 cases, each with its source; quoted ids are what the text encodes to", () => {
    expect(cases.length).toBeGreaterThanOrEqual(60);
    for (const c of cases) {
      expect(c.source.url, c.id).toMatch(/^https:\/\//);
      expect(c.text, c.id).toContain("<|");
      if (c.tokens !== undefined) expect(enc.encode(c.text), c.id).toEqual(c.tokens);
    }
  });

  for (const [name, perToken] of [
    ["whole", false],
    ["one token at a time", true],
  ] as const) {
    it(`no call nobody meant, no control-token text, no answer after a closing stop, no headerless text as the answer before the end (${name})`, () => {
      for (const c of cases) {
        const events = parse(c, perToken);
        const o = outcome(events);
        // rule 13: a message with no channel streams as reasoning; its answer, if any, only at the very end
        const noChannel = new Set(
          events.flatMap((e) => (e.type === "message_start" && e.channel === null && e.recipient === null ? [e.index] : [])),
        );
        const firstDelta = new Map<number, string>();
        for (const e of events) if (e.type === "delta" && !firstDelta.has(e.index)) firstDelta.set(e.index, e.kind);
        const headerless = new Set([...noChannel].filter((i) => firstDelta.get(i) === "reasoning"));
        const firstAnswerOf = events.findIndex((e) => e.type === "delta" && e.kind === "content" && headerless.has(e.index));
        if (firstAnswerOf >= 0) {
          expect(
            events.slice(firstAnswerOf + 1).some((e) => e.type === "message_start" || e.type === "delta"),
            `${c.id}: headerless text given as the answer before the end`,
          ).toBe(false);
        }
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

  /** The first event of `kind` in a case's events (whole, and one token at a time: the same). */
  const recovery = (id: string, kind: string, perToken = false) => {
    const c = cases.find((k) => k.id === id)!;
    return parse(c, perToken).find((e): e is RecoveryEvent => e.type === "recovery" && e.kind === kind);
  };

  it("rule 13 on real cases: headerless reasoning stays reasoning when a final follows, never joined with it", () => {
    // openai/harmony#80: vLLM's ids for a refusal whose first reasoning has no header
    for (const perToken of [false, true]) {
      const c = cases.find((k) => k.id === "rw-049")!;
      const events = parse(c, perToken);
      const o = outcome(events);
      expect(o.answer).toBe("I’m sorry, but I can’t help with that.");
      expect(o.reasoning).toContain("The user is requesting instructions to break a food truck");
      expect(
        events.filter((e) => e.type === "recovery" && e.kind === "headerless_text").map((e) => (e as { detail: string }).detail),
      ).toEqual([expect.stringContaining("reasoning, until"), expect.stringContaining("it was reasoning")]);
    }
  });

  it("rule 14 on real cases: a recipient glued to prose with no <|message|> is no call; a header cut at the end is no text", () => {
    for (const id of ["rw-051", "rw-053", "rw-054", "rw-055", "rw-056"])
      expect(recovery(id, "header_repaired")?.detail, id).toMatch(/prose, not arguments/);
    // rw-014 ends right after <|channel|> (max_tokens 1), rw-043 inside a garbage header
    for (const id of ["rw-014", "rw-043"]) expect(recovery(id, "truncated_header"), id).toBeDefined();
  });

  it("rule 15 on real cases: channel names read tolerantly", () => {
    expect(recovery("rw-011", "channel_repaired")?.detail).toContain("read as commentary");
    expect(recovery("rw-019", "channel_repaired")?.detail).toContain('"final" read where text was glued to it');
  });

  it("rule 16 on a real case: a line repeated 680 times is cut after the 16th, whole or one token at a time", () => {
    for (const perToken of [false, true]) {
      expect(recovery("rw-057", "repetition", perToken)?.detail).toBe(
        "the same line 679 times in a row: cut after the 16th (663 lines, 1989 tokens, dropped)",
      );
      const o = outcome(
        parse(
          cases.find((k) => k.id === "rw-057")!,
          perToken,
        ),
      );
      expect(o.answer).toBe("TASK COMPLETE\n\n".repeat(16) + "TASK COMPLETE");
    }
  });

  it("rule 8 on real cases: padding after the closing <|return|>, and a call in text that begins with <|start|>assistant", () => {
    expect(recovery("rw-060", "after_stop")?.detail).toBe("255 tokens after the end of the completion; dropped");
    // rw-021 (Roo Code) begins with <|start|>assistant: its call ends the completion
    const c = cases.find((k) => k.id === "rw-021")!;
    expect(c.after_prompt).toBe(false);
    expect(outcome(parse(c, false)).calls.map((k) => k.recipient)).toEqual(["functions.read_file"]);
  });
});
