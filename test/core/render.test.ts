/**
 * The renderer against openai-harmony's own expected renderings
 * (test/fixtures/conformance/reference-test-data/, the upstream `test-data/`),
 * the replay rules of HARMONY.md §5, the OpenAI request conversion, and a
 * render → tokenise → parse round trip.
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { HarmonyParser } from "../../src/core/parser.js";
import type { HarmonyEvent, ReferenceMessage } from "../../src/core/events.js";
import {
  browserToolNamespace,
  developerContent,
  functionsNamespace,
  piecesToText,
  piecesToTokens,
  pythonToolNamespace,
  renderConversation,
  renderConversationForCompletion,
  renderConversationForCompletionPieces,
  renderConversationForTraining,
  renderConversationPieces,
  renderMessage,
  renderMessagePieces,
  RenderError,
  replayIndices,
  systemContent,
  type HarmonyMessage,
  type RenderConversationOptions,
  type RenderPiece,
} from "../../src/core/render.js";
import { missingReasoning, renderRequest } from "../../src/openai/render.js";
import { fromOpenAIRequest, type OpenAIChatRequest } from "../../src/openai/request.js";
import { jsonSchemaToTypeScript } from "../../src/core/schema-ts.js";
import { harmony } from "../helpers.js";

const { enc, vocab } = harmony();

/** As the upstream tests read them: CRLF → LF, trailing whitespace trimmed. */
function expected(file: string): string {
  return readFileSync(new URL(`../fixtures/conformance/reference-test-data/${file}`, import.meta.url), "utf8")
    .replace(/\r\n/g, "\n")
    .trimEnd();
}

const IDENTITY = "You are ChatGPT, a large language model trained by OpenAI.";
const sys = (o: Parameters<typeof systemContent>[0] = {}): HarmonyMessage => ({ role: "system", content: systemContent(o) });
const user = (text: string): HarmonyMessage => ({ role: "user", content: text });
const analysis = (text: string): HarmonyMessage => ({ role: "assistant", channel: "analysis", content: text });
const final = (text: string): HarmonyMessage => ({ role: "assistant", channel: "final", content: text });

// ---------------------------------------------------------------------------
// The upstream test conversations, one per expected rendering
// ---------------------------------------------------------------------------

type Case = {
  file: string;
  messages: HarmonyMessage[];
  /** completion (render_conversation_for_completion, next role assistant) or plain render. */
  completion: boolean;
  options?: RenderConversationOptions;
};

const CAPITAL_Q = "What is the capital of the largest country in the world?";
const effortCases: Case[] = (["low", "medium", "high"] as const).flatMap((effort) => [
  {
    file: `test_simple_convo_${effort}_effort.txt`,
    completion: true,
    messages: [
      sys({ model_identity: IDENTITY, reasoning_effort: effort }),
      { role: "developer", content: developerContent({ instructions: "Answer the user's questions like a robot." }) },
      user(CAPITAL_Q),
    ],
  },
  {
    file: `test_simple_convo_${effort}_effort_no_instruction.txt`,
    completion: true,
    messages: [sys({ model_identity: IDENTITY, reasoning_effort: effort }), user(CAPITAL_Q)],
  },
]);

const WEATHER_TOOL = {
  name: "lookup_weather",
  description:
    "Use this tool to lookup the weather in a given location. Call it with the parameter 'location', can be any textual description of a location.",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
};

const KITCHEN_TOOLS = [
  { name: "get_location", description: "Gets the location of the user." },
  {
    name: "get_current_weather",
    description: "Gets the current weather in the provided location.",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
        format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
      },
      required: ["location"],
    },
  },
  {
    name: "get_multiple_weathers",
    description: "Gets the current weather in the provided list of locations.",
    parameters: {
      type: "object",
      properties: {
        locations: {
          type: "array",
          items: { type: "string" },
          description: 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
        },
        format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
      },
      required: ["locations"],
    },
  },
  {
    name: "kitchensink",
    description: "A function with various complex schemas.",
    parameters: {
      description: "params object",
      type: "object",
      properties: {
        string: { type: "string", title: "STRING", description: "A string", examples: ["hello", "world"] },
        string_nullable: { type: "string", nullable: true, description: "A nullable string", default: "the default" },
        string_enum: { type: "string", enum: ["a", "b", "c"] },
        oneof_string_or_number: {
          oneOf: [
            { type: "string", default: "default_string_in_oneof" },
            { type: "number", description: "numbers can happen too" },
          ],
          description: "a oneof",
          default: 20,
        },
      },
    },
  },
];

const CASES: Case[] = [
  {
    file: "test_simple_convo.txt",
    completion: true,
    messages: [sys({ model_identity: IDENTITY }), user("What is 2 + 2?")],
  },
  ...effortCases,
  {
    file: "test_reasoning_system_message.txt",
    completion: true,
    messages: [
      sys({
        model_identity: IDENTITY,
        reasoning_effort: "medium",
        channel_config: { valid_channels: ["analysis", "final"], channel_required: true },
      }),
      user("What is 2 + 2?"),
    ],
  },
  {
    file: "test_reasoning_system_message_no_instruction.txt",
    completion: true,
    messages: [
      sys({
        model_identity: IDENTITY,
        reasoning_effort: "high",
        channel_config: { valid_channels: ["analysis", "final"], channel_required: true },
      }),
      user("What is the best place to eat candy in the world?"),
    ],
  },
  {
    file: "test_reasoning_system_message_with_dates.txt",
    completion: true,
    messages: [
      sys({
        model_identity: IDENTITY,
        reasoning_effort: "medium",
        conversation_start_date: "2021-01-01",
        knowledge_cutoff: "2021-01",
        channel_config: { valid_channels: ["analysis", "final"], channel_required: true },
      }),
      user("What is 42 * pi?"),
    ],
  },
  {
    file: "test_render_functions_with_parameters.txt",
    completion: true,
    messages: [
      sys({ reasoning_effort: "high", conversation_start_date: "2025-06-28" }),
      {
        role: "developer",
        content: developerContent({
          instructions: "Always respond in riddles",
          tools: { functions: functionsNamespace(KITCHEN_TOOLS) },
        }),
      },
      user("What is the weather like in SF?"),
    ],
  },
  {
    file: "test_no_tools.txt",
    completion: true,
    messages: [sys({ conversation_start_date: "2025-06-28" })],
  },
  {
    file: "test_browser_tool_only.txt",
    completion: true,
    messages: [sys({ conversation_start_date: "2025-06-28", tools: { browser: browserToolNamespace() } })],
  },
  {
    file: "test_browser_and_function_tool.txt",
    completion: true,
    messages: [
      sys({ conversation_start_date: "2025-06-28", tools: { browser: browserToolNamespace() } }),
      { role: "developer", content: developerContent({ tools: { functions: functionsNamespace([WEATHER_TOOL]) } }) },
    ],
  },
  {
    file: "test_browser_and_python_tool.txt",
    completion: true,
    messages: [
      sys({
        conversation_start_date: "2025-06-28",
        // given in reverse: namespaces render in key order, as the reference's BTreeMap
        tools: { python: pythonToolNamespace(), browser: browserToolNamespace() },
      }),
    ],
  },
  {
    file: "test_dropping_cot_by_default.txt",
    completion: true,
    options: { autoDropAnalysis: true },
    messages: [
      user("What is 2 + 2?"),
      analysis("User asks: “What is 2 + 2?” Simple arithmetic. Provide answer."),
      final("2 + 2 equals 4."),
      user("What about 9 / 2?"),
    ],
  },
  {
    file: "test_does_not_drop_if_ongoing_analysis.txt",
    completion: true,
    options: { autoDropAnalysis: true },
    messages: [
      user("What is the weather in SF?"),
      analysis("User asks: “What is the weather in SF?” We need to use lookup_weather tool."),
      {
        role: "assistant",
        channel: "commentary",
        recipient: "functions.lookup_weather",
        content_type: "<|constrain|>json",
        content: '{"location": "San Francisco"}',
      },
      { role: "tool", name: "functions.lookup_weather", content: '{"temperature": 20, "description": "sunny"}' },
    ],
  },
  {
    file: "test_preserve_cot.txt",
    completion: true,
    options: { autoDropAnalysis: false },
    messages: [
      user("What is 2 + 2?"),
      analysis('User asks a simple question: "What is 2 + 2?" The answer: 4.'),
      final("2 + 2 equals 4."),
      user("What about 9 / 2?"),
    ],
  },
  {
    // Python's render_conversation(convo): default config, auto_drop_analysis on.
    file: "test_keep_analysis_between_finals.txt",
    completion: false,
    messages: [user("What is 2 + 2?"), analysis("thinking 2+2"), final("4"), user("What is 3 + 5?"), analysis("thinking 3+5"), final("8")],
  },
];

const PARSER_INPUTS = [
  "test_simple_reasoning_response.txt",
  "test_simple_tool_call.txt",
  "test_streamable_parser.txt",
  "test_tool_response_parsing.txt",
];

function render(c: Case, extra: RenderConversationOptions = {}): string {
  const o = { ...c.options, ...extra };
  return c.completion ? renderConversationForCompletion(c.messages, "assistant", o) : renderConversation(c.messages, o);
}

function renderPieces(c: Case, extra: RenderConversationOptions = {}): RenderPiece[] {
  const o = { ...c.options, ...extra };
  return c.completion ? renderConversationForCompletionPieces(c.messages, "assistant", o) : renderConversationPieces(c.messages, o);
}

describe("reference renderings (upstream test-data), byte for byte", () => {
  it("covers every render output in the folder", () => {
    const dir = new URL("../fixtures/conformance/reference-test-data/", import.meta.url);
    const files = readdirSync(dir)
      .filter((f) => f.endsWith(".txt"))
      .sort();
    const covered = [...CASES.map((c) => c.file), ...PARSER_INPUTS].sort();
    expect(covered).toEqual(files);
    expect(CASES).toHaveLength(19);
  });

  for (const c of CASES) {
    it(c.file, () => {
      expect(render(c)).toBe(expected(c.file));
    });
    it(`${c.file}: the reference's own drop rule gives the same`, () => {
      expect(render(c, { dropRule: "reference" })).toBe(expected(c.file));
    });
    it(`${c.file}: pieces tokenise to encode(text) and spell the text`, () => {
      const pieces = renderPieces(c);
      expect(piecesToText(pieces)).toBe(expected(c.file));
      expect(piecesToTokens(pieces, enc.encodeOrdinary)).toEqual(enc.encode(expected(c.file)));
    });
  }

  it("test_tool_response_parsing.txt: a tool result message, minus its <|end|>", () => {
    // The Python test renders this message, removes the last token and compares the text.
    const msg: HarmonyMessage = {
      role: "tool",
      name: "browser.search",
      recipient: "assistant",
      channel: "commentary",
      content: '{"result": "https://openai.com/"}',
    };
    const pieces = renderMessagePieces(msg);
    expect(pieces[pieces.length - 1]).toEqual({ special: "<|end|>" });
    expect(piecesToText(pieces.slice(0, -1))).toBe(expected("test_tool_response_parsing.txt"));
  });

  it("the completion prompt extends the plain rendering (test_render_and_render_conversation_roundtrip)", () => {
    const convo = [user("Hello")];
    expect(renderMessage(convo[0]!)).toBe(renderConversation(convo));
    expect(renderConversationForCompletion(convo)).toBe(`${renderConversation(convo)}<|start|>assistant`);
  });
});

// ---------------------------------------------------------------------------
// Replay rules (HARMONY.md §5)
// ---------------------------------------------------------------------------

describe("replay rules", () => {
  const call = (name: string, args: string): HarmonyMessage => ({
    role: "assistant",
    channel: "commentary",
    recipient: `functions.${name}`,
    content_type: "<|constrain|>json",
    content: args,
  });
  const result = (name: string, out: string): HarmonyMessage => ({
    role: "tool",
    name: `functions.${name}`,
    recipient: "assistant",
    channel: "commentary",
    content: out,
  });
  const kept = (messages: HarmonyMessage[], opts: Parameters<typeof replayIndices>[1]) =>
    replayIndices(messages, opts).map((i) => messages[i]!.content);

  it("a finished turn's analysis is dropped once a later turn follows its final", () => {
    const convo = [user("q1"), analysis("cot1"), final("a1"), user("q2")];
    const text = renderConversationForCompletion(convo);
    expect(text).not.toContain("cot1");
    expect(text).toBe(
      "<|start|>user<|message|>q1<|end|><|start|>assistant<|channel|>final<|message|>a1<|end|>" +
        "<|start|>user<|message|>q2<|end|><|start|>assistant",
    );
  });

  it("autoDropAnalysis: false keeps everything", () => {
    const convo = [user("q1"), analysis("cot1"), final("a1"), user("q2")];
    expect(renderConversationForCompletion(convo, "assistant", { autoDropAnalysis: false })).toContain("cot1");
  });

  it("the analysis of the turn in progress is kept while the last assistant message is a tool call", () => {
    const convo = [
      user("q1"),
      analysis("cot1"),
      final("a1"),
      user("q2"),
      analysis("cot2"),
      call("f", "{}"),
      result("f", "r1"),
      analysis("cot2b"),
      call("g", "{}"),
      result("g", "r2"),
    ];
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "a1", "q2", "cot2", "{}", "r1", "cot2b", "{}", "r2"]);
    const text = renderConversationForCompletion(convo);
    expect(text).toContain("<|start|>assistant<|channel|>analysis<|message|>cot2<|end|>");
    expect(text).toContain("<|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>{}<|call|>");
    expect(text).toContain("<|start|>functions.f to=assistant<|channel|>commentary<|message|>r1<|end|>");
    expect(text.endsWith("<|start|>functions.g to=assistant<|channel|>commentary<|message|>r2<|end|><|start|>assistant")).toBe(true);
  });

  it("once the tool-using turn produces a final and the user speaks, its analysis goes; its tool calls stay", () => {
    const convo = [user("q1"), analysis("cot1"), call("f", "{}"), result("f", "r1"), final("a1"), user("q2")];
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "{}", "r1", "a1", "q2"]);
  });

  it("every finished turn loses its analysis, not only the first (multi-turn)", () => {
    const convo = [user("q1"), analysis("c1"), final("a1"), user("q2"), analysis("c2"), final("a2"), user("q3")];
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "a1", "q2", "a2", "q3"]);
    // The reference's rule keeps c2 (it only cuts before the first final).
    expect(kept(convo, { forCompletion: true, dropRule: "reference" })).toEqual(["q1", "a1", "q2", "c2", "a2", "q3"]);
  });

  it("a pending tool call keeps only the analysis back to the previous final", () => {
    const convo = [user("q1"), analysis("c1"), final("a1"), user("q2"), analysis("c2"), call("f", "{}")];
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "a1", "q2", "c2", "{}"]);
    // The reference's rule drops nothing while the last assistant message is not a final.
    expect(kept(convo, { forCompletion: true, dropRule: "reference" })).toEqual(["q1", "c1", "a1", "q2", "c2", "{}"]);
  });

  it("a conversation ending in a final keeps that turn's analysis (plain render), drops it for a completion", () => {
    const convo = [user("q1"), analysis("c1"), final("a1")];
    expect(kept(convo, {})).toEqual(["q1", "c1", "a1"]);
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "a1"]);
    // The reference's rule drops c1 in both cases (the last assistant message is a final).
    expect(kept(convo, { dropRule: "reference" })).toEqual(["q1", "a1"]);
    expect(renderConversationForTraining(convo)).toContain("<|channel|>analysis<|message|>c1<|end|>");
  });

  it("built-in tool calls and results on the analysis channel count as chain of thought", () => {
    const convo: HarmonyMessage[] = [
      user("q1"),
      { role: "assistant", channel: "analysis", recipient: "python", content_type: "code", content: "print(1)" },
      { role: "tool", name: "python", recipient: "assistant", channel: "analysis", content: "1" },
      final("a1"),
      user("q2"),
    ];
    expect(kept(convo, { forCompletion: true })).toEqual(["q1", "a1", "q2"]);
  });

  it("a replayed final ends with <|end|>; training renders end with <|return|>", () => {
    const convo = [user("hi"), final("hello")];
    expect(renderConversation(convo)).toBe("<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>hello<|end|>");
    expect(renderConversationForTraining(convo)).toBe(
      "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>hello<|return|>",
    );
    expect(renderConversationForTraining([user("hi")])).toBe(renderConversation([user("hi")]));
  });
});

// ---------------------------------------------------------------------------
// Message and content details
// ---------------------------------------------------------------------------

describe("message rendering", () => {
  it("author names, recipients, bare content types", () => {
    expect(renderMessage({ role: "user", name: "alice", content: "x" })).toBe("<|start|>user:alice<|message|>x<|end|>");
    expect(renderMessage({ role: "assistant", recipient: "all", channel: "final", content: "x" })).toBe(
      "<|start|>assistant<|channel|>final<|message|>x<|call|>",
    );
    expect(
      renderMessage({ role: "assistant", channel: "analysis", recipient: "browser.search", content_type: "code", content: "{}" }),
    ).toBe("<|start|>assistant to=browser.search<|channel|>analysis code<|message|>{}<|call|>");
  });

  it("text that looks like a special token stays text in the pieces", () => {
    const msg: HarmonyMessage = { role: "user", content: "explain <|end|> and <|start|>" };
    const pieces = renderMessagePieces(msg);
    expect(pieces).toEqual([
      { special: "<|start|>" },
      { text: "user" },
      { special: "<|message|>" },
      { text: "explain <|end|> and <|start|>" },
      { special: "<|end|>" },
    ]);
    const ids = piecesToTokens(pieces, enc.encodeOrdinary);
    expect(ids.filter((id) => id >= 199998)).toEqual([200006, 200008, 200007]);
    expect(enc.encode(piecesToText(pieces)).filter((id) => id >= 199998).length).toBe(5);
  });

  it("errors are RenderError with a code", () => {
    const bad = (m: unknown) => {
      try {
        renderConversation([m as HarmonyMessage]);
      } catch (e) {
        expect(e).toBeInstanceOf(RenderError);
        return (e as RenderError).code;
      }
      return null;
    };
    expect(bad({ role: "tool", content: "x" })).toBe("tool_without_name");
    expect(bad({ role: "robot", content: "x" })).toBe("bad_message");
    expect(bad({ role: "user", content: systemContent() })).toBe("misplaced_content");
    expect(bad({ role: "system", content: developerContent() })).toBe("misplaced_content");
    expect(bad({ role: "user", content: 42 })).toBe("bad_content");
    expect(bad({ role: "system", content: systemContent({ reasoning_effort: "max" as "high" }) })).toBe("bad_content");
    expect(bad({ role: "user", content: "fine" })).toBe(null);
  });

  it("accepts the reference's capitalised effort and a content array", () => {
    const text = renderConversation([
      { role: "system", content: [systemContent({ reasoning_effort: "High", channel_config: null, knowledge_cutoff: null })] },
    ]);
    expect(text).toBe(`<|start|>system<|message|>${IDENTITY}\n\nReasoning: high<|end|>`);
  });
});

describe("JSON schema → TypeScript", () => {
  it("nested objects, arrays of objects, integer, type lists, nullable, no items, any", () => {
    const schema = {
      type: "object",
      properties: {
        user: {
          type: "object",
          description: "The user",
          properties: { id: { type: "integer" }, tags: { type: "array" } },
          required: ["id"],
        },
        points: { type: "array", items: { type: "object", properties: { x: { type: "number" } } } },
        mixed: { type: ["integer", "string", "null"] },
        maybe: { type: "number", nullable: true, default: 1.5 },
        free: {},
        flag: { type: "boolean", default: true },
        opts: { type: "object", default: { a: [1, "b"] } },
      },
      required: ["user"],
    };
    expect(jsonSchemaToTypeScript(schema)).toBe(
      [
        "{",
        "// The user",
        "user:     // The user",
        "{",
        "    id: number,",
        "    tags?: Array<any>,",
        "    },",
        "points?: {",
        "    x?: number,",
        "    }[],",
        "mixed?: number | string | null,",
        "maybe?: number | null, // default: 1.5",
        "free?: any,",
        "flag?: boolean, // default: true",
        "opts?: {",
        '    }, // default: {"a":[1,"b"]}',
        "}",
      ].join("\n"),
    );
  });

  it("top-level oneOf and property oneOf whose description repeats the first variant's", () => {
    expect(
      jsonSchemaToTypeScript({
        oneOf: [
          { type: "string", description: "a name", default: "x" },
          { type: "string", enum: ["a"], default: "a", nullable: true },
        ],
      }),
    ).toBe('\n | string // a name default: "x"\n | "a" | null // default: "a"');
    expect(
      jsonSchemaToTypeScript({
        type: "object",
        properties: {
          v: {
            description: "same",
            oneOf: [
              { type: "number", description: "same" },
              { type: "boolean", description: "other" },
            ],
          },
        },
        required: ["v"],
      }),
    ).toBe("{\nv:\n | number\n | boolean // other\n,\n}");
  });

  it("never throws on junk (null, strings, cycles, deep nesting)", () => {
    const cyclic: Record<string, unknown> = { type: "array" };
    cyclic.items = cyclic;
    for (const junk of [null, "x", 3, [], { type: 7 }, { properties: 1 }, { type: "object", properties: null }, cyclic]) {
      expect(typeof jsonSchemaToTypeScript(junk)).toBe("string");
    }
  });
});

// ---------------------------------------------------------------------------
// OpenAI request → Harmony
// ---------------------------------------------------------------------------

describe("fromOpenAIRequest", () => {
  const tools = [
    {
      type: "function" as const,
      function: {
        name: "lookup_weather",
        description: WEATHER_TOOL.description,
        parameters: WEATHER_TOOL.parameters,
      },
    },
  ];

  function convert(req: unknown, opts: Parameters<typeof fromOpenAIRequest>[1] = {}): HarmonyMessage[] {
    const r = fromOpenAIRequest(req, opts);
    if (!r.ok) throw new Error(`${r.error.code} at ${r.error.path}: ${r.error.message}`);
    return r.messages;
  }

  it("reproduces a reference rendering: system prompt → developer instructions", () => {
    const messages = convert({
      reasoning_effort: "low",
      messages: [
        { role: "system", content: "Answer the user's questions like a robot." },
        { role: "user", content: CAPITAL_Q },
      ],
    });
    expect(renderConversationForCompletion(messages)).toBe(expected("test_simple_convo_low_effort.txt"));
  });

  it("reproduces a reference rendering: function tools, no instructions, a date", () => {
    const messages = convert({ messages: [], tools }, { currentDate: "2025-06-28", builtinTools: { browser: true } });
    expect(renderConversationForCompletion(messages)).toBe(expected("test_browser_and_function_tool.txt"));
  });

  it("response_format: the reference's rendering, with the guide's Response Formats section ending the developer message", () => {
    // the reference renderer has no field for response formats: everything else is its rendering byte for byte,
    // and the section is the one openai/harmony docs/format.md ("Structured output") specifies
    const schema = { type: "object", properties: { items: { type: "array", items: { type: "string" } } }, required: ["items"] };
    const base = renderConversationForCompletion(
      convert({ messages: [], tools }, { currentDate: "2025-06-28", builtinTools: { browser: true } }),
    );
    expect(base).toBe(expected("test_browser_and_function_tool.txt"));
    const withFormat = renderConversationForCompletion(
      convert(
        {
          messages: [],
          tools,
          response_format: {
            type: "json_schema",
            json_schema: { name: "shopping_list", description: "Entries on the list.\nOne per line.", schema },
          },
        },
        { currentDate: "2025-06-28", builtinTools: { browser: true } },
      ),
    );
    const section = `\n\n# Response Formats\n\n## shopping_list\n\n// Entries on the list.\n// One per line.\n${JSON.stringify(schema)}`;
    const devEnd = base.indexOf("} // namespace functions") + "} // namespace functions".length;
    expect(withFormat).toBe(base.slice(0, devEnd) + section + base.slice(devEnd));
    // no tools, no instructions: a developer message of its own; json_object is the schema {"type":"object"}
    const plain = renderConversationForCompletion(
      convert({ messages: [{ role: "user", content: "hi" }], response_format: { type: "json_object" } }),
    );
    expect(plain).toContain('<|start|>developer<|message|># Response Formats\n\n## json_object\n\n{"type":"object"}<|end|><|start|>user');
    // text: nothing rendered
    const text = renderConversationForCompletion(
      convert({ messages: [{ role: "user", content: "hi" }], response_format: { type: "text" } }),
    );
    expect(text).not.toContain("developer");
  });

  it("response_format that is not usable is a bad_response_format naming the field", () => {
    const bad = (response_format: unknown) => fromOpenAIRequest({ messages: [], response_format });
    expect(bad("json")).toMatchObject({ ok: false, error: { code: "bad_response_format", path: "response_format" } });
    expect(bad({ type: "xml" })).toMatchObject({ ok: false, error: { code: "bad_response_format", path: "response_format.type" } });
    expect(bad({ type: "json_schema", json_schema: { name: "bad name\n<|end|>", schema: {} } })).toMatchObject({
      ok: false,
      error: { code: "bad_response_format", path: "response_format.json_schema.name" },
    });
    expect(bad({ type: "json_schema", json_schema: { name: "x", schema: [1] } })).toMatchObject({
      ok: false,
      error: { path: "response_format.json_schema.schema" },
    });
  });

  it("reproduces the ongoing-analysis rendering from tool_calls and a tool result", () => {
    for (const field of ["reasoning", "reasoning_content", "thinking"]) {
      const messages = convert({
        messages: [
          { role: "user", content: "What is the weather in SF?" },
          {
            role: "assistant",
            content: null,
            [field]: "User asks: “What is the weather in SF?” We need to use lookup_weather tool.",
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "lookup_weather", arguments: '{"location": "San Francisco"}' } },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: '{"temperature": 20, "description": "sunny"}' },
        ],
      });
      // Drop our system message; the reference file has none. Our tool result also
      // carries `to=assistant` on commentary (the format's documented form).
      const text = renderConversationForCompletion(messages.slice(1));
      expect(text).toBe(
        expected("test_does_not_drop_if_ongoing_analysis.txt").replace(
          "<|start|>functions.lookup_weather<|message|>",
          "<|start|>functions.lookup_weather to=assistant<|channel|>commentary<|message|>",
        ),
      );
    }
  });

  it("maps each reasoning field name, content to final, and drops finished CoT on replay", () => {
    for (const field of ["reasoning", "reasoning_content", "thinking"]) {
      const messages = convert({
        messages: [
          { role: "user", content: "What is 2 + 2?" },
          { role: "assistant", content: "2 + 2 equals 4.", [field]: "simple" },
          { role: "user", content: "What about 9 / 2?" },
        ],
      });
      expect(messages.slice(1)).toEqual([user("What is 2 + 2?"), analysis("simple"), final("2 + 2 equals 4."), user("What about 9 / 2?")]);
      expect(renderConversationForCompletion(messages.slice(1))).toBe(expected("test_dropping_cot_by_default.txt"));
    }
  });

  it("tool calls: preamble on commentary, several calls, ids mapped back to names, object arguments", () => {
    const messages = convert({
      tools,
      messages: [
        { role: "developer", content: [{ type: "text", text: "Be brief." }] },
        { role: "system", content: "Use metric." },
        {
          role: "user",
          content: [
            { type: "text", text: "Weather in " },
            { type: "text", text: "SF and NYC?" },
          ],
        },
        {
          role: "assistant",
          content: "Checking both.",
          reasoning_content: "two lookups",
          tool_calls: [
            { id: "a", type: "function", function: { name: "lookup_weather", arguments: '{"location":"SF"}' } },
            { id: "b", type: "function", function: { name: "lookup_weather", arguments: { location: "NYC" } } },
          ],
        },
        { role: "tool", tool_call_id: "b", content: "cloudy" },
        { role: "tool", tool_call_id: "a", content: [{ type: "text", text: "sunny" }] },
      ],
    });
    expect(messages[1]).toEqual({
      role: "developer",
      content: developerContent({
        instructions: "Be brief.\n\nUse metric.",
        tools: { functions: functionsNamespace([{ ...WEATHER_TOOL }]) },
      }),
    });
    expect(messages.slice(2)).toEqual([
      user("Weather in SF and NYC?"),
      analysis("two lookups"),
      { role: "assistant", channel: "commentary", content: "Checking both." },
      {
        role: "assistant",
        channel: "commentary",
        recipient: "functions.lookup_weather",
        content_type: "<|constrain|>json",
        content: '{"location":"SF"}',
      },
      {
        role: "assistant",
        channel: "commentary",
        recipient: "functions.lookup_weather",
        content_type: "<|constrain|>json",
        content: '{"location":"NYC"}',
      },
      { role: "tool", name: "functions.lookup_weather", recipient: "assistant", channel: "commentary", content: "cloudy" },
      { role: "tool", name: "functions.lookup_weather", recipient: "assistant", channel: "commentary", content: "sunny" },
    ]);
    const text = renderConversationForCompletion(messages);
    expect(text).toContain("Calls to these tools must go to the commentary channel: 'functions'.");
    expect(text).toContain("<|start|>developer<|message|># Instructions\n\nBe brief.\n\nUse metric.\n\n# Tools\n\n## functions\n");
    expect(text).toContain("<|start|>assistant<|channel|>analysis<|message|>two lookups<|end|>");
  });

  it("one turn sent as several assistant messages: the preamble stays commentary, the reasoning stays, none restored twice", () => {
    // the shape @openai/agents-openai 0.14.3 sends (itemsToMessages, dist/openaiChatCompletionsConverter.mjs: each
    // reasoning, message and function_call item of a turn an assistant message of its own), recorded through the front
    const call = { id: "c1", type: "function", function: { name: "lookup_weather", arguments: '{"location":"SF"}' } };
    const messages = [
      { role: "user", content: "Weather in SF?" },
      { role: "assistant", content: null, reasoning: "need the weather tool" },
      { role: "assistant", content: [{ type: "text", text: "Checking SF.", annotations: [] }] },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "sunny" },
    ];
    const callMsg = {
      role: "assistant",
      channel: "commentary",
      recipient: "functions.lookup_weather",
      content_type: "<|constrain|>json",
      content: '{"location":"SF"}',
    };
    const result = { role: "tool", name: "functions.lookup_weather", recipient: "assistant", channel: "commentary", content: "sunny" };
    expect(convert({ tools, messages }).slice(2)).toEqual([
      user("Weather in SF?"),
      analysis("need the weather tool"),
      { role: "assistant", channel: "commentary", content: "Checking SF." },
      callMsg,
      result,
    ]);
    // the answer's turn alike (its reasoning, then its text), then the user: no empty final, and the finished turns'
    // reasoning is dropped
    const answered = [
      ...messages,
      { role: "assistant", content: null, reasoning: "sunny, say so" },
      { role: "assistant", content: "Sunny." },
      { role: "user", content: "Thanks!" },
    ];
    expect(convert({ tools, messages: answered }).slice(2)).toEqual([
      user("Weather in SF?"),
      analysis("need the weather tool"),
      { role: "assistant", channel: "commentary", content: "Checking SF." },
      callMsg,
      result,
      analysis("sunny, say so"),
      final("Sunny."),
      user("Thanks!"),
    ]);
    // an assistant message with nothing said and no assistant message after it is still an (empty) final answer
    expect(
      convert({
        messages: [
          { role: "assistant", content: null, reasoning: "hm" },
          { role: "user", content: "?" },
        ],
      }).slice(1),
    ).toEqual([analysis("hm"), final(""), user("?")]);
    // the turn brought its reasoning back: the store is not asked for it (it would be rendered twice)
    const looked: string[] = [];
    const recall = (id: string) => (looked.push(id), "from the store");
    const r = renderRequest({ tools, messages }, { encodeOrdinary: enc.encodeOrdinary, recall });
    expect(looked).toEqual([]);
    expect(missingReasoning({ tools, messages })).toEqual([]);
    expect(r).toMatchObject({ ok: true, restored: [] });
    expect(r.ok && r.text.split("<|channel|>analysis").length - 1).toBe(1);
    // without the reasoning message, the call's reasoning is looked up and put back once, at the turn's start: the
    // prompt is the one the client would have got by sending it back
    const stateless = messages.filter((m) => !("reasoning" in m));
    expect(missingReasoning({ tools, messages: stateless })).toEqual(["c1"]);
    const r2 = renderRequest({ tools, messages: stateless }, { encodeOrdinary: enc.encodeOrdinary, recall });
    expect(r2).toMatchObject({ ok: true, restored: [{ tool_call_id: "c1", message_index: 1 }] });
    const sentBack = renderRequest({ tools, messages }, { encodeOrdinary: enc.encodeOrdinary });
    expect(r2.ok && sentBack.ok && r2.text).toBe(sentBack.ok && sentBack.text.replace("need the weather tool", "from the store"));
    // two call messages in one turn: the reasoning goes back once
    const twice = [...stateless.slice(0, 3), { role: "assistant", content: null, tool_calls: [{ ...call, id: "c2" }] }];
    const r3 = renderRequest({ tools, messages: twice }, { encodeOrdinary: enc.encodeOrdinary, recall: () => "from the store" });
    expect(r3).toMatchObject({ ok: true, restored: [{ tool_call_id: "c1", message_index: 1 }] });
    expect(r3.ok && r3.text.split("from the store").length - 1).toBe(1);
  });

  it("system content options: identity, cutoff, date, effort (request or option), python", () => {
    const [sysMsg] = convert(
      { messages: [{ role: "user", content: "hi" }], reasoning: { effort: "high" } },
      { modelIdentity: "You are Bob.", knowledgeCutoff: null, currentDate: "2030-01-02", builtinTools: { python: true } },
    );
    const text = renderMessage(sysMsg!);
    expect(
      text.startsWith("<|start|>system<|message|>You are Bob.\nCurrent date: 2030-01-02\n\nReasoning: high\n\n# Tools\n\n## python\n\n"),
    ).toBe(true);
    const [sys2] = convert({ messages: [], reasoning_effort: "minimal" }, { reasoningEffort: "high" });
    expect(renderMessage(sys2!)).toContain("Reasoning: low");
    const [sys3] = convert({ messages: [] }, { reasoningEffort: "high" });
    expect(renderMessage(sys3!)).toContain("Reasoning: high");
  });

  it("a function without parameters, or with an empty object schema, is `() => any`", () => {
    const messages = convert({
      messages: [],
      tools: [
        { type: "function", function: { name: "now", description: "Time." } },
        { type: "function", function: { name: "ping", parameters: { type: "object", properties: {}, additionalProperties: false } } },
      ],
    });
    const text = renderConversation(messages);
    expect(text).toContain("// Time.\ntype now = () => any;\n\ntype ping = () => any;\n\n} // namespace functions");
    const raw = convert(
      { messages: [], tools: [{ type: "function", function: { name: "ping", parameters: { type: "object" } } }] },
      { emptyParametersAsNoArgs: false },
    );
    expect(renderConversation(raw)).toContain("type ping = (_: {\n}) => any;");
  });

  it("a later system message becomes a developer message in place; legacy function results use `name`", () => {
    const messages = convert({
      messages: [
        { role: "user", content: "a" },
        { role: "system", content: "Now be formal." },
        { role: "function", name: "legacy", content: "42" },
      ],
    });
    expect(messages.slice(1)).toEqual([
      user("a"),
      { role: "developer", content: developerContent({ instructions: "Now be formal." }) },
      { role: "tool", name: "functions.legacy", recipient: "assistant", channel: "commentary", content: "42" },
    ]);
  });

  it("a legacy function_call is a tool call", () => {
    const messages = convert({
      messages: [{ role: "assistant", content: null, function_call: { name: "f", arguments: '{"a":1}' } }],
    });
    expect(messages.slice(1)).toEqual([
      { role: "assistant", channel: "commentary", recipient: "functions.f", content_type: "<|constrain|>json", content: '{"a":1}' },
    ]);
  });

  it("returns errors instead of throwing", () => {
    const err = (req: unknown) => {
      const r = fromOpenAIRequest(req);
      return r.ok ? null : `${r.error.code}@${r.error.path}`;
    };
    expect(err(null)).toBe("bad_request@");
    expect(err({ messages: "hi" })).toBe("bad_request@messages");
    expect(err({ messages: [{ role: "robot", content: "x" }] })).toBe("bad_message@messages[0].role");
    expect(err({ messages: [42] })).toBe("bad_message@messages[0]");
    expect(err({ messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] })).toBe(
      "bad_content@messages[0].content[0]",
    );
    expect(err({ messages: [{ role: "assistant", content: "x", reasoning: { text: "y" } }] })).toBe("bad_reasoning@messages[0].reasoning");
    expect(err({ messages: [{ role: "assistant", tool_calls: [{ type: "function", function: {} }] }] })).toBe(
      "bad_tool_call@messages[0].tool_calls[0].function.name",
    );
    expect(err({ messages: [{ role: "tool", tool_call_id: "nope", content: "x" }] })).toBe("unknown_tool_call_id@messages[0].tool_call_id");
    // a tool type other than function is refused by name (issue #30)
    expect(err({ messages: [], tools: [{ type: "web_search" }] })).toBe("unsupported_tool@tools[0].type");
    expect(err({ messages: [], tools: [{ type: "function" }] })).toBe("bad_tool@tools[0]");
    expect(err({ messages: [], reasoning_effort: "max" })).toBe("bad_reasoning_effort@reasoning_effort");
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(err({ messages: [{ role: "assistant", tool_calls: [{ type: "function", function: { name: "f", arguments: cyclic } }] }] })).toBe(
      "bad_tool_call@messages[0].tool_calls[0].function.arguments",
    );
    expect(err({ messages: [] })).toBe(null);
  });
});

// ---------------------------------------------------------------------------
// Round trip: render → tokenise → parse
// ---------------------------------------------------------------------------

describe("round trip through the project's parser", () => {
  function parse(ids: number[]): ReferenceMessage[] {
    const parser = new HarmonyParser(vocab, { role: null, wholeMessages: true });
    const out: ReferenceMessage[] = [];
    const take = (evs: HarmonyEvent[]) => {
      for (const e of evs) {
        if (e.type === "message_end" && e.message) out.push(e.message);
        if (e.type === "error" || e.type === "recovery") throw new Error(`${e.type}: ${JSON.stringify(e)}`);
      }
    };
    take(parser.write(ids));
    take(parser.end());
    return out;
  }

  /** What the parser must give back for a rendered message (system/developer: their rendered text). */
  function asParsed(m: HarmonyMessage): ReferenceMessage {
    let content: string;
    if (typeof m.content === "string") content = m.content;
    else {
      const text = renderMessage(m, { conversationHasFunctionTools: true });
      content = text.slice(text.indexOf("<|message|>") + "<|message|>".length, -"<|end|>".length);
    }
    const r: ReferenceMessage = { role: m.role, content };
    if (m.name != null) r.name = m.name;
    if (m.recipient != null) r.recipient = m.recipient;
    if (m.channel != null) r.channel = m.channel;
    if (m.content_type != null) r.content_type = m.content_type;
    return r;
  }

  it("a multi-turn tool-use conversation comes back message for message", () => {
    const req: OpenAIChatRequest = {
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "Weather.\nIn Celsius.",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
        },
      ],
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Weather in Paris? Also, what does <|end|> mean?" },
        {
          role: "assistant",
          reasoning: "Need the tool. 🌦️ Über-check.",
          content: "Let me look.",
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: '{"temp": 21, "sky": "<|return|> clear"}' },
        { role: "assistant", reasoning: "Answer now.", content: "21 °C and clear. `<|end|>` ends a message." },
        { role: "user", content: "And Rome?" },
        {
          role: "assistant",
          reasoning_content: "Again.",
          tool_calls: [{ id: "c2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } }],
        },
        { role: "tool", tool_call_id: "c2", content: '{"temp": 25}' },
      ],
    };
    const r = fromOpenAIRequest(req, { currentDate: "2025-08-01" });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const messages = r.messages;

    // Full history (no dropping): everything comes back.
    const pieces = renderConversationPieces(messages, { autoDropAnalysis: false });
    const parsed = parse(piecesToTokens(pieces, enc.encodeOrdinary));
    expect(parsed).toEqual(messages.map(asParsed));
    expect(parsed.map((m) => [m.role, m.channel ?? null, m.recipient ?? null])).toEqual([
      ["system", null, null],
      ["developer", null, null],
      ["user", null, null],
      ["assistant", "analysis", null],
      ["assistant", "commentary", null],
      ["assistant", "commentary", "functions.get_weather"],
      ["tool", "commentary", "assistant"],
      ["assistant", "analysis", null],
      ["assistant", "final", null],
      ["user", null, null],
      ["assistant", "analysis", null],
      ["assistant", "commentary", "functions.get_weather"],
      ["tool", "commentary", "assistant"],
    ]);
    expect(parsed[0]!.content).toContain("Reasoning: medium");
    expect(parsed[1]!.content).toContain("type get_weather = (_: {\ncity: string,\n}) => any;");

    // As a completion prompt: the finished turn's analysis is gone, the open turn's kept.
    const prompt = renderConversationForCompletionPieces(messages);
    const ids = piecesToTokens(prompt, enc.encodeOrdinary);
    expect(ids.slice(-2)).toEqual([200006, ...enc.encodeOrdinary("assistant")]);
    const replayed = parse(ids.slice(0, -2));
    expect(replayed).toEqual(replayIndices(messages, { forCompletion: true }).map((i) => asParsed(messages[i]!)));
    expect(replayed).toHaveLength(messages.length - 2);
    const contents = replayed.map((m) => m.content);
    expect(contents).not.toContain("Need the tool. 🌦️ Über-check.");
    expect(contents).not.toContain("Answer now.");
    expect(contents).toContain("Again.");
    expect(contents).toContain('{"city":"Paris"}');

    // encode(text) would have turned the literal <|end|> / <|return|> into specials.
    expect(enc.encode(piecesToText(pieces))).not.toEqual(piecesToTokens(pieces, enc.encodeOrdinary));
  });
});
