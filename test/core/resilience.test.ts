/**
 * Resilient mode against faults beyond the shared corpus. Streams are
 * written as Harmony text (special tokens spelled out) and tokenised with
 * the real vocabulary.
 */
import { describe, expect, it } from "vitest";
import { parseCase } from "../../src/core/reference.js";
import type { HarmonyEvent } from "../../src/core/events.js";
import { HarmonyParser, MAX_ARGUMENT_BYTES } from "../../src/core/parser.js";
import { harmony } from "../helpers.js";

const { enc, vocab } = harmony();
const ids = (text: string) => enc.encode(text);
const parse = (text: string, role: string | null = "assistant") => parseCase(vocab, ids(text), { role });
const kinds = (text: string, role: string | null = "assistant") => parse(text, role).recoveries.map((r) => r.kind);

function events(tokens: number[], perToken = false): HarmonyEvent[] {
  const p = new HarmonyParser(vocab, { wholeMessages: true });
  const out: HarmonyEvent[] = [];
  if (perToken) for (const t of tokens) out.push(...p.write([t]));
  else out.push(...p.write(tokens));
  out.push(...p.end());
  return out;
}

const CALL = { role: "assistant", recipient: "functions.get_weather", content: '{"city":"Oslo"}', channel: "commentary" };

describe("header restarts and splices", () => {
  it("keeps the recipient through two abandoned headers in a row", () => {
    const r = parse(
      "<|start|>assistant to=functions.get_weather<|start|>assistant<|start|>assistant<|channel|>commentary<|message|>" +
        '{"city":"Oslo"}<|call|>',
    );
    expect(r.messages).toEqual([CALL]);
  });

  it("splices across junk and a stray stop between the abandoned and the restarted header", () => {
    const r = parse(
      '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|> .<|return|><|start|>assistant<|channel|>commentary<|message|>{"city":"Oslo"}<|call|>',
      null,
    );
    expect(r.messages).toEqual([CALL]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["abandoned_header", "junk_text", "stray_stop", "recipient_spliced"]);
  });

  it("does not splice into a header that names its own recipient, and says so", () => {
    const r = parse(
      "<|start|>assistant to=functions.search<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>" +
        '{"city":"Oslo"}<|call|>',
    );
    expect(r.messages).toEqual([CALL]);
    expect(r.recoveries.map((x) => x.kind)).toContain("unused_recipient");
  });

  it("reports a carried recipient that is never used, with the abandoned header as raw text", () => {
    const evs = events(ids("<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|>"));
    const unused = evs.find((e) => e.type === "recovery" && e.kind === "unused_recipient");
    expect(unused).toMatchObject({ raw: "assistant to=functions.get_weather<|channel|>commentary" });
    expect(evs.at(-1)).toMatchObject({ type: "done", messages: 0 });
  });

  it("treats a bare word after the channel as the content type when splicing", () => {
    const r = parse(
      '<|start|>assistant to=functions.get_weather<|start|>assistant<|channel|>commentary code<|message|>{"city":"Oslo"}<|call|>',
    );
    expect(r.messages).toEqual([{ ...CALL, content_type: "code" }]);
  });
});

describe("headers without <|message|>", () => {
  it("turns a tool header followed by arguments into the tool call", () => {
    const r = parse('<|channel|>commentary to=functions.get_weather {"city":"Oslo"}<|call|>');
    expect(r.messages).toEqual([CALL]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["missing_message"]);
  });

  it("streams headerless text as reasoning as it arrives, and gives it as the answer only at the end (rule 13)", () => {
    const text = "Sure, here is the answer you asked for, in full.";
    const tokens = ids(text);
    const p = new HarmonyParser(vocab);
    const early = tokens.slice(0, 6).flatMap((t) => p.write([t]));
    expect(early.some((e) => e.type === "message_start" && e.channel === null)).toBe(true);
    const kinds = early.filter((e) => e.type === "delta").map((e) => (e as { kind: string }).kind);
    expect(kinds.length).toBeGreaterThan(0);
    expect(new Set(kinds)).toEqual(new Set(["reasoning"]));
    const rest = [...tokens.slice(6).flatMap((t) => p.write([t]))];
    expect(rest.some((e) => e.type === "delta" && e.kind === "content")).toBe(false);
    const last = p.end();
    expect(last.filter((e) => e.type === "delta")).toEqual([{ type: "delta", index: 0, kind: "content", text }]);
    expect(last.find((e) => e.type === "recovery")).toMatchObject({ kind: "headerless_text", detail: expect.stringContaining("answer") });
  });

  it("turns an over-long header into content", () => {
    const word = "x".repeat(400);
    const r = parse(`<|channel|>final${word}<|end|>`);
    expect(r.messages).toHaveLength(1);
    expect(r.messages[0]!.content).toContain(word.slice(0, 100));
  });

  it("a lone word cut at end of input is reported raw, not made a message", () => {
    const evs = events(ids("<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>commentary to"));
    expect(evs.filter((e) => e.type === "message_end")).toHaveLength(1);
    expect(evs.find((e) => e.type === "recovery" && e.kind === "truncated_header")).toMatchObject({
      raw: "assistant<|channel|>commentary to",
    });
  });
});

describe("tokens out of place", () => {
  it("closes a message at <|start|> inside its content (a missing <|end|>)", () => {
    const r = parse("<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>answer<|return|>");
    expect(r.messages).toEqual([
      { role: "assistant", content: "think", channel: "analysis" },
      { role: "assistant", content: "answer", channel: "final" },
    ]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["missing_end"]);
  });

  it("closes a message at <|channel|> inside its content", () => {
    const r = parse("<|channel|>analysis<|message|>think<|channel|>final<|message|>answer<|return|>");
    expect(r.messages.map((m) => [m.channel, m.content])).toEqual([
      ["analysis", "think"],
      ["final", "answer"],
    ]);
  });

  it("drops reserved and invalid ids inside a header", () => {
    const t = ids("<|channel|>final<|message|>hi<|end|>");
    const withJunk = [t[0]!, 200014, 999999, ...t.slice(1)];
    const r = parseCase(vocab, withJunk, { role: "assistant" });
    expect(r.messages).toEqual([{ role: "assistant", content: "hi", channel: "final" }]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["dropped_token", "invalid_token"]);
  });

  it("replaces only the invalid id inside content, even between the halves of an emoji", () => {
    const t = ids("<|channel|>final<|message|>a 🪴 b<|return|>");
    // the plant emoji is split over two tokens; put an invalid id after the first half
    const content = t.slice(3, -1);
    const halves = content.findIndex((id) => (vocab.flags[id]! & 1) === 0);
    expect(halves).toBeGreaterThanOrEqual(0);
    const faulty = [...t.slice(0, 3 + halves + 1), -5, ...t.slice(3 + halves + 1)];
    const r = parseCase(vocab, faulty, { role: "assistant" });
    expect(r.messages).toHaveLength(1);
    expect(r.messages[0]!.content.startsWith("a ")).toBe(true);
    expect(r.messages[0]!.content.endsWith(" b")).toBe(true);
    expect(r.messages[0]!.content).toContain("\uFFFD");
  });

  it("ignores <|constrain|> between messages; <|endoftext|> ends the completion (rule 9)", () => {
    expect(kinds("<|channel|>final<|message|>a<|end|><|constrain|>")).toEqual(["dropped_token"]);
    expect(kinds("<|channel|>final<|message|>a<|end|><|endoftext|><|constrain|>")).toEqual(["after_stop"]);
  });

  it("ends a primed completion at the final answer's <|return|>; later text is after_stop, raw (rule 8)", () => {
    const evs = events(ids("<|channel|>final<|message|>a<|return|>\n"));
    expect(evs.find((e) => e.type === "recovery")).toMatchObject({ kind: "after_stop", raw: "\n" });
  });

  it("treats text after a final answer's stop as junk, delivered raw, when the stream parses on", () => {
    const r = parseCase(vocab, ids("<|channel|>final<|message|>a<|return|>\n"), { role: "assistant", afterStop: "parse" });
    expect(r.recoveries.map((x) => x.kind)).toEqual(["junk_text"]);
  });

  it("never makes text after a finished message content: it is junk, raw (rule 10)", () => {
    const r = parse("<|channel|>analysis<|message|>think<|end|>The answer is 4.<|return|>");
    expect(r.messages).toEqual([{ role: "assistant", content: "think", channel: "analysis" }]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["junk_text", "stray_stop"]);
  });
});

describe("header shapes", () => {
  it.each([
    ["<|channel|>commentary to=functions.get_weather <|constrain|> json<|message|>", "<|constrain|>json"],
    ["<|channel|>commentary to=functions.get_weather<|constrain|>json<|constrain|>json<|message|>", "<|constrain|>json"],
    ["to=functions.get_weather to=functions.get_weather<|channel|>commentary json<|message|>", "json"],
    [" to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>", "<|constrain|>json"],
  ])("recovers the call from %j", (header, type) => {
    const r = parse(`${header}{"city":"Oslo"}<|call|>`);
    expect(r.messages).toEqual([{ ...CALL, content_type: type }]);
  });

  it.each(["json", "code"])(
    "where calls are not allowed, `<|channel|>final %s` is still the answer: a content-type word is no call (rule 11)",
    (word) => {
      // found by loadtest --openai against simulate-engine: a request without tools lost its whole answer
      const r = parseCase(vocab, ids(`<|channel|>final ${word}<|message|>The answer.<|return|>`), { role: "assistant", calls: "none" });
      expect(r.messages).toEqual([{ role: "assistant", content: "The answer.", channel: "final", content_type: word }]);
      expect(r.recoveries.map((x) => x.kind)).toEqual(["header_repaired"]);
    },
  );

  it("does not take prose before the channel for a recipient, and keeps the prose, as reasoning (rule 13)", () => {
    const r = parse("Sure!<|channel|>final<|message|>Here it is.<|return|>");
    expect(r.messages).toEqual([
      { role: "assistant", content: "Sure!", channel: "analysis" },
      { role: "assistant", content: "Here it is.", channel: "final" },
    ]);
    expect(r.messages.some((m) => m.recipient !== undefined)).toBe(false);
  });

  it("streams headerless text without spaces (CJK) as soon as it cannot be a header", () => {
    const tokens = ids("東京の天気は晴れ、最高気温は23℃です。☀️");
    const p = new HarmonyParser(vocab, { wholeMessages: true });
    const early = tokens.slice(0, 4).flatMap((t) => p.write([t]));
    expect(early.some((e) => e.type === "message_start" && e.channel === null)).toBe(true);
    expect(early.some((e) => e.type === "delta" && e.kind === "reasoning")).toBe(true);
    const rest = [...p.write(tokens.slice(4)), ...p.end()];
    expect(rest.find((e) => e.type === "message_end")).toMatchObject({
      message: { content: "東京の天気は晴れ、最高気温は23℃です。☀️", channel: "final" },
    });
  });
});

describe("events", () => {
  it("emits tool_call_start before the first argument delta, with namespace and name", () => {
    const evs = events(ids('<|channel|>commentary to=functions.get_weather json<|message|>{"city":"Oslo"}<|call|>'), true);
    const types = evs.map((e) => e.type);
    expect(types.indexOf("tool_call_start")).toBeLessThan(types.indexOf("delta"));
    expect(evs.find((e) => e.type === "tool_call_start")).toMatchObject({
      call_index: 0,
      id: "call_0",
      namespace: "functions",
      name: "get_weather",
      content_type: "json",
    });
    expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "tool_calls" });
  });

  it("maps channels to delta kinds", () => {
    const evs = events(
      ids(
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary<|message|>b<|end|>" +
          "<|start|>assistant<|channel|>final<|message|>c<|return|>",
      ),
    );
    expect(evs.filter((e) => e.type === "delta").map((e) => (e as { kind: string }).kind)).toEqual(["reasoning", "commentary", "content"]);
    expect(evs.at(-1)).toMatchObject({ type: "done", finish_reason: "stop", messages: 3 });
  });

  it("coalesces the deltas of one write per message", () => {
    const evs = events(ids("<|channel|>final<|message|>one two three four<|return|>"));
    expect(evs.filter((e) => e.type === "delta")).toEqual([{ type: "delta", index: 0, kind: "content", text: "one two three four" }]);
  });

  it("reports length and abort as the finish reason", () => {
    for (const reason of ["length", "abort"] as const) {
      const p = new HarmonyParser(vocab);
      p.write(ids("<|channel|>final<|message|>partial"));
      expect(p.end(reason).at(-1)).toMatchObject({ type: "done", finish_reason: reason });
    }
  });

  it("rejects use after end with an error event, never an exception", () => {
    const p = new HarmonyParser(vocab);
    p.end();
    expect(p.write([1, 2])).toEqual([expect.objectContaining({ type: "error", code: "stream_finished" })]);
    expect(p.end()).toEqual([expect.objectContaining({ type: "error", code: "stream_finished" })]);
  });
});

describe("done.reasoning_tokens", () => {
  const thought = "<|channel|>analysis<|message|>Think about Oslo first.<|end|>";
  const second = "<|start|>assistant<|channel|>analysis<|message|>Then call.<|end|>";
  const call = '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';
  const doneOf = (evs: HarmonyEvent[]) => evs.find((e) => e.type === "done");

  it("counts every analysis message, header to end token, whole or one token at a time", () => {
    const tokens = ids(thought + second + call);
    const expected = ids(thought).length + ids(second).length;
    for (const perToken of [false, true]) expect(doneOf(events(tokens, perToken))).toMatchObject({ reasoning_tokens: expected });
  });

  it("counts an analysis message cut off by the end of the stream, and nothing without one", () => {
    const cut = ids("<|channel|>analysis<|message|>Think about");
    expect(doneOf(events(cut))).toMatchObject({ reasoning_tokens: cut.length });
    expect(doneOf(events(ids("<|channel|>final<|message|>Hi<|return|>")))).toMatchObject({ reasoning_tokens: 0 });
  });

  it("strict mode counts the same way", () => {
    const p = new HarmonyParser(vocab, { mode: "strict" });
    const evs = [...p.write(ids(thought + call)), ...p.end()];
    expect(doneOf(evs)).toMatchObject({ reasoning_tokens: ids(thought).length });
  });
});

describe("a call's arguments past MAX_ARGUMENT_BYTES", () => {
  // a hostile engine can write arguments without end: tool_call_end keeps the first
  // MAX_ARGUMENT_BYTES of UTF-8, cut where a character ends, whichever path takes the tokens
  const head = enc.encode("<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
  const body = enc.encodeOrdinary('{"a":"' + "日本語 text ".repeat(Math.ceil((MAX_ARGUMENT_BYTES + 4096) / 14)));
  const stream = [...head, ...body, enc.encode("<|call|>")[0]!];

  function end(take: boolean, chunk: number): Extract<HarmonyEvent, { type: "tool_call_end" }> {
    const p = new HarmonyParser(vocab, { role: null });
    const out: HarmonyEvent[] = [];
    for (let i = 0; i < stream.length; i += chunk) {
      const j = Math.min(i + chunk, stream.length);
      if (!(take && p.takeText(stream, i, j))) out.push(...p.write(stream, i, j));
      expect(p.argumentBytes).toBeLessThanOrEqual(MAX_ARGUMENT_BYTES + 1);
    }
    out.push(...p.end());
    const ends = out.filter((e) => e.type === "tool_call_end");
    expect(ends).toHaveLength(1);
    return ends[0] as Extract<HarmonyEvent, { type: "tool_call_end" }>;
  }

  it("are cut at a character's end, the same through write() in one go, write() per token and takeText", () => {
    const whole = end(false, stream.length);
    const bytes = Buffer.byteLength(whole.arguments);
    expect(bytes).toBeLessThanOrEqual(MAX_ARGUMENT_BYTES);
    expect(bytes).toBeGreaterThan(MAX_ARGUMENT_BYTES - 16);
    expect(whole.arguments).not.toContain("\uFFFD");
    expect(whole.arguments.startsWith('{"a":"日本語 text ')).toBe(true);
    expect(whole.valid_json).toBe(false);
    for (const [take, chunk] of [
      [false, 1],
      [true, 1],
      [true, 7],
    ] as const) {
      const e = end(take, chunk);
      expect(e.valid_json).toBe(false);
      // token by token the cut falls at a token's end: a prefix of the one-write text, or it
      expect(whole.arguments.startsWith(e.arguments) || e.arguments.startsWith(whole.arguments)).toBe(true);
      expect(Buffer.byteLength(e.arguments)).toBeGreaterThan(MAX_ARGUMENT_BYTES - 16);
      expect(Buffer.byteLength(e.arguments)).toBeLessThanOrEqual(MAX_ARGUMENT_BYTES);
    }
  });
});

describe("rules 13–16 (docs/resilience.md)", () => {
  it("rule 13: text before a call is reasoning, and text that ends the completion alone is the answer", () => {
    const before = parse(
      'Checking the weather first.<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{"city":"Oslo"}<|call|>',
    );
    expect(before.messages).toEqual([{ role: "assistant", content: "Checking the weather first.", channel: "analysis" }, CALL]);
    const alone = parse("I'm sorry, but I can't help with that.<|return|>");
    expect(alone.messages).toEqual([{ role: "assistant", content: "I'm sorry, but I can't help with that.", channel: "final" }]);
    // after a final answer, text with no header is never a second answer
    const after = parse("<|channel|>final<|message|>Hi.<|end|><|start|>More text here.<|end|>");
    expect(after.messages.map((m) => m.channel)).toEqual(["final", "analysis"]);
  });

  it("rule 14: a header closed by <|end|> where <|message|> belongs is a header when text follows", () => {
    expect(parse("<|channel|>final<|end|>The answer is 4.<|return|>").messages).toEqual([
      { role: "assistant", content: "The answer is 4.", channel: "final" },
    ]);
    // white space and punctuation wait for the text; a call's arguments are text too
    expect(parse("<|channel|>final<|end|>\n\n**4**<|return|>").messages).toEqual([
      { role: "assistant", content: "\n\n**4**", channel: "final" },
    ]);
    expect(parse('<|channel|>commentary to=functions.get_weather<|end|>{"city":"Oslo"}<|call|>').messages).toEqual([CALL]);
    // followed by a new header, it was abandoned (and its recipient is spliced, rule 3)
    const r = parse(
      '<|channel|>commentary to=functions.get_weather<|end|><|start|>assistant<|channel|>commentary<|message|>{"city":"Oslo"}<|call|>',
    );
    expect(r.messages).toEqual([CALL]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["abandoned_header", "recipient_spliced"]);
    expect(kinds("<|channel|>final<|end|><|message|>Hi<|return|>")).toEqual(["stray_stop"]);
  });

  it("rule 14: a recipient glued to prose is no call; arguments glued to a recipient are; a cut marker is no text", () => {
    const prose = parse("<|channel|>commentary to=functions.search I will look it up.<|end|>");
    expect(prose.messages).toEqual([{ role: "assistant", content: "I will look it up.", channel: "commentary" }]);
    expect(parse('<|channel|>commentary to=functions.get_weather{"city":"Oslo"}<|call|>').messages).toEqual([CALL]);
    // a prompt that ended in `<|channel|>commentary to`: the channel was the prompt's
    expect(parse('=functions.get_weather <|constrain|>json{"city":"Oslo"}<|call|>').messages).toEqual([
      { role: "assistant", recipient: "functions.get_weather", content: '{"city":"Oslo"}', content_type: "<|constrain|>json" },
    ]);
    const cut = events(ids("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|ch"));
    expect(cut.filter((e) => e.type === "delta").map((e) => (e as { text: string }).text)).toEqual(["Think."]);
    expect(cut.find((e) => e.type === "recovery")).toMatchObject({ kind: "truncated_header", raw: "assistant<|ch" });
  });

  it("rule 15: a declared tool's name where the channel belongs is a call to it", () => {
    const r = parseCase(vocab, ids('<|channel|>final_answer<|message|>{"answer":"4"}<|call|>'), {
      role: "assistant",
      tools: ["final_answer"],
    });
    expect(r.messages).toEqual([
      { role: "assistant", recipient: "functions.final_answer", content: '{"answer":"4"}', channel: "commentary" },
    ]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["channel_repaired"]);
    // without the tool declared, it is the final channel
    expect(parse('<|channel|>final_answer<|message|>{"answer":"4"}<|return|>').messages).toEqual([
      { role: "assistant", content: '{"answer":"4"}', channel: "final" },
    ]);
  });

  it("rule 10: the role word glued before <|channel|> in content starts the next header, not the content", () => {
    const r = parse("<|channel|>commentary<|message|>Reading it now.assistant<|channel|>final<|message|>Done.<|return|>", "assistant");
    // (".assistant" is tokenized with the dot; a quote mark before it leaves `assistant` a token of its own)
    const q = parse('<|channel|>commentary<|message|>Reading "it"assistant<|channel|>final<|message|>Done.<|return|>');
    expect(q.messages).toEqual([
      { role: "assistant", content: 'Reading "it"', channel: "commentary" },
      { role: "assistant", content: "Done.", channel: "final" },
    ]);
    expect(r.messages.at(-1)).toEqual({ role: "assistant", content: "Done.", channel: "final" });
  });

  it("rule 8: text that begins with <|start|>assistant is a completion: it ends at its call", () => {
    const text =
      '<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{"city":"Oslo"}<|call|>' +
      '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"t":4}<|end|><|start|>assistant<|channel|>final<|message|>4 degrees.<|return|>';
    const r = parse(text, null);
    expect(r.messages).toEqual([CALL]);
    expect(r.recoveries.map((x) => x.kind)).toEqual(["after_stop"]);
    // a conversation (another author first) parses on
    expect(parse(`<|start|>user<|message|>Weather?<|end|>${text}`, null).messages).toHaveLength(4);
  });
});
