/** The inspector page's pure logic (src/inspect/logic.ts), on real parser output. */
import { describe, expect, it } from "vitest";
import {
  chunksUpTo,
  collectMessages,
  decodeFragment,
  describeKind,
  detectInput,
  encodeFragment,
  eventsAtStep,
  groupMarks,
  parseIdList,
  positions,
  readSseLog,
  segmentTokens,
  summarize,
  type ParseAnswer,
} from "../../src/inspect/logic.js";
import { checkParseRequest, runParseRequest } from "../../src/inspect/parse.js";
import { harmony } from "../helpers.js";

const { enc, vocab } = harmony();

/** What POST /v1/parse answers with `tokens: true`. */
function answer(text: string, mode: "resilient" | "strict" = "resilient", extra: Record<string, unknown> = {}): ParseAnswer {
  const c = checkParseRequest({ text, mode, tokens: true, ...extra }, 262144);
  if (!c.ok) throw new Error(c.message);
  const r = runParseRequest(vocab, enc.encode, c.req, 262144);
  if (!r.ok) throw new Error(r.message);
  return r.answer as ParseAnswer;
}

const SPLICED =
  '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|><|start|>assistant<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>';
const README =
  '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>';

describe("input", () => {
  it("reads id lists in every written form", () => {
    expect(parseIdList("1, 2 3\n4")).toEqual([1, 2, 3, 4]);
    expect(parseIdList("[200005, 35644]")).toEqual([200005, 35644]);
    expect(parseIdList("  ")).toEqual([]);
    expect(() => parseIdList("1, x")).toThrow(/position 1/);
    expect(() => parseIdList("[1, -2]")).toThrow(/not a token id/);
  });

  it("tells text, ids and SSE logs apart", () => {
    expect(detectInput(README)).toBe("text");
    expect(detectInput("200005, 35644, 200008")).toBe("ids");
    expect(detectInput("[1,2,3]")).toBe("ids");
    expect(detectInput('data: {"choices":[]}\n\ndata: [DONE]')).toBe("sse");
    expect(detectInput("Just prose: 1, 2, 3.")).toBe("text");
  });
});

describe("SSE logs", () => {
  it("takes vLLM completion chunks' token_ids, first choice only", () => {
    const log = [
      'data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"","token_ids":[200005,35644]}]}',
      "",
      ": keep-alive",
      'data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":1,"text":"x","token_ids":[9]}]}',
      'data: {"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"Hi","token_ids":[200008,12194]}],"usage":null}',
      "data: [DONE]",
    ].join("\n");
    const r = readSseLog(log);
    expect(r.format).toBe("vllm-completions");
    expect(r.ids).toEqual([200005, 35644, 200008, 12194]);
    expect(r.chunks).toBe(3);
    expect(r.notes.join()).toMatch(/only choice 0/);
  });

  it("writes an OpenAI chat stream back as the Harmony text it implies", () => {
    const chunk = (delta: object) => `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta }] })}`;
    const log = [
      chunk({ role: "assistant", content: null }),
      chunk({ reasoning_content: "Need " }),
      chunk({ reasoning_content: "weather." }),
      chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
      "data: not json",
      "data: [DONE]",
    ].join("\n\n");
    const r = readSseLog(log);
    expect(r.format).toBe("openai-chat");
    expect(r.ids).toBeNull();
    expect(r.text).toBe(
      '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>',
    );
    expect(r.notes.join()).toMatch(/1 data line that is not JSON|1 data line/);
    // and the parser reads that text as the stream meant
    const msgs = collectMessages(answer(r.text!).events);
    expect(msgs.map((m) => [m.channel, m.call?.name ?? null])).toEqual([
      ["analysis", null],
      ["commentary", "get_weather"],
    ]);
    expect(msgs[1]!.call!.pretty).toBe('{\n  "city": "Oslo"\n}');
  });

  it("reads a Responses stream and a final answer (delta.reasoning, as vLLM names it)", () => {
    const resp = readSseLog(
      [
        'event: response.reasoning_text.delta\ndata: {"type":"response.reasoning_text.delta","delta":"Hmm."}',
        'data: {"type":"response.output_text.delta","delta":"Hello"}',
      ].join("\n\n"),
    );
    expect(resp.format).toBe("openai-responses");
    expect(resp.text).toBe("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>");
    const chat = readSseLog('data: {"choices":[{"delta":{"reasoning":"R"}}]}\ndata: {"choices":[{"delta":{"content":"A"}}]}');
    expect(chat.text).toBe("<|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>A<|return|>");
  });

  it("says so when nothing is found", () => {
    const r = readSseLog("data: {}\n");
    expect(r.ids).toBeNull();
    expect(r.text).toBeNull();
    expect(r.notes.join()).toMatch(/no token ids/);
  });
});

describe("fragment", () => {
  it("round-trips text with every awkward character", () => {
    const value = 'a&b=c#d %20 + <|end|>\n"é" 🙂';
    const hash = encodeFragment({ kind: "text", value });
    expect(hash.startsWith("#text=")).toBe(true);
    expect(hash.slice(1)).not.toMatch(/[&#\n ]/);
    expect(decodeFragment(hash)).toEqual({ kind: "text", value });
  });

  it("round-trips ids and options, and leaves defaults out", () => {
    const hash = encodeFragment({ kind: "ids", value: "1 2, 3", role: "none", afterStop: "parse", tools: ["Web Search", "a,b"] });
    expect(hash).toBe("#ids=1,2,3&role=none&after_stop=parse&tools=Web%20Search,a%2Cb");
    expect(decodeFragment(hash)).toEqual({ kind: "ids", value: "1,2,3", role: "none", afterStop: "parse", tools: ["Web Search", "a,b"] });
    expect(encodeFragment({ kind: "text", value: "x", role: "assistant", afterStop: "drop", tools: [] })).toBe("#text=x");
    // the calls a stream may make (the front's tool_choice "none", parallel_tool_calls false): the front's log links carry them
    expect(encodeFragment({ kind: "ids", value: "1", calls: "none" })).toBe("#ids=1&calls=none");
    expect(decodeFragment("#ids=1&calls=one")).toEqual({ kind: "ids", value: "1", calls: "one" });
    expect(encodeFragment({ kind: "ids", value: "1", calls: "any" })).toBe("#ids=1");
    expect(decodeFragment("#ids=1&calls=some")).toEqual({ kind: "ids", value: "1" });
  });

  it("reads hand-written links: a plus stays a plus, a bad escape stays as written", () => {
    expect(decodeFragment("#text=1+1")).toEqual({ kind: "text", value: "1+1" });
    expect(decodeFragment("text=%E0%A4%A")).toEqual({ kind: "text", value: "%E0%A4%A" });
    expect(decodeFragment("#")).toBeNull();
    expect(decodeFragment("#role=none")).toBeNull();
  });
});

describe("tokens and messages", () => {
  it("colours a well-formed stream by channel, header and control token", () => {
    const a = answer(README);
    const { tokens, endMarks } = segmentTokens(a);
    expect(endMarks).toEqual([]);
    const line = tokens.map((t) => `${t.label}:${t.cls}${t.tool ? "+tool" : ""}@${t.message}`);
    expect(line.slice(0, 6)).toEqual([
      "<|channel|>:control@0",
      "analysis:header@0",
      "<|message|>:control@0",
      "Think:analysis@0",
      ".:analysis@0",
      "<|end|>:control@0",
    ]);
    expect(line).toContain("<|start|>:control@1");
    expect(line).toContain(" to:header@1");
    expect(line.filter((l) => l.includes("+tool")).join("")).toContain("Paris");
    expect(line[line.length - 1]).toBe("<|call|>:control@1");
    const msgs = collectMessages(a.events);
    expect(msgs).toHaveLength(2);
    expect(msgs[0]).toMatchObject({ index: 0, channel: "analysis", text: "Think.", stop: "end", call: null });
    expect(msgs[1]!.call).toEqual({
      id: "call_0",
      name: "get_weather",
      arguments: '{"city":"Paris"}',
      pretty: '{\n  "city": "Paris"\n}',
      valid_json: true,
    });
  });

  it("colours text with no header as reasoning, and as the answer once the parser gives it as the answer (rule 13)", () => {
    const cls = (text: string) => [
      ...new Set(
        segmentTokens(answer(text))
          .tokens.filter((t) => t.message === 0)
          .map((t) => t.cls),
      ),
    ];
    expect(cls("We need to answer.<|end|><|start|>assistant<|channel|>final<|message|>Yes.<|return|>")).toContain("analysis");
    expect(cls("We need to answer.<|end|><|start|>assistant<|channel|>final<|message|>Yes.<|return|>")).not.toContain("final");
    expect(cls("I'm sorry, but I can't help with that.<|return|>")).toContain("final");
    expect(cls("I'm sorry, but I can't help with that.<|return|>")).not.toContain("analysis");
  });

  it("marks every recovery at its token, and the strict error at its token", () => {
    const r = answer(SPLICED);
    const seg = segmentTokens(r);
    const marked = seg.tokens.filter((t) => t.marks.length > 0).map((t) => [t.at, t.label, t.marks.map((i) => r.events[i]!.kind)]);
    expect(marked).toEqual([
      [0, "<|start|>", ["double_start"]],
      [10, "<|end|>", ["abandoned_header"]],
      [17, "<|message|>", ["recipient_spliced"]],
    ]);
    const call = collectMessages(r.events)[0]!;
    expect(call.recipient).toBe("functions.get_weather");
    expect(call.call?.valid_json).toBe(true);
    expect(summarize(r.events).recoveries).toHaveLength(3);

    const s = answer(SPLICED, "strict");
    const sseg = segmentTokens(s);
    const first = summarize(s.events).errors[0]!;
    expect(s.events[first]).toMatchObject({ type: "error", code: "header_trailing_tokens", at: 17 });
    expect(sseg.tokens[17]!.marks).toContain(first);
    expect(collectMessages(s.events)).toEqual([]);
    expect(summarize(s.events).done).toMatchObject({ finish_reason: "error" });
  });

  it("puts end-of-stream marks at the end, and shows junk, dropped text and partial bytes", () => {
    // a header cut by the end of the stream (strict: an error at the end), and a 4-byte character split over four tokens
    const s = answer("<|channel|>final<|message|>ok<|return|><|start|>assistant<|channel|>fin", "strict", { role: "assistant" });
    const seg = segmentTokens(s);
    expect(seg.endMarks.map((i) => s.events[i]!.code)).toEqual(["header_incomplete_eos"]);

    const ids = [...enc.encode("<|channel|>final<|message|>"), ...enc.encode("𓀀"), ...enc.encode("<|return|> stray words")];
    const c = checkParseRequest({ ids, tokens: true, after_stop: "drop" }, 1000);
    if (!c.ok) throw new Error(c.message);
    const r = runParseRequest(vocab, enc.encode, c.req, 1000);
    if (!r.ok) throw new Error(r.message);
    const t = segmentTokens(r.answer as ParseAnswer).tokens;
    const partial = t.filter((x) => x.label.startsWith("\\x"));
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.every((x) => x.cls === "final" && x.message === 0)).toBe(true);
    expect(t[t.length - 1]!.cls).toBe("after");
    expect(collectMessages(r.answer.events as ParseAnswer["events"])[0]!.text).toBe("𓀀");
  });

  it("colours other roles' messages and text between messages", () => {
    const a = answer("<|start|>user<|message|>Hi<|end|> junk <|start|>assistant<|channel|>final<|message|>Yo<|return|>", "resilient", {
      role: "none",
    });
    const t = segmentTokens(a).tokens;
    expect(t.find((x) => x.label === "Hi")!.cls).toBe("other");
    expect(t.find((x) => x.label === " junk")!.cls).toBe("junk");
    expect(t.find((x) => x.label === "Yo")!.cls).toBe("final");
  });
});

describe("POST /v1/parse's request checks", () => {
  it("refuses what it cannot read, with the project's codes", () => {
    const code = (v: unknown, max = 10) => {
      const c = checkParseRequest(v, max);
      return c.ok ? "ok" : c.code;
    };
    expect(code([])).toBe("bad_request");
    expect(code({})).toBe("bad_request");
    expect(code({ text: "a", ids: [1] })).toBe("bad_request");
    expect(code({ text: 5 })).toBe("bad_request");
    expect(code({ ids: "1,2" })).toBe("bad_tokens");
    expect(code({ ids: [1, 2.5] })).toBe("bad_token_id");
    expect(code({ ids: [-1] })).toBe("bad_token_id");
    expect(code({ ids: new Array(11).fill(1) })).toBe("too_many_ids");
    expect(code({ ids: [1], mode: "lenient" })).toBe("bad_option");
    expect(code({ ids: [1], role: "user" })).toBe("bad_option");
    expect(code({ ids: [1], after_stop: "keep" })).toBe("bad_option");
    expect(code({ ids: [1], tools: "a" })).toBe("bad_option");
    expect(code({ ids: [1], tokens: "yes" })).toBe("bad_option");
    expect(code({ ids: [1], calls: "some" })).toBe("bad_option");
    expect(code({ ids: [1], chunks: 1 })).toBe("bad_option");
    expect(code({ ids: [1], calls: "none", chunks: true })).toBe("ok");
    expect(code({ ids: [1], tools: ["a"], mode: "strict", role: "none", after_stop: "parse", tokens: false })).toBe("ok");
    const c = checkParseRequest({ text: "<|end|>".repeat(20) }, 10);
    if (!c.ok) throw new Error("checked");
    expect(runParseRequest(vocab, enc.encode, c.req, 10)).toMatchObject({ ok: false, code: "too_many_ids", status: 400 });
  });

  it("answers without tokens as the CLI's parse does: one write, one end", () => {
    const c = checkParseRequest({ text: README }, 1000);
    if (!c.ok) throw new Error(c.message);
    const r = runParseRequest(vocab, enc.encode, c.req, 1000);
    expect(r.ok && Object.keys(r.answer)).toEqual(["events"]);
    const deltas = r.ok ? r.answer.events.filter((e) => e.type === "delta") : [];
    expect(deltas.map((d) => (d as { text: string }).text)).toEqual(["Think.", '{"city":"Paris"}']);
  });
});

describe("what the page says and steps through", () => {
  it("groups the strict errors that differ only in their token ids, with every position", () => {
    const a = answer(SPLICED, "strict");
    const { errors } = summarize(a.events);
    expect(errors.length).toBe(8);
    const groups = groupMarks(a.events, errors);
    expect(groups.map((g) => [a.events[g.first]!.code, g.events.length, g.ats])).toEqual([
      ["header_trailing_tokens", 1, [17]],
      ["unexpected_token", 7, [18, 19, 20, 21, 22, 23, 24]],
    ]);
    expect(positions(groups[1]!.ats, 25)).toBe("18, 19, 20, 21, 22, 23, 24");
    expect(positions([1, 2, 3, 4, 5, 6, 7, 10], 25)).toBe("1, 2, 3, 4, 5, 6, … 10");
    expect(positions([3, 25], 25)).toBe("3, end");
    // recoveries that say different things stay apart
    const r = answer(SPLICED);
    expect(groupMarks(r.events, summarize(r.events).recoveries)).toHaveLength(3);
  });

  it("steps: after k tokens, the events emitted so far, and the front's chunks they made", () => {
    const a = answer(SPLICED, "resilient", { chunks: true });
    const n = a.tokens!.length;
    expect(eventsAtStep(a, 0)).toBe(0);
    // token 0 (a stray <|start|>) gives the double_start recovery at once
    expect(a.events.slice(0, eventsAtStep(a, 1)).map((e) => e.kind)).toEqual(["double_start"]);
    expect(eventsAtStep(a, n)).toBe(a.events.length - 1); // all but done, which the end of the stream gives
    expect(eventsAtStep(a, n + 1)).toBe(a.events.length);
    for (let k = 0; k <= n + 1; k++) {
      const c = eventsAtStep(a, k);
      expect(a.events.slice(0, c).every((_, i) => a.emitted![i]! < k || k > n)).toBe(true);
      const chat = a.chunks!.chat;
      const sent = chunksUpTo(chat, c);
      expect(chat.slice(0, sent).every((ch) => ch.event < c)).toBe(true);
      expect(chat.slice(sent).every((ch) => ch.event >= c)).toBe(true);
    }
    // the chat chunks: the role first, the call's id and name, its arguments token by token, the finish reason
    const deltas = a.chunks!.chat.map(
      (c) => (c.data as { choices: { delta: Record<string, unknown>; finish_reason: string | null }[] }).choices[0]!,
    );
    expect(deltas[0]!.delta).toEqual({ role: "assistant", content: "" });
    expect(deltas[1]!.delta).toEqual({
      tool_calls: [{ index: 0, id: "call_inspect_0", type: "function", function: { name: "get_weather", arguments: "" } }],
    });
    expect(deltas.at(-1)!.finish_reason).toBe("tool_calls");
    expect(a.chunks!.responses.at(-1)!.data.type).toBe("response.completed");
    expect(a.chunks!.responses.at(-1)!.data).not.toHaveProperty("harmony");
  });

  it("says what Detect found", () => {
    expect(["ids", "text", "sse"].map((k) => describeKind(k as "ids"))).toEqual(["token ids", "Harmony text", "an SSE log"]);
  });
});
