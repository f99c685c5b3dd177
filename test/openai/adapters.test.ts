/**
 * OpenAI adapters driven by real parser events, checked three ways:
 * - against the expected text of each channel (independently of the adapters);
 * - for any chunking of the same token ids (whole, one token per write, random);
 * - through the `openai` package itself: its stream helpers fed from a
 *   ReadableStream, and a real `OpenAI` client whose `fetch` answers with our
 *   SSE stream (no network), for chat and for responses.
 */
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import OpenAI from "openai";
import { ChatCompletionStream } from "openai/lib/ChatCompletionStream";
import { ResponseStream } from "openai/lib/responses/ResponseStream";
import type {
  ChatCompletion,
  ChatCompletionAssistantMessageParam,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
} from "openai/resources/chat/completions";
import type { Response as OAIResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import { FIXTURES, fcParams, harmony, loadJsonl, parsesAsJson, rng } from "../helpers.js";
import { HarmonyParser, MAX_ARGUMENT_BYTES } from "../../src/core/parser.js";
import type { EndReason, HarmonyEvent } from "../../src/core/events.js";
import {
  ChatCompletionAccumulator,
  ChatCompletionChunkAdapter,
  chatFinishReason,
  type ChatAdapterOptions,
  type HarmonyChatCompletion,
  type HarmonyChatCompletionChunk,
} from "../../src/openai/chat.js";
import { ResponsesStreamAdapter, type ResponsesAdapterOptions } from "../../src/openai/responses.js";
import { MAX_STREAMED_ARGUMENT_CHARS } from "../../src/openai/streamed-arguments.js";

const CHAT: ChatAdapterOptions = { id: "chatcmpl-test", model: "gpt-oss-20b", created: 1_700_000_000 };
const RESP: ResponsesAdapterOptions = { id: "resp_test", model: "gpt-oss-20b", created: 1_700_000_000 };

// ------------------------------------------------------------------ scenarios

interface Expected {
  content: string | null;
  reasoning: string | null;
  calls: { id: string; name: string; arguments: string }[];
  chatFinish: "stop" | "tool_calls" | "length";
  /** Responses output items: [type, text or arguments, phase?] */
  items: [string, string, string?][];
  terminal: "response.completed" | "response.incomplete" | "response.failed";
  itemStatus: "completed" | "incomplete";
}

interface Scenario {
  name: string;
  text: string;
  end?: EndReason;
  expected: Expected;
}

const SCENARIOS: Scenario[] = [
  {
    name: "reasoning + final answer",
    text: "<|channel|>analysis<|message|>The user greets; reply briefly.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help? 👋 Ünïcödé<|return|>",
    expected: {
      content: "Hello! How can I help? 👋 Ünïcödé",
      reasoning: "The user greets; reply briefly.",
      calls: [],
      chatFinish: "stop",
      items: [
        ["reasoning", "The user greets; reply briefly."],
        ["message", "Hello! How can I help? 👋 Ünïcödé", "final_answer"],
      ],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "reasoning + preamble + two parallel function calls (<|end|> then <|call|>)",
    text:
      "<|channel|>analysis<|message|>Need the weather in Oslo and Paris.<|end|>" +
      "<|start|>assistant<|channel|>commentary<|message|>Checking both cities.<|end|>" +
      '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|end|>' +
      '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris","unit":"celsius"}<|call|>',
    expected: {
      content: "Checking both cities.",
      reasoning: "Need the weather in Oslo and Paris.",
      calls: [
        { id: "call_0", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "call_1", name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' },
      ],
      chatFinish: "tool_calls",
      items: [
        ["reasoning", "Need the weather in Oslo and Paris."],
        ["message", "Checking both cities.", "commentary"],
        ["function_call", '{"city":"Oslo"}'],
        ["function_call", '{"city":"Paris","unit":"celsius"}'],
      ],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "built-in tool call (browser.search): reasoning, not a client function",
    text:
      "<|channel|>analysis<|message|>Search first.<|end|>" +
      '<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query":"harmony format"}<|call|>',
    expected: {
      content: null,
      reasoning: 'Search first.{"query":"harmony format"}',
      calls: [],
      chatFinish: "stop",
      items: [
        ["reasoning", "Search first."],
        ["reasoning", '{"query":"harmony format"}'],
      ],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "built-in tool call (python, bare recipient)",
    text: "<|channel|>analysis to=python code<|message|>print(2 + 2)<|call|>",
    expected: {
      content: null,
      reasoning: "print(2 + 2)",
      calls: [],
      chatFinish: "stop",
      items: [["reasoning", "print(2 + 2)"]],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "stop tokens stripped by the engine: final answer ends at eos",
    text: "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>42",
    expected: {
      content: "42",
      reasoning: "Easy.",
      calls: [],
      chatFinish: "stop",
      items: [
        ["reasoning", "Easy."],
        ["message", "42", "final_answer"],
      ],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "stop tokens stripped by the engine: function call ends at eos",
    text: '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"tz":"UTC"}',
    expected: {
      content: null,
      reasoning: null,
      calls: [{ id: "call_0", name: "get_time", arguments: '{"tz":"UTC"}' }],
      chatFinish: "tool_calls",
      items: [["function_call", '{"tz":"UTC"}']],
      terminal: "response.completed",
      itemStatus: "completed",
    },
  },
  {
    name: "truncated final answer (length)",
    text: "<|channel|>analysis<|message|>Let me think about it.<|end|><|start|>assistant<|channel|>final<|message|>The answer is forty",
    end: "length",
    expected: {
      content: "The answer is forty",
      reasoning: "Let me think about it.",
      calls: [],
      chatFinish: "length",
      items: [
        ["reasoning", "Let me think about it."],
        ["message", "The answer is forty", "final_answer"],
      ],
      terminal: "response.incomplete",
      itemStatus: "incomplete",
    },
  },
  {
    name: "truncated function call arguments (length)",
    text: '<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{"q":"partial ar',
    end: "length",
    expected: {
      content: null,
      reasoning: null,
      calls: [{ id: "call_0", name: "lookup", arguments: '{"q":"partial ar' }],
      chatFinish: "length",
      items: [["function_call", '{"q":"partial ar']],
      terminal: "response.incomplete",
      itemStatus: "incomplete",
    },
  },
  {
    name: "aborted stream",
    text: "<|channel|>final<|message|>Half an ans",
    end: "abort",
    expected: {
      content: "Half an ans",
      reasoning: null,
      calls: [],
      chatFinish: "length",
      items: [["message", "Half an ans", "final_answer"]],
      terminal: "response.incomplete",
      itemStatus: "incomplete",
    },
  },
];

// ------------------------------------------------------------------ drivers

type Chunking = "whole" | "token" | "random";

function parse(text: string, chunking: Chunking, end: EndReason = "eos", seed = 1): HarmonyEvent[] {
  const { enc, vocab } = harmony();
  const ids = enc.encode(text);
  // (parsing on past a closing stop: what follows it is the adapters' business here, not rule 8's)
  const p = new HarmonyParser(vocab, { afterStop: "parse" });
  const events: HarmonyEvent[] = [];
  if (chunking === "whole") events.push(...p.write(ids));
  else if (chunking === "token") for (const id of ids) events.push(...p.write([id]));
  else {
    const r = rng(seed);
    for (let i = 0; i < ids.length;) {
      const n = 1 + Math.floor(r() * 5);
      events.push(...p.write(ids.slice(i, i + n)));
      i += n;
    }
  }
  events.push(...p.end(end));
  return events;
}

function chatChunks(events: HarmonyEvent[], opts: Partial<ChatAdapterOptions> = {}): HarmonyChatCompletionChunk[] {
  const a = new ChatCompletionChunkAdapter({ ...CHAT, ...opts });
  return events.flatMap((e) => a.push(e));
}

function accumulate(events: HarmonyEvent[], opts: Partial<ChatAdapterOptions> = {}): HarmonyChatCompletion {
  const acc = new ChatCompletionAccumulator({ ...CHAT, ...opts });
  for (const e of events) acc.push(e);
  return acc.result();
}

function responseEvents(
  events: HarmonyEvent[],
  opts: Partial<ResponsesAdapterOptions> = {},
): { out: ResponseStreamEvent[]; final: OAIResponse } {
  const a = new ResponsesStreamAdapter({ ...RESP, ...opts });
  const out = events.flatMap((e) => a.push(e));
  expect(a.finished).toBe(true);
  return { out, final: a.response! };
}

/** Fold chat chunks by hand (independent of the accumulator). */
function foldChat(chunks: ChatCompletionChunk[], field = "reasoning") {
  let content = "";
  let reasoning = "";
  const calls: { id: string; name: string; arguments: string }[] = [];
  let finish: string | null = null;
  for (const c of chunks) {
    for (const ch of c.choices) {
      const d = ch.delta as Record<string, unknown> & ChatCompletionChunk.Choice.Delta;
      if (typeof d.content === "string") content += d.content;
      if (typeof d[field] === "string") reasoning += d[field] as string;
      for (const t of d.tool_calls ?? []) {
        const call = (calls[t.index] ??= { id: "", name: "", arguments: "" });
        if (t.id) call.id = t.id;
        if (t.function?.name) call.name = t.function.name;
        if (t.function?.arguments) call.arguments += t.function.arguments;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { content: content === "" ? null : content, reasoning: reasoning === "" ? null : reasoning, calls, finish };
}

// ------------------------------------------------------------------ runtime shape checks (the openai types, as key sets)

const keys = (o: object) => Object.keys(o).sort();

function checkChatChunks(chunks: HarmonyChatCompletionChunk[], field: "reasoning" | "reasoning_content" = "reasoning"): void {
  expect(chunks.length).toBeGreaterThanOrEqual(2);
  const first = chunks[0]!;
  expect(first.choices[0]!.delta.role).toBe("assistant");
  let finishes = 0;
  const toolIdx = new Set<number>();
  for (const c of chunks) {
    const typed: ChatCompletionChunk = c; // the official type
    expect(typed.object).toBe("chat.completion.chunk");
    expect([typed.id, typed.model, typed.created]).toEqual([CHAT.id, CHAT.model, CHAT.created]);
    if (c.usage) {
      expect(keys(c)).toEqual(["choices", "created", "id", "model", "object", "usage"]);
      expect(c.choices).toEqual([]);
      continue;
    }
    if (c.harmony) {
      // a call's whole arguments (tool_call_end), for the non-streaming answer, or the
      // choice's reasoning tokens just before its finish reason: no choices
      expect(keys(c)).toEqual(["choices", "created", "harmony", "id", "model", "object"]);
      expect(c.choices).toEqual([]);
      if (c.harmony.tool_call_end) expect(toolIdx.has(c.harmony.tool_call_end.index)).toBe(true);
      else {
        expect(Object.keys(c.harmony)).toEqual(["reasoning_tokens", "repairs"]);
        expect(finishes).toBe(0);
      }
      continue;
    }
    expect(keys(c)).toEqual(["choices", "created", "id", "model", "object"]);
    expect(c.choices).toHaveLength(1);
    const ch = c.choices[0]!;
    expect(keys(ch)).toEqual(["delta", "finish_reason", "index", "logprobs"]);
    expect(ch.logprobs).toBeNull();
    for (const k of Object.keys(ch.delta)) expect(["role", "content", field, "tool_calls"]).toContain(k);
    if (ch.finish_reason !== null) {
      finishes++;
      expect(ch.delta).toEqual({});
      expect(c).toBe(chunks.filter((x) => !x.usage && !x.harmony).at(-1)); // the last choice chunk
    }
    for (const t of ch.delta.tool_calls ?? []) {
      if (!toolIdx.has(t.index)) {
        // first chunk of a call: id, type, name, empty arguments; indexes from 0 in order
        expect(t.index).toBe(toolIdx.size);
        toolIdx.add(t.index);
        expect(keys(t)).toEqual(["function", "id", "index", "type"]);
        expect(t.type).toBe("function");
        expect(t.function!.arguments).toBe("");
        expect(t.function!.name).toMatch(/\S/);
      } else {
        expect(keys(t)).toEqual(["function", "index"]);
        expect(keys(t.function!)).toEqual(["arguments"]);
      }
    }
  }
  expect(finishes).toBe(1);
}

/** Required keys of each Responses event type we emit (from openai/resources/responses/responses.d.ts). */
const EVENT_KEYS: Record<string, string[]> = {
  "response.created": ["response"],
  "response.in_progress": ["response"],
  // the closing event also carries (not OpenAI's) `harmony: {reasoning_tokens}`, which a front takes off
  "response.completed": ["harmony", "response"],
  "response.incomplete": ["harmony", "response"],
  "response.failed": ["harmony", "response"],
  "response.output_item.added": ["item", "output_index"],
  "response.output_item.done": ["item", "output_index"],
  "response.content_part.added": ["content_index", "item_id", "output_index", "part"],
  "response.content_part.done": ["content_index", "item_id", "output_index", "part"],
  "response.reasoning_text.delta": ["content_index", "delta", "item_id", "output_index"],
  "response.reasoning_text.done": ["content_index", "item_id", "output_index", "text"],
  "response.output_text.delta": ["content_index", "delta", "item_id", "logprobs", "output_index"],
  "response.output_text.done": ["content_index", "item_id", "logprobs", "output_index", "text"],
  "response.function_call_arguments.delta": ["delta", "item_id", "output_index"],
  "response.function_call_arguments.done": ["arguments", "item_id", "name", "output_index"],
};
const ITEM_KEYS: Record<string, string[]> = {
  reasoning: ["content", "id", "status", "summary", "type"],
  message: ["content", "id", "phase", "role", "status", "type"],
  function_call: ["arguments", "call_id", "id", "name", "status", "type"],
};
const RESPONSE_KEYS = [
  "created_at",
  "error",
  "id",
  "incomplete_details",
  "instructions",
  "metadata",
  "model",
  "object",
  "output",
  "output_text",
  "parallel_tool_calls",
  "status",
  "temperature",
  "tool_choice",
  "tools",
  "top_p",
].sort();

/** Replays a Responses stream and checks its grammar: ids, indexes, order, deltas vs dones, the final response. */
function checkResponsesStream(events: ResponseStreamEvent[]): OAIResponse {
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  expect(events[0]!.type).toBe("response.created");
  expect(events[1]!.type).toBe("response.in_progress");
  const terminal = events.at(-1)!;
  expect(["response.completed", "response.incomplete", "response.failed"]).toContain(terminal.type);
  const items: { id: string; type: string; text: string; partOpen: boolean; done: boolean; final?: unknown }[] = [];
  const byId = (id: string, outputIndex: number) => {
    const it = items[outputIndex];
    expect(it, `item at ${outputIndex}`).toBeDefined();
    expect(it!.id).toBe(id);
    expect(it!.done).toBe(false);
    return it!;
  };
  for (const [i, e] of events.entries()) {
    expect(keys(e)).toEqual([...EVENT_KEYS[e.type]!, "sequence_number", "type"].sort());
    switch (e.type) {
      case "response.created":
      case "response.in_progress":
        expect(i).toBeLessThan(2);
        expect(keys(e.response)).toEqual(RESPONSE_KEYS);
        expect(e.response.status).toBe("in_progress");
        expect(e.response.output).toEqual([]);
        break;
      case "response.output_item.added": {
        expect(e.output_index).toBe(items.length);
        expect(items.every((x) => x.done)).toBe(true); // one item at a time
        expect(keys(e.item)).toEqual(ITEM_KEYS[e.item.type]!);
        expect(items.some((x) => x.id === e.item.id)).toBe(false);
        if (e.item.type === "message") {
          expect(e.item.status).toBe("in_progress");
          expect(e.item.content).toEqual([]);
          expect(e.item.role).toBe("assistant");
        } else if (e.item.type === "reasoning") {
          expect(e.item.content).toEqual([]);
          expect(e.item.summary).toEqual([]);
          expect(e.item.id).toMatch(/^rs_/);
        } else if (e.item.type === "function_call") {
          expect(e.item.arguments).toBe("");
          expect(e.item.status).toBe("in_progress");
          expect(e.item.id).toMatch(/^fc_/);
        } else throw new Error(`unexpected item ${e.item.type}`);
        items.push({ id: e.item.id!, type: e.item.type, text: "", partOpen: false, done: false });
        break;
      }
      case "response.content_part.added": {
        const it = byId(e.item_id, e.output_index);
        expect(e.content_index).toBe(0);
        expect(it.partOpen).toBe(false);
        expect(e.part).toEqual(
          it.type === "reasoning" ? { type: "reasoning_text", text: "" } : { type: "output_text", text: "", annotations: [], logprobs: [] },
        );
        it.partOpen = true;
        break;
      }
      case "response.reasoning_text.delta":
      case "response.output_text.delta": {
        const it = byId(e.item_id, e.output_index);
        expect(it.type).toBe(e.type === "response.reasoning_text.delta" ? "reasoning" : "message");
        expect(it.partOpen).toBe(true);
        expect(e.delta).not.toBe("");
        it.text += e.delta;
        break;
      }
      case "response.function_call_arguments.delta": {
        const it = byId(e.item_id, e.output_index);
        expect(it.type).toBe("function_call");
        it.text += e.delta;
        break;
      }
      case "response.reasoning_text.done":
      case "response.output_text.done":
        expect(e.text).toBe(byId(e.item_id, e.output_index).text);
        break;
      case "response.function_call_arguments.done":
        expect(e.arguments).toBe(byId(e.item_id, e.output_index).text);
        break;
      case "response.content_part.done": {
        const it = byId(e.item_id, e.output_index);
        expect(it.partOpen).toBe(true);
        expect(events[i - 1]!.type).toMatch(/\.done$/);
        expect(e.part).toEqual(
          it.type === "reasoning"
            ? { type: "reasoning_text", text: it.text }
            : { type: "output_text", text: it.text, annotations: [], logprobs: [] },
        );
        it.partOpen = false;
        break;
      }
      case "response.output_item.done": {
        const it = byId(e.item.id!, e.output_index);
        expect(it.partOpen).toBe(false);
        expect(keys(e.item)).toEqual(ITEM_KEYS[e.item.type]!);
        expect(e.item.type).toBe(it.type);
        if (e.item.type === "message")
          expect(e.item.content).toEqual([{ type: "output_text", text: it.text, annotations: [], logprobs: [] }]);
        if (e.item.type === "reasoning") expect(e.item.content).toEqual([{ type: "reasoning_text", text: it.text }]);
        if (e.item.type === "function_call") expect(e.item.arguments).toBe(it.text);
        it.done = true;
        it.final = e.item;
        break;
      }
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
        expect(i).toBe(events.length - 1);
        break;
      default:
        throw new Error(`unexpected event ${e.type}`);
    }
  }
  expect(items.every((x) => x.done)).toBe(true);
  const response = (terminal as { response: OAIResponse }).response;
  expect(response.output).toEqual(items.map((x) => x.final));
  expect(response.output_text).toBe(
    items
      .filter((x) => x.type === "message")
      .map((x) => x.text)
      .join(""),
  );
  expect(response.status).toBe(
    terminal.type === "response.completed" ? "completed" : terminal.type === "response.incomplete" ? "incomplete" : "failed",
  );
  return response;
}

// ------------------------------------------------------------------ feeding the openai package

function bytesStream(text: string, piece = 7): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(ctrl) {
      if (at >= bytes.length) return ctrl.close();
      ctrl.enqueue(bytes.slice(at, at + piece)); // pieces split lines and characters
      at += piece;
    },
  });
}

const jsonLines = (items: object[]) => items.map((x) => JSON.stringify(x) + "\n").join("");
const sseChat = (chunks: object[]) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
const sseResponses = (events: ResponseStreamEvent[]) => events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");

/** A real client whose fetch answers every request with `body` as an SSE stream. */
function mockClient(body: string, seen: string[]): OpenAI {
  return new OpenAI({
    apiKey: "sk-test",
    baseURL: "http://harmony.invalid/v1",
    maxRetries: 0,
    fetch: async (url) => {
      seen.push(new URL(String(url instanceof Request ? url.url : url)).pathname);
      return new Response(bytesStream(body, 11), { status: 200, headers: { "content-type": "text/event-stream" } });
    },
  });
}

/** The SDK helpers add `parsed` / `parsed_arguments` / `output_parsed` (null without parse params). */
function stripParsed<T>(v: T): T {
  return JSON.parse(
    JSON.stringify(v, (k, x) => (k === "parsed" || k === "parsed_arguments" || k === "output_parsed" ? undefined : x)),
  ) as T;
}

function chatView(c: ChatCompletion) {
  return {
    id: c.id,
    object: c.object,
    created: c.created,
    model: c.model,
    usage: c.usage,
    choices: c.choices.map((ch) => ({
      index: ch.index,
      finish_reason: ch.finish_reason,
      logprobs: ch.logprobs,
      message: { role: ch.message.role, content: ch.message.content, refusal: ch.message.refusal, tool_calls: ch.message.tool_calls },
    })),
  };
}

// ------------------------------------------------------------------ tests

describe("openai.chat", () => {
  for (const s of SCENARIOS) {
    test(s.name, () => {
      const events = parse(s.text, "whole", s.end);
      const chunks = chatChunks(events);
      checkChatChunks(chunks);
      const folded = foldChat(chunks);
      expect(folded).toEqual({
        content: s.expected.content,
        reasoning: s.expected.reasoning,
        calls: s.expected.calls,
        finish: s.expected.chatFinish,
      });

      const completion = accumulate(events);
      const typed: ChatCompletion = completion; // the official type
      expect(typed.object).toBe("chat.completion");
      expect(completion).toEqual({
        id: CHAT.id,
        object: "chat.completion",
        created: CHAT.created,
        model: CHAT.model,
        choices: [
          {
            index: 0,
            finish_reason: s.expected.chatFinish,
            logprobs: null,
            message: {
              role: "assistant",
              content: s.expected.content,
              refusal: null,
              reasoning: s.expected.reasoning,
              ...(s.expected.calls.length > 0
                ? {
                    tool_calls: s.expected.calls.map((c) => ({
                      id: c.id,
                      type: "function",
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  }
                : {}),
            },
          },
        ],
      });
    });
  }

  test("one token per write, random chunks and whole writes give the same result", () => {
    for (const s of SCENARIOS) {
      const whole = chatChunks(parse(s.text, "whole", s.end));
      for (const chunking of ["token", "random"] as const) {
        for (const seed of [1, 2, 3]) {
          const events = parse(s.text, chunking, s.end, seed);
          const chunks = chatChunks(events);
          checkChatChunks(chunks);
          expect(foldChat(chunks), `${s.name} ${chunking}`).toEqual(foldChat(whole));
          expect(accumulate(events)).toEqual(accumulate(parse(s.text, "whole", s.end)));
          if (chunking === "token") expect(chunks.length).toBeGreaterThanOrEqual(whole.length);
        }
      }
    }
  });

  test("reasoning_content field, choice index, usage chunk", () => {
    const s = SCENARIOS[1]!;
    const events = parse(s.text, "token");
    const opts = { reasoningField: "reasoning_content", choiceIndex: 2, promptTokens: 40 } as const;
    const chunks = chatChunks(events, opts);
    expect(chunks.every((c) => c.choices.every((ch) => ch.index === 2))).toBe(true);
    expect(chunks.some((c) => "reasoning" in (c.choices[0]?.delta ?? {}))).toBe(false);
    expect(foldChat(chunks, "reasoning_content").reasoning).toBe(s.expected.reasoning);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    const done = events.at(-1)!;
    expect(done.type).toBe("done");
    const tokens = done.type === "done" ? done.tokens : -1;
    const reasoning = done.type === "done" ? done.reasoning_tokens : -1;
    expect(reasoning).toBeGreaterThan(0);
    expect(usage.usage).toEqual({
      prompt_tokens: 40,
      completion_tokens: tokens,
      total_tokens: 40 + tokens,
      completion_tokens_details: { reasoning_tokens: reasoning },
    });
    const c = accumulate(events, opts);
    expect(c.choices[0]!.index).toBe(2);
    expect(c.choices[0]!.message.reasoning_content).toBe(s.expected.reasoning);
    expect("reasoning" in c.choices[0]!.message).toBe(false);
    expect(c.usage).toEqual(usage.usage);
  });

  test("options: commentary and built-in tools routing, tool call ids", () => {
    const b = SCENARIOS[1]!;
    expect(foldChat(chatChunks(parse(b.text, "whole"), { commentary: "reasoning" }))).toMatchObject({
      content: null,
      reasoning: "Need the weather in Oslo and Paris.Checking both cities.",
    });
    expect(foldChat(chatChunks(parse(b.text, "whole"), { commentary: "drop" })).content).toBeNull();
    const ids = foldChat(chatChunks(parse(b.text, "whole"), { toolCallId: (e) => `call_req42_${e.call_index}` })).calls.map((c) => c.id);
    expect(ids).toEqual(["call_req42_0", "call_req42_1"]);
    const builtin = SCENARIOS[2]!;
    expect(foldChat(chatChunks(parse(builtin.text, "whole"), { builtinTools: "drop" })).reasoning).toBe("Search first.");
    // a function call after a built-in call gets tool index 0
    const mixed =
      "<|channel|>analysis to=python code<|message|>1+1<|call|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>";
    const f = foldChat(chatChunks(parse(mixed, "token")));
    expect(f).toEqual({ content: null, reasoning: "1+1", calls: [{ id: "call_1", name: "f", arguments: "{}" }], finish: "tool_calls" });
  });

  test("finish reasons; error and other events; nothing after done", () => {
    expect(chatFinishReason("stop", 0)).toBe("stop");
    expect(chatFinishReason("stop", 1)).toBe("tool_calls");
    expect(chatFinishReason("tool_calls", 0)).toBe("stop");
    expect(chatFinishReason("tool_calls", 2)).toBe("tool_calls");
    expect(chatFinishReason("length", 0)).toBe("length");
    expect(chatFinishReason("abort", 1)).toBe("length");
    expect(chatFinishReason("error", 0)).toBe("length");
    const a = new ChatCompletionChunkAdapter(CHAT);
    const evs: HarmonyEvent[] = [
      { type: "message_start", index: 0, role: "functions.x", name: null, channel: null, recipient: "assistant", content_type: null },
      { type: "delta", index: 0, kind: "other", text: "tool output" },
      { type: "message_end", index: 0, stop: "end" },
      { type: "recovery", at: 3, kind: "junk_text", detail: "x", raw: "junk" },
      { type: "error", code: "worker_crashed", message: "the worker died", at: 4, token: null },
      { type: "done", finish_reason: "error", tokens: 5, messages: 1, recoveries: 1, reasoning_tokens: 0 },
    ];
    const out = evs.flatMap((e) => a.push(e));
    // the repairs by kind ride along, for the front's log
    expect(out.at(-2)!.harmony).toEqual({ reasoning_tokens: 0, repairs: { junk_text: 1 } });
    expect(out.filter((c) => !c.harmony).map((c) => c.choices[0]!.delta)).toEqual([{ role: "assistant", content: "" }, {}]);
    expect(out.at(-1)!.choices[0]!.finish_reason).toBe("length");
    expect(a.harmonyFinishReason).toBe("error");
    expect(a.errors.map((e) => e.code)).toEqual(["worker_crashed"]);
    expect(a.push({ type: "delta", index: 1, kind: "content", text: "late" })).toEqual([]);
    expect(() => new ChatCompletionAccumulator(CHAT).result()).toThrow(/not finished/);
    // start() sends the role chunk early, once
    const b = new ChatCompletionChunkAdapter(CHAT);
    expect(b.start()).toHaveLength(1);
    expect(b.start()).toEqual([]);
    expect(b.push({ type: "delta", index: 0, kind: "content", text: "x" }).map((c) => c.choices[0]!.delta)).toEqual([{ content: "x" }]);
  });

  test("deterministic: same events, same chunks", () => {
    const s = SCENARIOS[1]!;
    const events = parse(s.text, "random", "eos", 9);
    expect(JSON.stringify(chatChunks(events))).toBe(JSON.stringify(chatChunks(events)));
  });

  describe("through the openai package", () => {
    for (const s of SCENARIOS) {
      test(`ChatCompletionStream.fromReadableStream: ${s.name}`, async () => {
        const events = parse(s.text, "token", s.end);
        const chunks = chatChunks(events, { promptTokens: 12 });
        const stream = ChatCompletionStream.fromReadableStream(bytesStream(jsonLines(chunks)));
        const seen: ChatCompletionChunk[] = [];
        for await (const c of stream) seen.push(c);
        expect(seen).toEqual(chunks);
        const final = await stream.finalChatCompletion();
        expect(stripParsed(chatView(final))).toEqual(stripParsed(chatView(accumulate(events, { promptTokens: 12 }))));
      });
    }

    test("OpenAI client with a custom fetch: chat.completions.create({stream: true}) and .stream()", async () => {
      for (const s of SCENARIOS) {
        for (const field of ["reasoning", "reasoning_content"] as const) {
          const events = parse(s.text, "random", s.end, 5);
          const chunks = chatChunks(events, { reasoningField: field });
          const paths: string[] = [];
          const client = mockClient(sseChat(chunks), paths);
          const params = { model: CHAT.model, messages: [{ role: "user" as const, content: "hi" }] };

          const raw = await client.chat.completions.create({ ...params, stream: true });
          const got: ChatCompletionChunk[] = [];
          for await (const c of raw) got.push(c);
          expect(got).toEqual(chunks); // SSE round trip through the client's decoder, byte pieces and all
          expect(foldChat(got, field)).toEqual({
            content: s.expected.content,
            reasoning: s.expected.reasoning,
            calls: s.expected.calls,
            finish: s.expected.chatFinish,
          });

          const helper = client.chat.completions.stream(params);
          let deltas = "";
          helper.on("content", (d) => (deltas += d));
          const final = await helper.finalChatCompletion();
          expect(deltas).toBe(s.expected.content ?? "");
          // The SDK's accumulator keeps content and tool_calls; it does not concatenate
          // non-standard delta fields (reasoning), so those are checked on the raw chunks above.
          expect(stripParsed(chatView(final))).toEqual(stripParsed(chatView(accumulate(events, { reasoningField: field }))));
          expect(paths).toEqual(["/v1/chat/completions", "/v1/chat/completions"]);
        }
      }
    });
  });
});

// ------------------------------------------------------------------ rule 12: the deltas add up to tool_call_end's arguments

/**
 * What streaming clients take a call's arguments from: the concatenated
 * `delta.tool_calls[].function.arguments` (the `openai` package's
 * ChatCompletionStream, node_modules/openai/src/lib/ChatCompletionStream.ts
 * `#accumulateChatCompletion`, and so runTools; the Agents SDK's
 * openai/openai-agents-js packages/agents-openai/src/openaiChatCompletionsStreaming.ts
 * @b85ec16a), and for Responses the concatenated
 * `response.function_call_arguments.delta`s until `.done` / `output_item.done`
 * replace them (the package's ResponseAccumulator; the AI SDK's
 * vercel/ai packages/openai/src/responses/openai-responses-language-model.ts
 * @cfffa85f streams the deltas as tool-input-delta and calls with
 * output_item.done's arguments).
 */
function responsesStreamedArgs(out: ResponseStreamEvent[]): string[] {
  const byItem = new Map<string, string>();
  for (const e of out) {
    if (e.type === "response.output_item.added" && e.item.type === "function_call") byItem.set(e.item.id!, "");
    if (e.type === "response.function_call_arguments.delta") byItem.set(e.item_id, byItem.get(e.item_id)! + e.delta);
  }
  return [...byItem.values()];
}

/**
 * The AI SDK's Chat model (vercel/ai packages/openai/src/chat/openai-chat-language-model.ts
 * @a9d55482, doStream): a call's deltas are concatenated, and the call is
 * made as soon as the text so far parses as JSON; later deltas of that call
 * are ignored, and a call that never parses is never made.
 */
function aiSdkChatCalls(chunks: ChatCompletionChunk[]): (string | null)[] {
  const calls: { args: string; made: string | null }[] = [];
  for (const c of chunks)
    for (const ch of c.choices)
      for (const t of ch.delta.tool_calls ?? []) {
        const call = (calls[t.index] ??= { args: "", made: null });
        if (call.made !== null) continue;
        call.args += t.function?.arguments ?? "";
        if (parsesAsJson(call.args)) call.made = call.args;
      }
  return calls.map((c) => c.made);
}

/** Each function call's whole arguments: tool_call_end's, or for a call cut short its deltas as generated. */
function intendedArgs(events: HarmonyEvent[]): string[] {
  const calls = new Map<number, { raw: string; end: string | null }>();
  for (const e of events) {
    if (e.type === "tool_call_start" && e.namespace === "functions") calls.set(e.index, { raw: "", end: null });
    else if (e.type === "delta" && e.kind === "tool_args" && calls.has(e.index)) calls.get(e.index)!.raw += e.text;
    else if (e.type === "tool_call_end" && calls.has(e.index)) calls.get(e.index)!.end = e.arguments;
  }
  return [...calls.values()].map((c) => c.end ?? c.raw);
}

/** The same events with each call's tool_args deltas merged and cut again, at `cuts(raw)` (offsets into the call's text). */
function recut(events: HarmonyEvent[], cuts: (raw: string) => number[]): HarmonyEvent[] {
  const out: HarmonyEvent[] = [];
  // the call whose deltas are being merged (index -1: none)
  const pending = { index: -1, text: "" };
  const flush = () => {
    if (pending.index < 0) return;
    const { index, text } = pending;
    const at = [...new Set([0, ...cuts(text).filter((c) => c > 0 && c < text.length), text.length])].sort((a, b) => a - b);
    for (let i = 0; i + 1 < at.length; i++) out.push({ type: "delta", index, kind: "tool_args", text: text.slice(at[i], at[i + 1]) });
    pending.index = -1;
    pending.text = "";
  };
  for (const e of events) {
    if (e.type === "delta" && e.kind === "tool_args") {
      if (pending.index !== e.index) flush();
      pending.index = e.index;
      pending.text += e.text;
      continue;
    }
    flush();
    out.push(e);
  }
  flush();
  return out;
}

/**
 * Both APIs, streamed and not: every function call's streamed arguments are
 * its whole arguments (JSON where tool_call_end says so). `shapes`: also the
 * streams' shape checks (slow: an expect per chunk).
 */
function expectStreamedWhole(events: HarmonyEvent[], label: string, shapes = true): string[] {
  const want = intendedArgs(events);
  const chunks = chatChunks(events);
  if (shapes) checkChatChunks(chunks);
  const { out, final } = responseEvents(events);
  if (shapes) checkResponsesStream(out); // .done and output_item.done carry what the deltas add up to
  const got = {
    chat: foldChat(chunks).calls.map((c) => c.arguments),
    accumulated: accumulate(events).choices[0]!.message.tool_calls?.map((c) => c.function.arguments) ?? [],
    responses: responsesStreamedArgs(out),
    done: out.flatMap((e) => (e.type === "response.function_call_arguments.done" ? [e.arguments] : [])),
    output: final.output.flatMap((i) => (i.type === "function_call" ? [i.arguments] : [])),
  };
  const same = Object.values(got).every((v) => v.length === want.length && v.every((a, i) => a === want[i]));
  if (!same) expect({ label, ...got }).toEqual({ label, chat: want, accumulated: want, responses: want, done: want, output: want });
  for (const e of events)
    if (e.type === "tool_call_end" && e.valid_json && !parsesAsJson(e.arguments)) expect.fail(`${label}: ${e.arguments} is not JSON`);
  return want;
}

describe("rule 12: a streamed call's deltas add up to tool_call_end's arguments, repaired where a known broken shape applies", () => {
  const CALL =
    "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  // the shapes of real gpt-oss outputs (test/fixtures/realworld/) and of the load tester's faults (args_over_escaped,
  // args_fenced, args_trailing_junk in src/loadtest/generate.ts); missing closers end the stream, the others <|call|>
  const SHAPES: { shape: string; args: string; repaired: string; close: string }[] = [
    { shape: "over_escaped", args: '{\\"location\\":\\"Kraków\\"}', repaired: '{"location":"Kraków"}', close: "<|call|>" },
    { shape: "over_escaped", args: '{\\"url\\":\\"https://example.com\\"}', repaired: '{"url":"https://example.com"}', close: "<|call|>" },
    {
      shape: "code_fence",
      args: '```json\n{"location": "Zürich", "unit": "celsius"}\n```',
      repaired: '{"location": "Zürich", "unit": "celsius"}',
      close: "<|call|>",
    },
    { shape: "json_prefix", args: 'json{"location":"Kraków"}', repaired: '{"location":"Kraków"}', close: "<|call|>" },
    { shape: "trailing_text", args: '{"location":"Kraków"} commentary', repaired: '{"location":"Kraków"}', close: "<|call|>" },
    { shape: "trailing_text", args: '{\n  "location": "Kraków"\n}\n}', repaired: '{\n  "location": "Kraków"\n}', close: "<|call|>" },
    {
      shape: "missing_closers",
      args: '{"location":{"city":"Kraków","country":"PL"',
      repaired: '{"location":{"city":"Kraków","country":"PL"}}',
      close: "",
    },
  ];

  for (const { shape, args, repaired, close } of SHAPES) {
    const text = CALL + args + close;
    const label = `${shape} ${JSON.stringify(args)}`;

    test(`${label}: Chat and Responses, written 1 to n tokens at a time`, () => {
      const ids = harmony().enc.encode(text);
      for (let step = 1; step <= ids.length; step++) {
        const p = new HarmonyParser(harmony().vocab, { afterStop: "parse" });
        const events: HarmonyEvent[] = [];
        for (let i = 0; i < ids.length; i += step) events.push(...p.write(ids.slice(i, i + step)));
        events.push(...p.end());
        const end = events.find((e) => e.type === "tool_call_end");
        expect(end).toMatchObject({ arguments: repaired, valid_json: true });
        expect(events.find((e) => e.type === "recovery" && e.kind === "arguments_repaired")).toMatchObject({ raw: args });
        expect(expectStreamedWhole(events, `${label}, ${step} tokens a write`)).toEqual([repaired]);
      }
    });

    test(`${label}: the arguments cut into deltas of every size`, () => {
      const events = parse(text, "whole");
      for (let size = 1; size <= args.length; size++) {
        const cut = recut(events, (raw) => Array.from({ length: Math.ceil(raw.length / size) }, (_, i) => i * size));
        expect(cut.filter((e) => e.type === "delta" && e.kind === "tool_args")).toHaveLength(Math.ceil(args.length / size));
        expect(expectStreamedWhole(cut, `${label}, ${size} characters a delta`)).toEqual([repaired]);
      }
    });

    test(`${label}: the call's first chunk (id, name) is not held`, () => {
      const chat = new ChatCompletionChunkAdapter(CHAT);
      const resp = new ResponsesStreamAdapter(RESP);
      for (const e of parse(text, "token")) {
        const chunks = chat.push(e);
        const out = resp.push(e);
        if (e.type !== "tool_call_start") continue;
        expect(chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []))).toEqual([
          { index: 0, id: "call_0", type: "function", function: { name: "get_weather", arguments: "" } },
        ]);
        expect(out.find((x) => x.type === "response.output_item.added")).toMatchObject({
          item: { type: "function_call", name: "get_weather" },
        });
      }
    });
  }

  test("any JSON, any broken shape of it, cut anywhere: both APIs stream tool_call_end's arguments (property)", () => {
    const value = fc.oneof(
      fc.object().map((v) => JSON.stringify(v)),
      fc.object().map((v) => JSON.stringify(v, null, 2)),
      fc.array(fc.jsonValue()).map((v) => JSON.stringify(v)),
    );
    const shaped = fc
      .tuple(value, fc.constantFrom("none", "escaped", "fence", "word", "junk", "closers", "mutated"), fc.nat())
      .map(([j, shape, n]) => {
        switch (shape) {
          case "escaped":
            return JSON.stringify(j).slice(1, -1);
          case "fence":
            return "```json\n" + j + "\n```";
          case "word":
            return "json" + j;
          case "junk":
            return j + ["}", " }", "\n}", " commentary"][n % 4]!;
          case "closers":
            return j.replace(/[\]}\s]+$/, "");
          case "mutated": {
            const k = n % (j.length + 1);
            return j.slice(0, k) + ["\\", '"', "}", ",", " ", "x"][n % 6]! + j.slice(k);
          }
          default:
            return j;
        }
      })
      .filter((a) => !a.includes("<|")); // text, never a special token's
    fc.assert(
      fc.property(shaped, fc.boolean(), fc.array(fc.nat(), { maxLength: 10 }), (args, call, raw) => {
        const events = parse(CALL + args + (call ? "<|call|>" : ""), "whole");
        const cut = recut(events, (t) => raw.map((c) => c % (t.length + 1)));
        const ends = cut.filter((e) => e.type === "tool_call_end");
        const want = expectStreamedWhole(cut, JSON.stringify(args));
        if (ends.length === 1) expect(want).toEqual([ends[0]!.arguments]);
      }),
      fcParams(300),
    );
  });

  test("every case of the conformance corpus and of the real-world outputs: the same, written 1 and 3 tokens at a time", () => {
    const { enc, vocab } = harmony();
    const corpus: { id: string; ids: number[]; role: string | null; tools: string[] | null }[] = [
      ...[...loadJsonl("wellformed.jsonl"), ...loadJsonl("malformed.jsonl")].map((c) => ({
        id: c.id,
        ids: c.tokens,
        role: c.role,
        tools: null,
      })),
      ...readFileSync(`${FIXTURES}realworld/cases.jsonl`, "utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as { id: string; text: string; after_prompt: boolean; expected: { calls: { recipient: string }[] } })
        .map((c) => {
          const tools = c.expected.calls.map((k) => k.recipient.replace(/^functions\./, "")).filter((n) => !n.includes("."));
          return { id: c.id, ids: enc.encode(c.text), role: c.after_prompt ? "assistant" : null, tools: tools.length > 0 ? tools : null };
        }),
    ];
    let calls = 0;
    let repaired = 0;
    for (const c of corpus)
      for (const step of [1, 3]) {
        const p = new HarmonyParser(vocab, { role: c.role, tools: c.tools });
        const events: HarmonyEvent[] = [];
        for (let i = 0; i < c.ids.length; i += step) events.push(...p.write(c.ids.slice(i, i + step)));
        events.push(...p.end());
        calls += expectStreamedWhole(events, `${c.id}, ${step} tokens a write`, false).length;
        repaired += events.filter((e) => e.type === "recovery" && e.kind === "arguments_repaired").length;
      }
    expect(calls).toBeGreaterThan(100);
    expect(repaired).toBeGreaterThan(0);
  });

  test(`arguments past ${MAX_STREAMED_ARGUMENT_CHARS} characters and past tool_call_end's ${MAX_ARGUMENT_BYTES} bytes: the stream holds the tail, the cut falls after what it sent`, () => {
    const { enc, vocab } = harmony();
    for (const [label, args] of [
      ["JSON", `{"blob":"${"é".repeat(700_000)}"}`],
      ["over-escaped", `{\\"blob\\":\\"${"é".repeat(700_000)}\\"}`],
    ] as const) {
      const ids = enc.encode(CALL + args + "<|call|>");
      const p = new HarmonyParser(vocab);
      const events: HarmonyEvent[] = [];
      for (let i = 0; i < ids.length; i += 5000) events.push(...p.write(ids.slice(i, i + 5000)));
      events.push(...p.end());
      const end = events.find((e) => e.type === "tool_call_end")!;
      expect(end.type === "tool_call_end" && Buffer.byteLength(end.arguments) <= MAX_ARGUMENT_BYTES, label).toBe(true);
      expect(end.type === "tool_call_end" && end.arguments.length < args.length, label).toBe(true); // cut
      expect(expectStreamedWhole(events, label, false)).toEqual([end.type === "tool_call_end" ? end.arguments : ""]);
    }
  });

  describe("through the openai package", () => {
    const over = SHAPES[0]!;
    const text = CALL + over.args + over.close;
    const tools = [
      {
        type: "function" as const,
        function: { name: "get_weather", parameters: { type: "object", properties: { location: { type: "string" } } } },
      },
    ];

    test("ChatCompletionStream: the arguments done event and the final completion hold the repair", async () => {
      const chunks = chatChunks(parse(text, "token"));
      const stream = ChatCompletionStream.fromReadableStream(bytesStream(jsonLines(chunks)));
      const done: string[] = [];
      stream.on("tool_calls.function.arguments.done", (e) => done.push(e.arguments));
      const final = await stream.finalChatCompletion();
      expect(final.choices[0]!.message.tool_calls?.map((c) => (c.type === "function" ? c.function.arguments : ""))).toEqual([
        over.repaired,
      ]);
      expect(done).toEqual([over.repaired]);
    });

    test("runTools, streamed: the function is called with the repaired arguments, and they go back to the model", async () => {
      const answer = chatChunks(parse("<|channel|>final<|message|>It is 3 °C in Kraków.<|return|>", "token"));
      const bodies = [sseChat(chatChunks(parse(text, "random", "eos", 3))), sseChat(answer)];
      const sent: ChatCompletionCreateParams[] = [];
      const client = new OpenAI({
        apiKey: "sk-test",
        baseURL: "http://harmony.invalid/v1",
        maxRetries: 0,
        fetch: async (_url, init) => {
          sent.push(JSON.parse(String(init?.body)) as ChatCompletionCreateParams);
          const body = bodies[sent.length - 1]!;
          return new Response(bytesStream(body, 11), { status: 200, headers: { "content-type": "text/event-stream" } });
        },
      });
      const got: unknown[] = [];
      const runner = client.chat.completions.runTools({
        model: CHAT.model,
        messages: [{ role: "user", content: "Weather in Kraków?" }],
        stream: true,
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "The weather",
              parameters: tools[0]!.function.parameters,
              parse: JSON.parse,
              function: (a: unknown) => {
                got.push(a);
                return "3 °C";
              },
            },
          },
        ],
      });
      expect(await runner.finalContent()).toBe("It is 3 °C in Kraków.");
      expect(got).toEqual([{ location: "Kraków" }]);
      expect(sent).toHaveLength(2);
      const assistant = sent[1]!.messages.find((m): m is ChatCompletionAssistantMessageParam => m.role === "assistant");
      expect(assistant?.tool_calls?.[0]).toMatchObject({ type: "function", function: { arguments: over.repaired } });
    });

    test("the AI SDK's Chat model makes the call, with the repaired arguments, for every shape", () => {
      for (const s of SHAPES) {
        const chunks = chatChunks(parse(CALL + s.args + s.close, "random", "eos", 5));
        expect(aiSdkChatCalls(chunks), s.shape).toEqual([s.repaired]);
      }
    });

    test("ResponseStream: every delta's snapshot is a prefix of the repair, the last one the repair itself", async () => {
      const { out, final } = responseEvents(parse(text, "token"));
      const stream = ResponseStream.fromReadableStream(bytesStream(jsonLines(out)));
      const snapshots: string[] = [];
      stream.on("response.function_call_arguments.delta", (e) => snapshots.push(e.snapshot));
      const got = await stream.finalResponse();
      expect(stripParsed(got)).toEqual(final);
      expect(snapshots.length).toBeGreaterThan(0);
      for (const s of snapshots) expect(over.repaired.startsWith(s)).toBe(true);
      expect(snapshots.at(-1)).toBe(over.repaired);
      expect(got.output.find((i) => i.type === "function_call")).toMatchObject({ arguments: over.repaired });
    });
  });
});

describe("openai.responses", () => {
  for (const s of SCENARIOS) {
    test(s.name, () => {
      const { out, final } = responseEvents(parse(s.text, "whole", s.end));
      const response = checkResponsesStream(out);
      expect(response).toEqual(final);
      expect(out.at(-1)!.type).toBe(s.expected.terminal);
      expect(
        final.output.map((i) => [
          i.type,
          i.type === "function_call"
            ? i.arguments
            : i.type === "message"
              ? i.content.map((c) => (c.type === "output_text" ? c.text : "")).join("")
              : (i.type === "reasoning" ? (i.content ?? []) : []).map((c) => c.text).join(""),
          ...(i.type === "message" ? [i.phase] : []),
        ]),
      ).toEqual(s.expected.items);
      // all items but the last are complete; the last carries the stream's outcome
      expect(final.output.map((i) => (i as { status?: string }).status)).toEqual(
        final.output.map((_, k) => (k === final.output.length - 1 ? s.expected.itemStatus : "completed")),
      );
      const calls = final.output.filter((i) => i.type === "function_call");
      expect(calls.map((c) => ({ id: c.call_id, name: c.name, arguments: c.arguments }))).toEqual(s.expected.calls);
      expect(final.output.map((i) => i.id)).toEqual(
        final.output.map((i, k) => `${i.type === "reasoning" ? "rs" : i.type === "message" ? "msg" : "fc"}_test_${k}`),
      );
      expect(final).toMatchObject({ id: RESP.id, object: "response", created_at: RESP.created, model: RESP.model, error: null });
      if (s.end === "length") expect(final.incomplete_details).toEqual({ reason: "max_output_tokens" });
      else if (s.end === "abort") expect(final.incomplete_details).toEqual({});
      else expect(final.incomplete_details).toBeNull();
    });
  }

  test("one token per write, random chunks and whole writes give the same response", () => {
    const collapse = (evs: ResponseStreamEvent[]) => evs.map((e) => e.type).filter((t, i, a) => !(t.endsWith(".delta") && a[i - 1] === t));
    for (const s of SCENARIOS) {
      const whole = responseEvents(parse(s.text, "whole", s.end));
      for (const chunking of ["token", "random"] as const) {
        for (const seed of [1, 2, 3]) {
          const r = responseEvents(parse(s.text, chunking, s.end, seed));
          checkResponsesStream(r.out);
          expect(r.final).toEqual(whole.final);
          expect(collapse(r.out)).toEqual(collapse(whole.out));
        }
      }
    }
  });

  test("usage, echo, commentary / built-in options, failed stream", () => {
    const b = SCENARIOS[1]!;
    const events = parse(b.text, "token");
    const done = events.at(-1)!;
    const tokens = done.type === "done" ? done.tokens : -1;
    const reasoning = done.type === "done" ? done.reasoning_tokens : -1;
    expect(reasoning).toBeGreaterThan(0);
    const r = responseEvents(events, {
      promptTokens: 30,
      echo: { instructions: "be brief", temperature: 0.5, tool_choice: "required", metadata: { k: "v" } },
    });
    expect(r.final.usage).toEqual({
      input_tokens: 30,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: tokens,
      output_tokens_details: { reasoning_tokens: reasoning },
      total_tokens: 30 + tokens,
    });
    expect(r.final).toMatchObject({ instructions: "be brief", temperature: 0.5, tool_choice: "required", metadata: { k: "v" } });
    const first = r.out[0]!;
    expect(first.type === "response.created" && first.response.instructions).toBe("be brief");

    const asReasoning = responseEvents(parse(b.text, "whole"), { commentary: "reasoning" }).final;
    expect(asReasoning.output.map((i) => i.type)).toEqual(["reasoning", "reasoning", "function_call", "function_call"]);
    expect(asReasoning.output_text).toBe("");
    expect(responseEvents(parse(b.text, "whole"), { commentary: "drop" }).final.output.map((i) => i.type)).toEqual([
      "reasoning",
      "function_call",
      "function_call",
    ]);
    const builtin = SCENARIOS[2]!;
    expect(responseEvents(parse(builtin.text, "whole"), { builtinTools: "drop" }).final.output).toHaveLength(1);
    const ids = responseEvents(parse(b.text, "whole"), { toolCallId: (e) => `call_x${e.call_index}` }).final.output.flatMap((i) =>
      i.type === "function_call" ? [i.call_id] : [],
    );
    expect(ids).toEqual(["call_x0", "call_x1"]);

    // a worker crash: error + done(error) -> response.failed with the error
    const a = new ResponsesStreamAdapter(RESP);
    const evs: HarmonyEvent[] = [
      { type: "message_start", index: 0, role: "assistant", name: null, channel: "final", recipient: null, content_type: null },
      { type: "delta", index: 0, kind: "content", text: "Par" },
      { type: "error", code: "worker_crashed", message: "the worker thread died", at: 3, token: null },
      { type: "done", finish_reason: "error", tokens: 3, messages: 1, recoveries: 0, reasoning_tokens: 0 },
    ];
    const out = evs.flatMap((e) => a.push(e));
    const failed = checkResponsesStream(out);
    expect(out.at(-1)!.type).toBe("response.failed");
    expect(failed.status).toBe("failed");
    expect(failed.error).toEqual({ code: "server_error", message: "worker_crashed: the worker thread died" });
    expect(failed.output).toMatchObject([{ type: "message", status: "incomplete", content: [{ text: "Par" }] }]);
    expect(a.errors).toHaveLength(1);
    expect(a.push({ type: "delta", index: 0, kind: "content", text: "late" })).toEqual([]);
    // an empty stream still opens and closes a response
    const empty = new ResponsesStreamAdapter(RESP);
    const e2 = empty.push({ type: "done", finish_reason: "stop", tokens: 0, messages: 0, recoveries: 0, reasoning_tokens: 0 });
    expect(e2.map((e) => e.type)).toEqual(["response.created", "response.in_progress", "response.completed"]);
    expect(checkResponsesStream(e2).output).toEqual([]);
  });

  test("events never share objects (mutating one changes no other)", () => {
    const { out, final } = responseEvents(parse(SCENARIOS[0]!.text, "whole"));
    const before = JSON.stringify(out);
    for (const e of out) {
      if ("item" in e) (e.item as { id: string }).id = "mutated";
      if ("response" in e) e.response.output.length = 0;
    }
    expect(JSON.stringify(final)).not.toContain("mutated");
    expect(final.output).toHaveLength(2);
    expect(before).not.toContain("mutated");
  });

  describe("through the openai package", () => {
    for (const s of SCENARIOS) {
      test(`ResponseStream.fromReadableStream: ${s.name}`, async () => {
        const { out, final } = responseEvents(parse(s.text, "token", s.end));
        const stream = ResponseStream.fromReadableStream(bytesStream(jsonLines(out)));
        const seen: ResponseStreamEvent[] = [];
        for await (const e of stream) seen.push(e);
        expect(seen).toEqual(out);
        const got = await stream.finalResponse();
        expect(stripParsed(got)).toEqual(final);
      });
    }

    test("OpenAI client with a custom fetch: responses.create({stream: true}) and responses.stream()", async () => {
      for (const s of SCENARIOS) {
        const { out, final } = responseEvents(parse(s.text, "random", s.end, 7), { promptTokens: 9 });
        const paths: string[] = [];
        const client = mockClient(sseResponses(out), paths);
        const raw = await client.responses.create({ model: RESP.model, input: "hi", stream: true });
        const got: ResponseStreamEvent[] = [];
        for await (const e of raw) got.push(e);
        expect(got).toEqual(out);

        const helper = client.responses.stream({ model: RESP.model, input: "hi" });
        let text = "";
        let args = "";
        helper.on("response.output_text.delta", (e) => (text += e.delta));
        helper.on("response.function_call_arguments.delta", (e) => (args += e.delta));
        const snapshotChecks: boolean[] = [];
        helper.on("response.output_text.delta", (e) => snapshotChecks.push(e.snapshot.endsWith(e.delta)));
        const fin = await helper.finalResponse();
        expect(stripParsed(fin)).toEqual(final);
        expect(fin.output_text).toBe(final.output_text);
        expect(text).toBe(final.output_text);
        expect(args).toBe(s.expected.calls.map((c) => c.arguments).join(""));
        expect(snapshotChecks.every(Boolean)).toBe(true);
        expect(paths).toEqual(["/v1/responses", "/v1/responses"]);
      }
    });
  });
});
