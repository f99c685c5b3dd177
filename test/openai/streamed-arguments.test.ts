/**
 * StreamedArguments (src/openai/streamed-arguments.ts): what a client
 * assembles from a call's argument deltas equals the call's tool_call_end
 * arguments — the repair of rule 12 (src/core/arguments.ts) where a known
 * broken shape applies — whatever the deltas' sizes; nothing sent is ever
 * taken back (each prefix sent is a prefix of the whole), and well-formed
 * arguments are not held beyond whitespace.
 *
 * The arguments are checked with checkArguments, the function the parser's
 * tool_call_end uses; the shapes are those of real gpt-oss outputs
 * (test/fixtures/realworld/) and of the load tester's rule-12 faults
 * (src/loadtest/generate.ts: args_over_escaped, args_fenced, args_trailing_junk).
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { checkArguments } from "../../src/core/arguments.js";
import { MAX_ARGUMENT_BYTES } from "../../src/core/parser.js";
import { MAX_STREAMED_ARGUMENT_CHARS, StreamedArguments } from "../../src/openai/streamed-arguments.js";
import { fcParams, mutatedJson, parsesAsJson } from "../helpers.js";

const CONSTRAIN = "<|constrain|>json";

/** The pieces sent for `text` cut at `cuts` (sorted offsets), each checked to extend what was sent before. */
function stream(text: string, cuts: number[], whole: string | null): { sent: string; pieces: string[] } {
  const g = new StreamedArguments();
  const pieces: string[] = [];
  let sent = "";
  let received = "";
  let at = 0;
  for (const cut of [...cuts, text.length]) {
    if (cut < at) continue;
    const piece = text.slice(at, cut);
    at = cut;
    received += piece;
    const out = g.push(piece);
    sent += out;
    if (out !== "") pieces.push(out);
    // only what was received is sent
    expect(received.startsWith(sent)).toBe(true);
    if (whole !== null) expect(whole.startsWith(sent), `${JSON.stringify(sent)} is not a prefix of ${JSON.stringify(whole)}`).toBe(true);
  }
  const rest = whole === null ? g.flush() : g.end(whole);
  if (rest !== "") pieces.push(rest);
  sent += rest;
  expect(g.diverged).toBe(false);
  expect(g.settled).toBe(true);
  expect(g.push("more")).toBe(""); // settled: nothing more
  return { sent, pieces };
}

/** Every cut into pieces of `size` characters. */
const bySize = (text: string, size: number) => Array.from({ length: Math.ceil(text.length / size) }, (_, i) => i * size);

/** The arguments and what tool_call_end carries for them (ended by a stop token, or by the end of the stream). */
function whole(text: string, atEnd: boolean, contentType: string | null = CONSTRAIN) {
  return checkArguments(text, contentType, atEnd);
}

// (label, generated arguments, repair expected or null, at the end of the stream)
const SHAPES: [string, string, string | null, boolean][] = [
  ["JSON, compact", '{"location":"Kraków"}', null, false],
  ["JSON, indented", '{\n  "location": "Zürich",\n  "unit": "fahrenheit"\n}', null, false],
  ["JSON, every kind of value", '{"a":[1,-0.5e+3,0,true,false,null,"x\\n\\u00e9 \\"q\\""],"b":{}, "c":[]}', null, false],
  ["JSON, trailing whitespace", '{"a":1}  \n', null, false],
  ["JSON, a scalar", '"just text"', null, false],
  ["over-escaped (rw-018)", '{\\"url\\":\\"https://example.com\\"}', '{"url":"https://example.com"}', false],
  ["over-escaped (issue #36, request 595)", '{\\"location\\":\\"Kraków\\"}', '{"location":"Kraków"}', false],
  ["code fence", '```json\n{"location":"Kraków"}\n```', '{"location":"Kraków"}', false],
  ["code fence, indented JSON", '```json\n{\n  "a": 1\n}\n```', '{\n  "a": 1\n}', false],
  ["json word", 'json{"location":"Kraków"}', '{"location":"Kraków"}', false],
  ["json word and a space", 'json {"a": [1, 2]}', '{"a": [1, 2]}', false],
  ["trailing brace", '{"location":"Kraków"}}', '{"location":"Kraków"}', false],
  ["trailing space and brace", '{"location":"Kraków"} }', '{"location":"Kraków"}', false],
  ["trailing newline and brace", '{\n  "a": 1\n}\n}', '{\n  "a": 1\n}', false],
  ["trailing word", '{"location":"Kraków"} commentary', '{"location":"Kraków"}', false],
  ["a second object after the first", '{"a":1}{"b":2}', '{"a":1}', false],
  ["closers missing at the end of the stream", '{"a":{"b":[1,2', '{"a":{"b":[1,2]}}', true],
  ["closers missing, whitespace after", '{"a":{"b":1 \n', '{"a":{"b":1}}', true],
  // nothing repairs these: the text as generated, all of it
  ["cut short, not at the end", '{"a":{"b":[1,2', null, false],
  ["a dangling comma", '{"a":1,', null, true],
  ["a raw newline in a string", '{"a":"x\ny"}', null, false],
  ["prose", "I will call the tool now.", null, false],
  ["python", "print(sum(range(10)))", null, false],
  ["leading whitespace, JSON", '  {"a":1}', null, false],
  ["leading whitespace, trailing word", ' {"a":1} ok', '{"a":1}', false],
  ["leading whitespace, over-escaped", ' {\\"a\\":1}', '{"a":1}', false],
  ["over-escaped with a space", '{ \\"a\\": 1}', null, false],
  ["empty", "", null, false],
];

describe("StreamedArguments", () => {
  for (const [label, text, repaired, atEnd] of SHAPES) {
    test(`${label}: the deltas add up to tool_call_end's arguments, in pieces of every size`, () => {
      const w = whole(text, atEnd);
      expect(w.arguments).toBe(repaired ?? text); // the case is what it says
      for (let size = 1; size <= Math.max(1, text.length); size++) {
        expect(stream(text, bySize(text, size), w.arguments).sent).toBe(w.arguments);
        // cut short (no tool_call_end): the text as generated
        expect(stream(text, bySize(text, size), null).sent).toBe(text);
      }
      if (w.validJson) expect(parsesAsJson(w.arguments)).toBe(true);
    });
  }

  test("well-formed JSON streams as generated: only whitespace between tokens waits, for the next character", () => {
    const g = new StreamedArguments();
    expect(g.push('{"location"')).toBe('{"location"');
    expect(g.push(": ")).toBe(":"); // the space waits
    expect(g.push('"Zü')).toBe(' "Zü');
    expect(g.push("rich  ")).toBe("rich  "); // inside a string: sent
    expect(g.push('", "n": 12')).toBe('", "n": 12');
    expect(g.push(".5}")).toBe(".5}");
    expect(g.push("\n")).toBe("");
    expect(g.end('{"location": "Zürich  ", "n": 12.5}\n')).toBe("\n");
  });

  test("a broken shape is held from where it stops being JSON, and its repair sent in one delta", () => {
    const over = new StreamedArguments();
    expect(over.push('{\\"location')).toBe("{");
    expect(over.push('\\":\\"Kraków\\"}')).toBe("");
    expect(over.end('{"location":"Kraków"}')).toBe('"location":"Kraków"}');
    const fenced = new StreamedArguments();
    expect(fenced.push("```json\n{")).toBe("");
    expect(fenced.end("{}")).toBe("{}");
    const junk = new StreamedArguments();
    expect(junk.push('{"a":1}')).toBe('{"a":1}');
    expect(junk.push(" commentary")).toBe("");
    expect(junk.end('{"a":1}')).toBe(""); // the repair is what was streamed
    const lead = new StreamedArguments();
    expect(lead.push(' {"a":1}')).toBe(""); // held whole: a repair drops the space, JSON as generated keeps it
    expect(lead.end(' {"a":1}')).toBe(' {"a":1}');
  });

  test("any JSON, any broken shape of it, any cuts: the deltas add up to checkArguments' arguments", () => {
    const value = fc.oneof(
      fc.json(),
      fc.jsonValue().map((v) => JSON.stringify(v, null, 2) ?? "null"),
    );
    const shaped = fc.tuple(value, fc.constantFrom("none", "escaped", "fence", "word", "junk", "closers", "lead", "mutated"), fc.nat());
    const args = fc.oneof(
      shaped.map(([j, shape, n]) => {
        const container = /^[{[]/.test(j);
        switch (shape) {
          case "escaped":
            return container ? JSON.stringify(j).slice(1, -1) : j;
          case "fence":
            return "```json\n" + j + "\n```";
          case "word":
            return "json" + j;
          case "junk":
            return j + ["}", " }", "\n}", " commentary", "]", ' {"x":1}'][n % 6]!;
          case "closers":
            return container ? j.replace(/[\]}\s]+$/, "") : j;
          case "lead":
            return [" ", "\n", "\t "][n % 3]! + j;
          default:
            return j;
        }
      }),
      mutatedJson(["\\", '"', "}", "]", "{", ",", " ", "\n", "json", "```", "x", "\u0001", "é", "😀"]),
    );
    fc.assert(
      fc.property(args, fc.array(fc.nat(), { maxLength: 12 }), fc.boolean(), (text, raw, atEnd) => {
        const cuts = raw.map((c) => c % (text.length + 1)).sort((a, b) => a - b);
        const w = whole(text, atEnd);
        expect(stream(text, cuts, w.arguments).sent).toBe(w.arguments);
        expect(stream(text, cuts, null).sent).toBe(text);
        if (w.validJson) expect(parsesAsJson(w.arguments)).toBe(true);
        // content type null (a call written with no content type) takes the same repairs
        const bare = whole(text, atEnd, null);
        expect(stream(text, cuts, bare.arguments).sent).toBe(bare.arguments);
      }),
      fcParams(600),
    );
  });

  test("JSON as generated is never held but for whitespace between tokens, whatever the cuts", () => {
    const value = fc.oneof(
      fc.json(),
      fc.jsonValue().map((v) => JSON.stringify(v, null, 2) ?? "null"),
    );
    fc.assert(
      fc.property(value, fc.array(fc.nat(), { maxLength: 12 }), (text, raw) => {
        fc.pre(!/^\s/.test(text));
        const cuts = raw.map((c) => c % (text.length + 1)).sort((a, b) => a - b);
        const g = new StreamedArguments();
        let sent = "";
        let at = 0;
        for (const cut of [...cuts, text.length]) {
          if (cut < at) continue;
          sent += g.push(text.slice(at, cut));
          at = cut;
          const held = text.slice(sent.length, at);
          expect(text.startsWith(sent)).toBe(true);
          expect(held, JSON.stringify({ text, sent, at })).toMatch(/^[ \t\n\r]*$/);
        }
      }),
      fcParams(400),
    );
  });

  test(`past ${MAX_STREAMED_ARGUMENT_CHARS} characters the rest is held for tool_call_end`, () => {
    const text = `{"blob":"${"x".repeat(MAX_STREAMED_ARGUMENT_CHARS)}"}`;
    const g = new StreamedArguments();
    let sent = "";
    for (let i = 0; i < text.length; i += 4096) sent += g.push(text.slice(i, i + 4096));
    expect(sent).toBe(text.slice(0, MAX_STREAMED_ARGUMENT_CHARS));
    expect(sent + g.end(text)).toBe(text);
  });

  test(`a broken call cut short keeps at most ${MAX_ARGUMENT_BYTES} characters held, as tool_call_end would`, () => {
    const g = new StreamedArguments();
    expect(g.push('{\\"a\\":\\"')).toBe("{");
    const piece = "x".repeat(1000);
    for (let i = 0; i < 3000; i++) expect(g.push(piece)).toBe(""); // 3 M characters
    const rest = g.flush();
    expect(rest.length).toBe(MAX_ARGUMENT_BYTES);
    expect(rest.startsWith('\\"a\\":\\"xxx')).toBe(true);
  });

  test("nesting deeper than the scan keeps is held, not streamed, and still adds up", () => {
    const text = "[".repeat(600) + "]".repeat(600);
    const { sent, pieces } = stream(text, bySize(text, 50), text);
    expect(sent).toBe(text);
    expect(pieces[0]).toBe("[".repeat(50));
  });

  test("a repair that does not start with what was streamed sends nothing more (never reached by checkArguments)", () => {
    const g = new StreamedArguments();
    expect(g.push('{"a":1')).toBe('{"a":1');
    expect(g.end('{"b":2}')).toBe("");
    expect(g.diverged).toBe(true);
  });
});
