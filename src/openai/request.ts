/**
 * OpenAI Chat Completions request → Harmony conversation: the messages,
 * tools and reasoning effort of a chat request turned into the
 * {@link HarmonyMessage}s the renderer (src/core/render.ts) takes. Never
 * throws on input: bad input is `{ ok: false, error }` with a code from
 * `REQUEST_ERROR_CODES` (src/core/errors.ts) and where in the request it is.
 */
import type { RequestErrorCode } from "../core/errors.js";
import { describeValue, isObj, type JsonObject as Obj } from "../core/json.js";
import { HARMONY } from "../core/preset.js";
import {
  browserToolNamespace,
  DEFAULT_KNOWLEDGE_CUTOFF,
  DEFAULT_MODEL_IDENTITY,
  developerContent,
  functionsNamespace,
  pythonToolNamespace,
  systemContent,
  type HarmonyMessage,
  type ReasoningEffort,
  type ToolDescription,
  type ToolNamespaceConfig,
} from "../core/render.js";

const ANALYSIS = HARMONY.channels.reasoning;
const COMMENTARY = HARMONY.channels.commentary;
const FINAL = HARMONY.channels.final;
const T_CONSTRAIN = HARMONY.markers.constrain;

export interface OpenAIToolCall {
  id?: string;
  type?: "function";
  function: { name: string; arguments?: string | Record<string, unknown> | null };
}

export type OpenAIContentPart =
  | { type: "text" | "input_text" | "output_text"; text: string }
  | { type: "refusal"; refusal: string }
  | { type: string; [key: string]: unknown };

export interface OpenAIChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool" | "function";
  content?: string | OpenAIContentPart[] | null;
  name?: string;
  /** Chain of thought sent back by the client: any one of these three names. */
  reasoning?: string | null;
  reasoning_content?: string | null;
  thinking?: string | null;
  tool_calls?: OpenAIToolCall[] | null;
  /** Legacy single call (used when there are no `tool_calls`). */
  function_call?: { name: string; arguments?: string | null } | null;
  tool_call_id?: string;
  /**
   * Not OpenAI's (what a Responses input turns into): `"commentary"` on an
   * assistant message without tool calls says its content is a preamble
   * of a turn still in progress, not a final answer: its reasoning (if
   * any) and content are rendered as `analysis` and `commentary`, and no
   * `final` is rendered.
   */
  channel?: "commentary" | null;
}

export interface OpenAITool {
  type: "function";
  function: { name: string; description?: string | null; parameters?: unknown; strict?: boolean | null };
}

export interface OpenAIChatRequest {
  messages: OpenAIChatMessage[];
  tools?: OpenAITool[] | null;
  reasoning_effort?: string | null;
  /** Responses/OpenRouter style: `{ effort }`. Used when `reasoning_effort` is absent. */
  reasoning?: { effort?: string | null } | null;
  [key: string]: unknown;
}

export interface FromOpenAIOptions {
  /** Default: the reference's identity. null: no identity line. */
  modelIdentity?: string | null;
  /** Default `2024-06`. null: no cutoff line. */
  knowledgeCutoff?: string | null;
  /** `Current date:` (YYYY-MM-DD). Default none: the core reads no clock. */
  currentDate?: string | null;
  /** Effort when the request gives none. Default `medium`. */
  reasoningEffort?: ReasoningEffort;
  /** Built-in tools to declare in the system message. */
  builtinTools?: { browser?: boolean; python?: boolean };
  /** Content type of replayed function calls. Default `<|constrain|>json` (what gpt-oss writes). */
  toolCallContentType?: string;
  /**
   * A function whose `parameters` is an object schema with no properties
   * renders as `() => any` (as gpt-oss's chat template does) instead of the
   * reference's `(_: {\n}) => any`. Default true.
   */
  emptyParametersAsNoArgs?: boolean;
}

export interface RequestError {
  code: RequestErrorCode;
  message: string;
  /** Where in the request, e.g. `messages[3].tool_calls[0].function.name`. */
  path: string;
}

export type FromOpenAIResult = { ok: true; messages: HarmonyMessage[] } | { ok: false; error: RequestError };

class RequestFault {
  constructor(readonly error: RequestError) {}
}

function fault(code: RequestErrorCode, path: string, message: string): never {
  throw new RequestFault({ code, path, message });
}

/** OpenAI's rule for a response format's name: a-z, A-Z, 0-9, underscores and dashes, at most 64. */
const FORMAT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What a request's `response_format` asks the answer to be: null for text. */
export interface AnswerFormat {
  kind: "json_object" | "json_schema";
  name: string;
  description: string | null;
  /** The JSON Schema the answer is checked against (`{"type":"object"}` for json_object). */
  schema: unknown;
}

/**
 * The request's `response_format` (Chat Completions' shape: `{type: "text"}`,
 * `{type: "json_object"}`, `{type: "json_schema", json_schema: {name,
 * description?, schema?, strict?}}`), or null for text.
 */
export function answerFormat(request: unknown): AnswerFormat | null {
  if (!isObj(request)) return null;
  const f = request.response_format;
  if (f === undefined || f === null) return null;
  if (!isObj(f)) return fault("bad_response_format", "response_format", "response_format must be an object");
  if (f.type === "text") return null;
  if (f.type === "json_object") return { kind: "json_object", name: "json_object", description: null, schema: { type: "object" } };
  if (f.type !== "json_schema")
    return fault(
      "bad_response_format",
      "response_format.type",
      `response_format.type must be text, json_object or json_schema, not ${describeValue(f.type)}`,
    );
  const js = f.json_schema;
  if (!isObj(js)) return fault("bad_response_format", "response_format.json_schema", "json_schema must be an object with a name");
  if (typeof js.name !== "string" || !FORMAT_NAME.test(js.name))
    return fault("bad_response_format", "response_format.json_schema.name", "the name is 1 to 64 of a-z, A-Z, 0-9, _ and -");
  if (js.description !== undefined && js.description !== null && typeof js.description !== "string")
    return fault("bad_response_format", "response_format.json_schema.description", "the description must be a string");
  const schema = js.schema ?? {};
  if (!isObj(schema) && typeof schema !== "boolean")
    return fault("bad_response_format", "response_format.json_schema.schema", "the schema must be a JSON Schema (an object)");
  return { kind: "json_schema", name: js.name, description: typeof js.description === "string" ? js.description : null, schema };
}

/** {@link answerFormat}, its fault as a result. */
export function checkAnswerFormat(request: unknown): { ok: true; format: AnswerFormat | null } | { ok: false; error: RequestError } {
  try {
    return { ok: true, format: answerFormat(request) };
  } catch (e) {
    if (e instanceof RequestFault) return { ok: false, error: e.error };
    throw e;
  }
}

function textOf(content: unknown, path: string): string | null {
  if (content === undefined || content === null) return null;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) fault("bad_content", path, "content must be a string, null or an array of parts");
  let s = "";
  content.forEach((part, i) => {
    if (typeof part === "string") {
      s += part;
      return;
    }
    if (!isObj(part)) fault("bad_content", `${path}[${i}]`, "a content part must be an object");
    if ((part.type === "text" || part.type === "input_text" || part.type === "output_text") && typeof part.text === "string")
      s += part.text;
    else if (part.type === "refusal" && typeof part.refusal === "string") s += part.refusal;
    else fault("bad_content", `${path}[${i}]`, `unsupported content part ${describeValue(part.type)} (text only)`);
  });
  return s;
}

function reasoningOf(m: Record<string, unknown>, path: string): string | null {
  let found: string | null = null;
  for (const key of ["reasoning", "reasoning_content", "thinking"]) {
    const v = m[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "string") fault("bad_reasoning", `${path}.${key}`, `${key} must be a string`);
    if (found === null && v !== "") found = v;
  }
  return found;
}

function effortOf(req: Record<string, unknown>, fallback: ReasoningEffort): ReasoningEffort {
  let v: unknown = req.reasoning_effort;
  let path = "reasoning_effort";
  if ((v === undefined || v === null) && isObj(req.reasoning)) {
    v = req.reasoning.effort;
    path = "reasoning.effort";
  }
  if (v === undefined || v === null) return fallback;
  if (typeof v === "string") {
    const l = v.toLowerCase();
    if (l === "low" || l === "medium" || l === "high") return l;
    if (l === "minimal" || l === "none") return "low";
  }
  return fault("bad_reasoning_effort", path, `reasoning effort must be low, medium or high, got ${describeValue(v)}`);
}

function isEmptyObjectSchema(p: unknown): boolean {
  if (!isObj(p)) return false;
  if (p.type !== undefined && p.type !== "object") return false;
  if (p.oneOf !== undefined) return false;
  const props = p.properties;
  return props === undefined || props === null || (isObj(props) && Object.keys(props).length === 0);
}

function toolsOf(tools: unknown, emptyAsNoArgs: boolean): ToolDescription[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) fault("bad_tool", "tools", "tools must be an array");
  return tools.map((t, i) => {
    const path = `tools[${i}]`;
    if (isObj(t) && t.type !== undefined && t.type !== "function")
      fault("unsupported_tool", `${path}.type`, `tools of type ${describeValue(t.type)} are not supported (function only)`);
    if (!isObj(t) || !isObj(t.function)) fault("bad_tool", path, 'a tool must be {type: "function", function: {...}}');
    const f = t.function;
    if (typeof f.name !== "string" || f.name === "") fault("bad_tool", `${path}.function.name`, "a function needs a name");
    if (f.description !== undefined && f.description !== null && typeof f.description !== "string")
      fault("bad_tool", `${path}.function.description`, "description must be a string");
    const description = typeof f.description === "string" ? f.description : "";
    let parameters: unknown = f.parameters ?? null;
    if (emptyAsNoArgs && isEmptyObjectSchema(parameters)) parameters = null;
    return parameters === null ? { name: f.name, description } : { name: f.name, description, parameters };
  });
}

/**
 * An OpenAI Chat Completions request → a Harmony conversation, ready for
 * {@link renderConversationForCompletion} (next role assistant).
 *
 * The mapping (as gpt-oss's own chat template, except where noted):
 * - a system message first, from the options and `reasoning_effort`
 *   (the reference's defaults: identity, cutoff 2024-06, medium effort,
 *   channels analysis/commentary/final; `Current date:` only if given);
 * - OpenAI `system` and `developer` messages before the first other message
 *   are joined (blank line between) into the developer message's
 *   `# Instructions`; `tools` become its `namespace functions` block. No
 *   instructions and no tools: no developer message. A system or developer
 *   message later in the conversation becomes a developer message there;
 * - `user` → user;
 * - `assistant` → its reasoning (the first non-empty of `reasoning`,
 *   `reasoning_content`, `thinking`) as an `analysis` message; then, with
 *   `tool_calls`, the content (if any, not just whitespace) as a `commentary`
 *   preamble and one `commentary` message `to=functions.NAME`
 *   (`<|constrain|>json`, ending `<|call|>`) per call, arguments verbatim;
 *   without tool calls, the content as the `final` message (ending `<|end|>`).
 *   Consecutive assistant messages are one turn: without calls of its own,
 *   a message a call follows in them gives its content as a `commentary`
 *   preamble, and one with no content that another assistant message
 *   follows gives only its reasoning (no empty `final`);
 * - `tool` → `functions.NAME to=assistant` on `commentary`, NAME found
 *   through `tool_call_id` among the earlier tool calls (or the message's
 *   `name`); legacy `function_call` / `function` messages are mapped alike.
 * - `response_format` json_schema / json_object → a `# Response Formats`
 *   section at the end of the developer message (the Harmony guide's
 *   structured output; json_object as the schema `{"type":"object"}`).
 * Ignored: `tool_choice`, message `name`s of users, sampling parameters.
 */
export function fromOpenAIRequest(request: OpenAIChatRequest | unknown, options: FromOpenAIOptions = {}): FromOpenAIResult {
  try {
    return { ok: true, messages: convertRequest(request, options) };
  } catch (e) {
    if (e instanceof RequestFault) return { ok: false, error: e.error };
    throw e;
  }
}

function callMessage(name: string, args: unknown, path: string, contentType: string): HarmonyMessage {
  let text: string;
  if (typeof args === "string") text = args;
  else if (args === undefined || args === null) text = "{}";
  else if (isObj(args)) {
    try {
      text = JSON.stringify(args);
    } catch {
      return fault("bad_tool_call", path, "arguments cannot be serialised as JSON");
    }
  } else return fault("bad_tool_call", path, "arguments must be a JSON string");
  return { role: "assistant", channel: COMMENTARY, recipient: `functions.${name}`, content_type: contentType, content: text };
}

const isAssistant = (m: unknown): m is Obj => isObj(m) && m.role === "assistant";

/** Whether an assistant message calls tools (`tool_calls`, or a legacy `function_call`). */
function callsTools(m: Obj): boolean {
  return (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) || (m.function_call !== undefined && m.function_call !== null);
}

/** Whether a later assistant message of the same turn (the assistant messages right after `msgs[i]`) calls tools. */
function callFollows(msgs: readonly unknown[], i: number): boolean {
  for (let j = i + 1; j < msgs.length && isAssistant(msgs[j]); j++) if (callsTools(msgs[j] as Obj)) return true;
  return false;
}

function convertRequest(request: unknown, options: FromOpenAIOptions): HarmonyMessage[] {
  if (!isObj(request)) fault("bad_request", "", "the request must be an object");
  const msgs = request.messages;
  if (!Array.isArray(msgs)) fault("bad_request", "messages", "messages must be an array");

  const effort = effortOf(request, options.reasoningEffort ?? "medium");
  const functions = toolsOf(request.tools, options.emptyParametersAsNoArgs !== false);
  const contentType = options.toolCallContentType ?? `${T_CONSTRAIN}json`;

  const sysTools: Record<string, ToolNamespaceConfig> = {};
  if (options.builtinTools?.browser) sysTools["browser"] = browserToolNamespace();
  if (options.builtinTools?.python) sysTools["python"] = pythonToolNamespace();
  const sys = systemContent({
    model_identity: options.modelIdentity === undefined ? DEFAULT_MODEL_IDENTITY : options.modelIdentity,
    knowledge_cutoff: options.knowledgeCutoff === undefined ? DEFAULT_KNOWLEDGE_CUTOFF : options.knowledgeCutoff,
    conversation_start_date: options.currentDate ?? null,
    reasoning_effort: effort,
    tools: Object.keys(sysTools).length > 0 ? sysTools : null,
  });
  const out: HarmonyMessage[] = [{ role: "system", content: sys }];

  // Leading system/developer messages → the developer message's instructions.
  const leading: string[] = [];
  let i = 0;
  for (; i < msgs.length; i++) {
    const m: unknown = msgs[i];
    if (!isObj(m) || (m.role !== "system" && m.role !== "developer")) break;
    leading.push(textOf(m.content, `messages[${i}].content`) ?? "");
  }
  const format = answerFormat(request);
  if (leading.length > 0 || functions.length > 0 || format !== null) {
    const dev = developerContent();
    if (leading.length > 0) dev.instructions = leading.join("\n\n");
    if (functions.length > 0) dev.tools = { functions: functionsNamespace(functions) };
    // structured output: the format at the end of the developer message (the Harmony guide's "Response Formats")
    if (format !== null) dev.response_formats = [{ name: format.name, description: format.description, schema: format.schema }];
    out.push({ role: "developer", content: dev });
  }

  const callNames = new Map<string, string>();
  for (; i < msgs.length; i++) {
    const m: unknown = msgs[i];
    const path = `messages[${i}]`;
    if (!isObj(m)) fault("bad_message", path, "a message must be an object");
    switch (m.role) {
      case "system":
      case "developer":
        out.push({ role: "developer", content: developerContent({ instructions: textOf(m.content, `${path}.content`) ?? "" }) });
        break;
      case "user":
        out.push({ role: "user", content: textOf(m.content, `${path}.content`) ?? "" });
        break;
      case "assistant": {
        const reasoning = reasoningOf(m, path);
        const text = textOf(m.content, `${path}.content`);
        let calls = m.tool_calls;
        if (calls !== undefined && calls !== null && !Array.isArray(calls))
          fault("bad_tool_call", `${path}.tool_calls`, "tool_calls must be an array");
        // Legacy `function_call`: one call, no id.
        if ((!Array.isArray(calls) || calls.length === 0) && m.function_call !== undefined && m.function_call !== null) {
          if (!isObj(m.function_call)) fault("bad_tool_call", `${path}.function_call`, "function_call must be an object");
          calls = [{ type: "function", function: m.function_call }];
        }
        const channel = m.channel;
        if (channel !== undefined && channel !== null && channel !== COMMENTARY)
          fault("bad_message", `${path}.channel`, `channel must be "commentary" or absent, not ${describeValue(channel)}`);
        if (reasoning !== null) out.push({ role: "assistant", channel: ANALYSIS, content: reasoning });
        if (channel === COMMENTARY && (!Array.isArray(calls) || calls.length === 0)) {
          // a preamble of a turn in progress (Responses' phase "commentary" with no call after it yet)
          if (text !== null && text.trim() !== "") out.push({ role: "assistant", channel: COMMENTARY, content: text });
        } else if (Array.isArray(calls) && calls.length > 0) {
          if (text !== null && text.trim() !== "") out.push({ role: "assistant", channel: COMMENTARY, content: text });
          calls.forEach((c: unknown, k: number) => {
            const cpath = `${path}.tool_calls[${k}]`;
            if (!isObj(c) || (c.type !== undefined && c.type !== "function") || !isObj(c.function))
              fault("bad_tool_call", cpath, 'a tool call must be {type: "function", function: {name, arguments}}');
            const f = c.function;
            if (typeof f.name !== "string" || f.name === "")
              fault("bad_tool_call", `${cpath}.function.name`, "a tool call needs a function name");
            if (typeof c.id === "string") callNames.set(c.id, f.name);
            out.push(callMessage(f.name, f.arguments, `${cpath}.function.arguments`, contentType));
          });
        } else if (callFollows(msgs, i)) {
          // one turn sent as several assistant messages (reasoning, text, calls: the Agents SDK's Chat
          // model does so): text before the turn's call is its preamble, not a final answer
          if (text !== null && text.trim() !== "") out.push({ role: "assistant", channel: COMMENTARY, content: text });
        } else if ((text === null || text.trim() === "") && isAssistant(msgs[i + 1])) {
          // nothing said yet: the turn goes on in the next message (this one brought only its reasoning)
        } else {
          out.push({ role: "assistant", channel: FINAL, content: text ?? "" });
        }
        break;
      }
      case "tool":
      case "function": {
        let fname: string | undefined;
        if (m.role === "tool" && typeof m.tool_call_id === "string") fname = callNames.get(m.tool_call_id);
        if (fname === undefined && typeof m.name === "string" && m.name !== "") fname = m.name;
        if (fname === undefined)
          fault("unknown_tool_call_id", `${path}.tool_call_id`, `no earlier tool call has id ${describeValue(m.tool_call_id)}`);
        out.push({
          role: "tool",
          name: `functions.${fname}`,
          recipient: HARMONY.selfRecipient,
          channel: COMMENTARY,
          content: textOf(m.content, `${path}.content`) ?? "",
        });
        break;
      }
      default:
        fault("bad_message", `${path}.role`, `unknown role ${describeValue(m.role)}`);
    }
  }
  return out;
}

/** The function names a chat request declares in `tools` (for the parser's rule 11); none when it declares none. */
export function declaredToolNames(request: unknown): string[] {
  if (!isObj(request) || !Array.isArray(request.tools)) return [];
  const names: string[] = [];
  for (const t of request.tools as unknown[]) {
    if (isObj(t) && isObj(t.function) && typeof t.function.name === "string" && t.function.name !== "") names.push(t.function.name);
  }
  return names;
}

/** What `tool_choice` asks: the model may call (auto), may not (none), must call something (required), or must call `name`. */
export type ToolChoice = { kind: "auto" | "none" | "required" } | { kind: "named"; name: string };

/**
 * A request's `tool_choice` (Chat's `{type: "function", function: {name}}`
 * or Responses' flat `{type: "function", name}` for a named one), checked
 * against the declared tools (`tools`, as Chat declares them).
 */
export function toolChoiceOf(choice: unknown, tools: readonly string[]): { ok: true; choice: ToolChoice } | { ok: false; message: string } {
  if (choice === undefined || choice === null || choice === "auto") return { ok: true, choice: { kind: "auto" } };
  if (choice === "none") return { ok: true, choice: { kind: "none" } };
  if (choice === "required") {
    if (tools.length === 0) return { ok: false, message: 'tool_choice "required" needs tools' };
    return { ok: true, choice: { kind: "required" } };
  }
  if (isObj(choice) && choice.type === "function") {
    const name = isObj(choice.function) ? choice.function.name : choice.name;
    if (typeof name !== "string" || !tools.includes(name))
      return { ok: false, message: `tool_choice names ${describeValue(name)}, which is not one of the request's tools` };
    return { ok: true, choice: { kind: "named", name } };
  }
  return { ok: false, message: 'tool_choice must be "auto", "none", "required" or a function ({"type": "function", …})' };
}

/** A piece of Harmony the front writes itself: a special token by name, or text (ordinary text, as the renderer encodes header text). */
export type HarmonyPiece = { special: string } | { text: string };

/**
 * A forced call's two injected parts (HARMONY.md §1): the reasoning's
 * header (the completion starts there), and the call's header after it,
 * whole for a named function, up to `functions.` for "required" (the model
 * writes the name). The name is text, whatever it spells: a tool named
 * `x<|call|>` is rendered as text in the prompt, and so it is here.
 */
export function forcedCallPieces(choice: ToolChoice): { prefix: HarmonyPiece[]; header: HarmonyPiece[] } | null {
  const prefix = [{ special: "<|channel|>" }, { text: "analysis" }, { special: "<|message|>" }];
  const start = [{ special: "<|start|>" }, { text: "assistant" }, { special: "<|channel|>" }];
  if (choice.kind === "required") return { prefix, header: [...start, { text: "commentary to=functions." }] };
  if (choice.kind !== "named") return null;
  const header = [
    ...start,
    { text: `commentary to=functions.${choice.name} ` },
    { special: "<|constrain|>" },
    { text: "json" },
    { special: "<|message|>" },
  ];
  return { prefix, header };
}
