/**
 * `loadtest --openai`'s reading and checking of answers: Chat Completions
 * and Responses, streamed and not (shapes as OpenAI's API reference gives
 * them, and as the sidecar's front sends them), each failure kind caught,
 * a clean answer passed, and the comparison with what the model meant.
 */
import { describe, expect, it } from "vitest";
import type { Intent } from "../../src/loadtest/intent.js";
import { intentOf } from "../../src/loadtest/intent.js";
import {
  AnswerReader,
  checkAnswer,
  controlTokens,
  emptyAnswer,
  MAX_ANSWER_BYTES,
  SchemaCheck,
  type Answer,
} from "../../src/loadtest/openai-check.js";
import { planRequest, TOOL_CATALOGUE, type PlannedRequest } from "../../src/loadtest/openai-plan.js";

const enc = new TextEncoder();
const sse = (events: unknown[], named = false) =>
  events
    .map((e) =>
      e === "[DONE]" ? "data: [DONE]\n\n" : `${named ? `event: ${(e as { type: string }).type}\n` : ""}data: ${JSON.stringify(e)}\n\n`,
    )
    .join("");

/** Feed `text` in pieces of `size` bytes, one ms apart. */
function read(api: "chat" | "responses", stream: boolean, text: string, size = 7): Answer {
  const r = new AnswerReader(api, stream, 0);
  const bytes = enc.encode(text);
  let t = 10;
  for (let i = 0; i < bytes.length; i += size) r.push(bytes.subarray(i, i + size), t++);
  const a = r.end(t);
  a.status = 200;
  return a;
}

const weather = TOOL_CATALOGUE.find((t) => t.name === "get_weather")!;
const request = (over: Partial<PlannedRequest> = {}): PlannedRequest => ({
  index: 0,
  api: "chat",
  stream: true,
  key: "r/0",
  tools: [weather],
  body: {},
  ...over,
});
const intent = (over: Partial<Intent> = {}): Intent => ({
  reasoning: "Think.",
  content: "",
  answer: "",
  calls: [{ name: "get_weather", arguments: '{"location":"Oslo"}' }],
  finish: "tool_calls",
  ...over,
});
const answer = (over: Partial<Answer> = {}): Answer => ({
  ...emptyAnswer(),
  status: 200,
  complete: true,
  reasoning: "Think.",
  calls: [{ name: "get_weather", arguments: '{"location": "Oslo"}' }],
  finish: "tool_calls",
  ...over,
});
const kinds = (req: PlannedRequest, a: Answer, i: Intent | null) =>
  checkAnswer(req, a, i ? { fault: null, intent: i, exact: true } : null, new SchemaCheck()).failures.map((f) => f.kind);

describe("reading answers", () => {
  it("reads a streamed Chat answer: reasoning, a call split over deltas, the finish, usage, and the delta times", () => {
    const text = sse([
      { id: "chatcmpl-1", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
      { id: "chatcmpl-1", choices: [{ index: 0, delta: { reasoning: "Think" }, finish_reason: null }] },
      { id: "chatcmpl-1", choices: [{ index: 0, delta: { reasoning: "." }, finish_reason: null }] },
      {
        id: "chatcmpl-1",
        choices: [
          {
            index: 0,
            delta: { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] },
          },
        ],
      },
      { id: "chatcmpl-1", choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"location":' } }] } }] },
      { id: "chatcmpl-1", choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] } }] },
      { id: "chatcmpl-1", choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
      { id: "chatcmpl-1", choices: [], usage: { prompt_tokens: 10, completion_tokens: 7, total_tokens: 17 } },
      "[DONE]",
    ]);
    const a = read("chat", true, text, 1 << 20);
    expect(a).toMatchObject({
      id: "chatcmpl-1",
      reasoning: "Think.",
      content: "",
      calls: [{ name: "get_weather", arguments: '{"location":"Oslo"}' }],
      finish: "tool_calls",
      completionTokens: 7,
      complete: true,
    });
    // one piece: every delta at the same time
    expect(a.firstTokenMs).toBe(10);
    expect(a.gaps).toEqual([0, 0, 0, 0]);
    const slow = read("chat", true, text, 40);
    expect(slow.gaps.length).toBe(4);
    expect(slow.gaps.every((g) => g >= 0)).toBe(true);
    expect(slow.calls).toEqual(a.calls);
  });

  it("reads events split anywhere, with \\r\\n or \\r line ends, and stops reading an answer past its bound", () => {
    const events = [
      { choices: [{ index: 0, delta: { content: "a" } }] },
      { choices: [{ index: 0, delta: { content: "b" }, finish_reason: "stop" }] },
      "[DONE]",
    ];
    const crlf = sse(events).replace(/\n/g, "\r\n");
    for (const size of [1, 2, 3, 5, 1 << 20]) {
      expect(read("chat", true, crlf, size)).toMatchObject({ content: "ab", finish: "stop", complete: true });
      expect(read("chat", true, sse(events).replace(/\n/g, "\r"), size)).toMatchObject({ content: "ab", complete: true });
    }
    const r = new AnswerReader("chat", true, 0);
    expect(r.push(new Uint8Array(MAX_ANSWER_BYTES + 1), 1)).toBe(false);
    expect(r.end(2).malformed).toMatch(/over/);
  });

  it("reads reasoning_content too, and a stream without [DONE] as incomplete", () => {
    const a = read("chat", true, sse([{ choices: [{ index: 0, delta: { reasoning_content: "R", content: "Hi" } }] }]));
    expect(a).toMatchObject({ reasoning: "R", content: "Hi", complete: false });
  });

  it("reads an error event inside a stream", () => {
    const a = read("chat", true, sse([{ error: { message: "boom", type: "upstream_error", code: "upstream_error" } }, "[DONE]"]));
    expect(a.streamError).toBe("upstream_error: boom");
  });

  it("reads a Chat completion", () => {
    const a = read(
      "chat",
      false,
      JSON.stringify({
        id: "chatcmpl-2",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: "Hello",
              reasoning: "R",
              tool_calls: [{ type: "function", function: { name: "f", arguments: "{}" } }],
            },
            finish_reason: "tool_calls",
          },
        ],
        usage: { completion_tokens: 3 },
      }),
    );
    expect(a).toMatchObject({
      content: "Hello",
      answer: "Hello",
      reasoning: "R",
      calls: [{ name: "f", arguments: "{}" }],
      finish: "tool_calls",
      completionTokens: 3,
    });
    expect(read("chat", false, "not json").malformed).toMatch(/not JSON/);
  });

  it("reads a streamed Response: reasoning, a preamble, a call, the final status", () => {
    const fc = {
      type: "function_call",
      id: "fc_1",
      call_id: "call_1",
      name: "get_weather",
      arguments: '{"location":"Oslo"}',
      status: "completed",
    };
    const text = sse(
      [
        { type: "response.created", sequence_number: 0, response: { id: "resp_1", status: "in_progress", output: [] } },
        { type: "response.output_item.added", sequence_number: 1, output_index: 0, item: { type: "reasoning", id: "rs_1" } },
        { type: "response.reasoning_text.delta", sequence_number: 2, output_index: 0, delta: "Think." },
        {
          type: "response.output_item.added",
          sequence_number: 3,
          output_index: 1,
          item: { type: "message", id: "m1", phase: "commentary" },
        },
        { type: "response.output_text.delta", sequence_number: 4, output_index: 1, delta: "Checking." },
        { type: "response.output_item.added", sequence_number: 5, output_index: 2, item: { ...fc, arguments: "" } },
        { type: "response.function_call_arguments.delta", sequence_number: 6, output_index: 2, delta: '{"location":"Oslo"}' },
        {
          type: "response.completed",
          sequence_number: 7,
          response: {
            id: "resp_1",
            status: "completed",
            output: [
              { type: "reasoning", id: "rs_1", content: [{ type: "reasoning_text", text: "Think." }] },
              { type: "message", id: "m1", phase: "commentary", content: [{ type: "output_text", text: "Checking." }] },
              fc,
            ],
            usage: { output_tokens: 9 },
          },
        },
      ],
      true,
    );
    const a = read("responses", true, text);
    expect(a).toMatchObject({
      id: "resp_1",
      reasoning: "Think.",
      content: "Checking.",
      answer: "",
      calls: [{ name: "get_weather", arguments: '{"location":"Oslo"}' }],
      finish: "tool_calls",
      completionTokens: 9,
      complete: true,
    });
    expect(a.firstTokenMs).not.toBeNull();
    expect(a.gaps).toHaveLength(2);
  });

  it("reads an incomplete Response as a length finish", () => {
    const a = read(
      "responses",
      false,
      JSON.stringify({
        id: "resp_2",
        status: "incomplete",
        incomplete_details: { reason: "max_output_tokens" },
        output: [{ type: "message", content: [{ type: "output_text", text: "Cut" }] }],
      }),
    );
    expect(a).toMatchObject({ finish: "length", content: "Cut", answer: "Cut" });
  });
});

describe("checking answers", () => {
  it("passes a clean answer, with or without the model's intent", () => {
    expect(kinds(request(), answer(), null)).toEqual([]);
    expect(kinds(request(), answer(), intent())).toEqual([]);
  });

  it("counts HTTP errors, broken connections, timeouts and broken streams", () => {
    expect(kinds(request(), { ...emptyAnswer(), status: 500, error: "x" }, null)).toEqual(["http_error"]);
    expect(kinds(request(), { ...emptyAnswer(), status: 0 }, null)).toEqual(["network_error"]);
    expect(kinds(request(), { ...emptyAnswer(), status: -1 }, null)).toEqual(["timeout"]);
    expect(kinds(request(), answer({ complete: false }), null)).toEqual(["stream_incomplete"]);
    expect(kinds(request(), answer({ streamError: "e" }), null)).toEqual(["stream_error"]);
    expect(kinds(request(), answer({ malformed: "m" }), null)).toEqual(["bad_response"]);
  });

  it("catches calls to undeclared tools, arguments that are not JSON or do not match the schema", () => {
    expect(kinds(request(), answer({ calls: [{ name: "rm_rf", arguments: "{}" }] }), null)).toEqual(["undeclared_tool"]);
    expect(kinds(request(), answer({ calls: [{ name: "get_weather", arguments: '{\\"location\\":\\"Oslo\\"}' }] }), null)).toEqual([
      "arguments_invalid",
    ]);
    expect(kinds(request(), answer({ calls: [{ name: "get_weather", arguments: '{"city":"Oslo"}' }] }), null)).toEqual([
      "arguments_schema",
    ]);
    // a last call cut by a length finish is not held against the answer
    expect(kinds(request(), answer({ calls: [{ name: "get_weather", arguments: '{"loca' }], finish: "length" }), null)).toEqual([]);
  });

  it("catches control-token text, but not the model's own literal text", () => {
    expect(controlTokens("<|start|>assistant<|channel|>final<|message|>Hi<|reserved_200013|>")).toBe(4);
    const leaked = answer({ calls: [], finish: "stop", content: "<|channel|>final<|message|>Hi" });
    expect(kinds(request(), leaked, null)).toEqual(["control_token_text"]);
    const quoted = answer({ calls: [], finish: "stop", content: "The template writes `<|start|>assistant` as plain text." });
    expect(kinds(request(), quoted, intent({ calls: [], finish: "stop", content: quoted.content, answer: quoted.content }))).toEqual([]);
    // text with no header (rule 13) streams as reasoning, then comes again as the answer: the model's own text, twice
    const headerless = answer({ calls: [], finish: "length", content: quoted.content, reasoning: quoted.content });
    const meant = intent({ calls: [], finish: "length", reasoning: "", content: quoted.content, answer: quoted.content });
    expect(kinds(request(), headerless, meant)).toEqual([]);
    expect(
      kinds(request(), answer({ calls: [], finish: "stop", reasoning: "<|channel|>x" }), intent({ calls: [], finish: "stop" })),
    ).toContain("control_token_text");
  });

  it("catches missing reasoning and finish reasons that contradict the calls", () => {
    expect(kinds(request(), answer({ reasoning: "" }), null)).toEqual(["reasoning_missing"]);
    expect(kinds(request(), answer({ reasoning: "" }), intent({ reasoning: "" }))).toEqual([]);
    expect(kinds(request(), answer({ finish: "stop" }), null)).toEqual(["finish_mismatch"]);
    expect(kinds(request(), answer({ calls: [], finish: "tool_calls" }), null)).toEqual(["finish_mismatch"]);
  });

  it("compares with what the model meant: lost and unintended calls, the answer, the finish", () => {
    expect(kinds(request(), answer({ calls: [], finish: "stop" }), intent())).toEqual(["finish_mismatch", "lost_tool_call"]);
    expect(kinds(request(), answer({ calls: [{ name: "get_weather", arguments: '{"location":"Bergen"}' }] }), intent())).toEqual([
      "lost_tool_call",
      "unintended_call",
    ]);
    expect(
      kinds(request(), answer({ calls: [], finish: "stop", content: "Hi" }), intent({ calls: [], finish: "stop", content: "Hello" })),
    ).toEqual(["answer_mismatch"]);
    // Responses compare the final answer (preambles are messages of their own)
    const r = request({ api: "responses" });
    expect(
      kinds(
        r,
        answer({ calls: [], finish: "stop", content: "Checking.Hello", answer: "Hello" }),
        intent({ calls: [], finish: "stop", content: "Checking.Hello", answer: "Hello" }),
      ),
    ).toEqual([]);
    expect(kinds(request(), answer({ finish: "length" }), intent())).toEqual(["finish_mismatch"]);
  });

  it("takes the model's intent from generated messages: complete calls, reasoning, content, finish", () => {
    const ms = [
      { role: "assistant", content: "Think.", channel: "analysis" },
      { role: "assistant", content: "Checking.", channel: "commentary" },
      {
        role: "assistant",
        recipient: "functions.get_weather",
        content: '{"location":"Oslo"}',
        channel: "commentary",
        content_type: "<|constrain|>json",
      },
      { role: "assistant", recipient: "python", content: "print(1)", channel: "analysis" },
      { role: "assistant", recipient: "functions.get_weather", content: '{"loc', channel: "commentary" },
    ] as Parameters<typeof intentOf>[0];
    expect(intentOf(ms, false, true)).toEqual({
      reasoning: "Think.",
      content: "Checking.",
      answer: "",
      calls: [{ name: "get_weather", arguments: '{"location":"Oslo"}' }],
      finish: "length",
    });
    expect(intentOf(ms.slice(0, 3), true).finish).toBe("tool_calls");
  });
});

describe("planned requests", () => {
  it("are a function of (seed, index), each carrying its key, with tools from the catalogue", () => {
    const o = { seed: 4, runId: "r1", apis: ["chat", "responses"] as const, stream: "both" as const, model: "m" };
    const a = planRequest(17, { ...o, apis: [...o.apis] });
    expect(planRequest(17, { ...o, apis: [...o.apis] })).toEqual(a);
    expect(a.key).toBe("r1/17");
    expect(JSON.stringify(a.body)).toContain("harmony-loadtest run=r1 request=17");
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const p = planRequest(i, { ...o, apis: [...o.apis] });
      seen.add(`${p.api}/${p.stream}`);
      for (const t of p.tools) expect(TOOL_CATALOGUE).toContain(t);
    }
    expect(seen.size).toBe(4);
  });
});
