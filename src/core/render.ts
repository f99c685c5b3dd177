/**
 * The Harmony renderer: a conversation → prompt text, byte for byte what
 * openai-harmony renders (its `test-data/` renderings are the conformance
 * check, see test/core/render.test.ts). The conversion from an OpenAI
 * Chat-Completions request is in src/openai/request.ts.
 *
 * Output forms:
 * - text, with the special tokens written out (`<|start|>user<|message|>…`);
 * - pieces, `{ special }` or `{ text }`, for tokenising: content is ordinary
 *   text even when it contains something like `<|end|>`, so a caller must not
 *   run `encode(text-with-specials-allowed)` over a prompt built from user
 *   data. Encode each text piece with `encodeOrdinary` and map each special to
 *   its id ({@link piecesToTokens}); the pieces are cut where the reference's
 *   renderer cuts its text, so the ids are exactly the reference's.
 *
 * Replaying history (the replay rules of docs/protocol.md, "Rendering
 * prompts, and restoring dropped reasoning"), `autoDropAnalysis` (default on):
 * - rule `"completed-turns"` (default): a message on the `analysis` channel is
 *   dropped when a later assistant `final` message is itself followed by more
 *   conversation (a later turn; for a completion prompt, the turn being
 *   sampled counts). So the chain of thought of finished turns goes, and the
 *   analysis of the turn in progress (after the last final: analysis, tool
 *   calls, tool results) stays until a final is produced. A conversation that
 *   ends with a final keeps that last turn's analysis (training-style render).
 * - rule `"reference"`: openai-harmony's own filter, kept for exact
 *   emulation: only when the last assistant message is a `final`, drop the
 *   analysis messages before the *first* `final` of the conversation.
 * Both give the same output on all the reference's renderings. They differ
 * elsewhere: the reference keeps the analysis of turns 2..n-1, drops nothing
 * while a tool call is pending, and drops the analysis of a single turn that
 * ends the conversation with a final (plain or training render), which the
 * default rule keeps.
 * A replayed final ends with `<|end|>`; a tool call (assistant message with a
 * recipient) with `<|call|>`.
 *
 * Errors: rendering throws {@link RenderError} (code from
 * {@link RENDER_ERROR_CODES}) for a structurally invalid conversation: a
 * programming error, since user data enters through `fromOpenAIRequest`
 * (src/openai/request.ts), which never throws: it returns `{ ok: false, error }` for bad input, and a
 * conversation it returns with `ok: true` always renders.
 *
 * Pure: no I/O, no clock (the current date is an option), no module state.
 */
import { CodedError, type RenderErrorCode } from "./errors.js";
import { describeValue, isObj } from "./json.js";
import { HARMONY, type HarmonyPreset } from "./preset.js";
import { jsonSchemaToTypeScript } from "./schema-ts.js";

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

export type HarmonyRole = "system" | "developer" | "user" | "assistant" | "tool";
export type ReasoningEffort = "low" | "medium" | "high";

export interface ToolDescription {
  name: string;
  description: string;
  /** A JSON Schema for the arguments; absent or null renders `() => any`. */
  parameters?: unknown;
}

export interface ToolNamespaceConfig {
  name: string;
  description?: string | null;
  tools: ToolDescription[];
}

export interface ChannelConfig {
  valid_channels: string[];
  channel_required: boolean;
}

/** Field names follow the reference's JSON (serde) shape. Absent or null: not rendered. */
export interface SystemContent {
  type: "system_content";
  model_identity?: string | null;
  /** Lower case; the reference's capitalised `Low`/`Medium`/`High` are accepted too. */
  reasoning_effort?: ReasoningEffort | "Low" | "Medium" | "High" | null;
  /** Namespaces, rendered in key order (the reference's BTreeMap). */
  tools?: Record<string, ToolNamespaceConfig> | null;
  conversation_start_date?: string | null;
  knowledge_cutoff?: string | null;
  channel_config?: ChannelConfig | null;
}

export interface DeveloperContent {
  type: "developer_content";
  instructions?: string | null;
  tools?: Record<string, ToolNamespaceConfig> | null;
  /**
   * Not in the reference renderer (it has no field for them): response
   * formats for structured output, rendered at the end of the developer
   * message as the Harmony format guide specifies (openai/harmony
   * docs/format.md, "Structured output").
   */
  response_formats?: ResponseFormatSpec[] | null;
}

/** One response format: its name, an optional description, and its JSON Schema. */
export interface ResponseFormatSpec {
  name: string;
  description?: string | null;
  schema: unknown;
}

export interface TextContent {
  type: "text";
  text: string;
}

export type HarmonyContent = TextContent | SystemContent | DeveloperContent;

/**
 * A Harmony message. A superset of the parser's `ReferenceMessage` shape
 * (`role`, `name`, `recipient`, `channel`, `content_type`, `content`), so
 * parsed messages can be rendered back as they are.
 */
export interface HarmonyMessage {
  role: HarmonyRole;
  /** Author name. Required for `tool` messages, where it is all the header shows (`functions.get_weather`). */
  name?: string | null;
  /** `functions.get_weather`, `browser.search`, `python`, `assistant` (tool results). `all` is not rendered. */
  recipient?: string | null;
  channel?: string | null;
  /** `<|constrain|>json` (the marker is rendered as the special token) or a bare type such as `json`, `code`. */
  content_type?: string | null;
  content: string | HarmonyContent | HarmonyContent[];
}

/** One piece of a rendering: a special token (by its text) or ordinary text. */
export type RenderPiece = { special: string } | { text: string };

export type DropRule = "completed-turns" | "reference";

export interface RenderConversationOptions {
  /** Drop chain of thought of finished turns (default true, like the reference's `RenderConversationConfig`). */
  autoDropAnalysis?: boolean;
  /** Which messages count as finished CoT (default `"completed-turns"`; see the module comment). */
  dropRule?: DropRule;
}

export interface RenderMessageOptions {
  /** Adds the `Calls to these tools must go to the commentary channel: 'functions'.` line to system content. */
  conversationHasFunctionTools?: boolean;
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

export class RenderError extends CodedError {
  override readonly name = "RenderError";
  constructor(
    override readonly code: RenderErrorCode,
    message: string,
    /** Index of the offending message in the list given, when there is one. */
    readonly messageIndex: number | null = null,
  ) {
    super(code, message);
  }
}

// ---------------------------------------------------------------------------
// Constants and builders
// ---------------------------------------------------------------------------

function specialName(id: number): string {
  for (const [text, sid] of Object.entries(HARMONY.specials)) if (sid === id) return text;
  return HARMONY.reservedName(id);
}
const T_START = specialName(HARMONY.tokens.start);
const T_MESSAGE = specialName(HARMONY.tokens.message);
const T_CHANNEL = specialName(HARMONY.tokens.channel);
const T_CONSTRAIN = specialName(HARMONY.tokens.constrain);
const T_END = specialName(HARMONY.tokens.end);
const T_RETURN = specialName(HARMONY.tokens.return);
const T_CALL = specialName(HARMONY.tokens.call);

const ROLES: readonly HarmonyRole[] = Object.freeze(["system", "developer", "user", "assistant", "tool"]);
const ANALYSIS = HARMONY.channels.reasoning;
const COMMENTARY = HARMONY.channels.commentary;
const FINAL = HARMONY.channels.final;

export const DEFAULT_MODEL_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI.";
export const DEFAULT_KNOWLEDGE_CUTOFF = "2024-06";

/**
 * System content with the reference's defaults (`SystemContent::new()`):
 * identity, knowledge cutoff 2024-06, reasoning medium, channels
 * analysis/commentary/final required, no date, no tools. `overrides` replace
 * fields; an override of `null` removes the field.
 */
export function systemContent(overrides: Partial<Omit<SystemContent, "type">> = {}): SystemContent {
  return {
    type: "system_content",
    model_identity: DEFAULT_MODEL_IDENTITY,
    reasoning_effort: "medium",
    tools: null,
    conversation_start_date: null,
    knowledge_cutoff: DEFAULT_KNOWLEDGE_CUTOFF,
    channel_config: { valid_channels: [ANALYSIS, COMMENTARY, FINAL], channel_required: true },
    ...overrides,
  };
}

export function developerContent(fields: Partial<Omit<DeveloperContent, "type">> = {}): DeveloperContent {
  return { type: "developer_content", instructions: null, tools: null, ...fields };
}

/** The `functions` namespace for function tools (as `with_function_tools`). */
export function functionsNamespace(tools: ToolDescription[]): ToolNamespaceConfig {
  return { name: "functions", description: null, tools };
}

/** The built-in `browser` tool namespace, as the reference defines it. */
export function browserToolNamespace(): ToolNamespaceConfig {
  return {
    name: "browser",
    description:
      "Tool for browsing.\nThe `cursor` appears in brackets before each browsing display: `[{cursor}]`.\nCite information from the tool using the following format:\n`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\nDo not quote more than 10 words directly from the tool output.\nsources=web (default: web)",
    tools: [
      {
        name: "search",
        description: "Searches for information related to `query` and displays `topn` results.",
        parameters: {
          type: "object",
          properties: {
            query: { type: "string" },
            topn: { type: "number", default: 10 },
            source: { type: "string" },
          },
          required: ["query"],
        },
      },
      {
        name: "open",
        description:
          "Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.\nValid link ids are displayed with the formatting: `【{id}†.*】`.\nIf `cursor` is not provided, the most recent page is implied.\nIf `id` is a string, it is treated as a fully qualified URL associated with `source`.\nIf `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.\nUse this function without `id` to scroll to a new location of an opened page.",
        parameters: {
          type: "object",
          properties: {
            id: { type: ["number", "string"], default: -1 },
            cursor: { type: "number", default: -1 },
            loc: { type: "number", default: -1 },
            num_lines: { type: "number", default: -1 },
            view_source: { type: "boolean", default: false },
            source: { type: "string" },
          },
        },
      },
      {
        name: "find",
        description: "Finds exact matches of `pattern` in the current page, or the page given by `cursor`.",
        parameters: {
          type: "object",
          properties: {
            pattern: { type: "string" },
            cursor: { type: "number", default: -1 },
          },
          required: ["pattern"],
        },
      },
    ],
  };
}

/** The built-in `python` tool namespace, as the reference defines it. */
export function pythonToolNamespace(): ToolNamespaceConfig {
  return {
    name: "python",
    description:
      "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. when creating plots, tables, or files).\n\nWhen you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. Depends on the cluster.",
    tools: [],
  };
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/** Option<String>: undefined and null are absent; "" is present (as in the reference). */
function opt(v: unknown, what: string, index: number | null): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "string") throw new RenderError("bad_content", `${what} must be a string`, index);
  return v;
}

/** Rust's `str::lines()`: split on \n, drop one trailing \r per line and a final empty line. */
function rustLines(s: string): string[] {
  if (s === "") return [];
  const parts = s.split("\n");
  if (parts[parts.length - 1] === "") parts.pop();
  return parts.map((p) => (p.endsWith("\r") ? p.slice(0, -1) : p));
}

/** BTreeMap<String, _> order: by UTF-8 bytes, i.e. by code points. */
function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const cx = x.value.codePointAt(0)!;
    const cy = y.value.codePointAt(0)!;
    if (cx !== cy) return cx - cy;
  }
}

class Pieces {
  readonly list: RenderPiece[] = [];
  special(s: string): void {
    this.list.push({ special: s });
  }
  text(s: string): void {
    if (s !== "") this.list.push({ text: s });
  }
}

function normaliseEffort(v: unknown, index: number | null): ReasoningEffort | null {
  if (v === undefined || v === null) return null;
  if (typeof v === "string") {
    const l = v.toLowerCase();
    if (l === "low" || l === "medium" || l === "high") return l;
  }
  throw new RenderError("bad_content", `reasoning_effort must be low, medium or high, got ${describeValue(v)}`, index);
}

function checkNamespaces(tools: unknown, index: number | null): ToolNamespaceConfig[] {
  if (tools === undefined || tools === null) return [];
  if (!isObj(tools)) throw new RenderError("bad_content", "tools must be an object of namespaces", index);
  const keys = Object.keys(tools).sort(compareCodePoints);
  return keys.map((k) => {
    const ns = tools[k];
    if (!isObj(ns) || typeof ns.name !== "string" || !Array.isArray(ns.tools))
      throw new RenderError("bad_content", `tool namespace ${describeValue(k)} needs a name and a tools array`, index);
    opt(ns.description, `tool namespace ${k}: description`, index);
    for (const t of ns.tools) {
      if (!isObj(t) || typeof t.name !== "string" || typeof t.description !== "string")
        throw new RenderError("bad_content", `a tool in namespace ${describeValue(k)} needs a string name and description`, index);
    }
    return ns as unknown as ToolNamespaceConfig;
  });
}

function hasFunctionTools(content: unknown): boolean {
  if (!isObj(content) || content.type !== "developer_content" || !isObj(content.tools)) return false;
  const fns = content.tools["functions"];
  return isObj(fns) && Array.isArray(fns.tools) && fns.tools.length > 0;
}

function contentsOf(m: HarmonyMessage, index: number | null): unknown[] {
  const c = (m as { content?: unknown }).content;
  if (typeof c === "string") return [{ type: "text", text: c }];
  if (Array.isArray(c)) return c;
  if (isObj(c)) return [c];
  throw new RenderError("bad_content", "content must be a string, a content object or an array of them", index);
}

// ---------------------------------------------------------------------------
// Content rendering
// ---------------------------------------------------------------------------

function toolsSection(namespaces: ToolNamespaceConfig[]): string {
  const sections = ["# Tools"];
  for (const ns of namespaces) {
    const lines = [`## ${ns.name}\n`];
    const hasTools = ns.tools.length > 0;
    if (typeof ns.description === "string") for (const line of rustLines(ns.description)) lines.push(hasTools ? `// ${line}` : line);
    if (hasTools) {
      lines.push(`namespace ${ns.name} {\n`);
      for (const tool of ns.tools) {
        for (const line of rustLines(tool.description)) lines.push(`// ${line}`);
        if (tool.parameters !== undefined && tool.parameters !== null)
          lines.push(`type ${tool.name} = (_: ${jsonSchemaToTypeScript(tool.parameters, "")}) => any;\n`);
        else lines.push(`type ${tool.name} = () => any;\n`);
      }
      lines.push(`} // namespace ${ns.name}`);
    }
    sections.push(lines.join("\n"));
  }
  return sections.join("\n\n");
}

function systemText(sys: Record<string, unknown>, functionTools: boolean, index: number | null): string {
  const sections: string[] = [];
  const top: string[] = [];
  const identity = opt(sys.model_identity, "model_identity", index);
  const cutoff = opt(sys.knowledge_cutoff, "knowledge_cutoff", index);
  const date = opt(sys.conversation_start_date, "conversation_start_date", index);
  if (identity !== null) top.push(identity);
  if (cutoff !== null) top.push(`Knowledge cutoff: ${cutoff}`);
  if (date !== null) top.push(`Current date: ${date}`);
  if (top.length > 0) sections.push(top.join("\n"));

  const effort = normaliseEffort(sys.reasoning_effort, index);
  if (effort !== null) sections.push(`Reasoning: ${effort}`);

  const namespaces = checkNamespaces(sys.tools, index);
  if (namespaces.length > 0) sections.push(toolsSection(namespaces));

  const cc = sys.channel_config;
  if (cc !== undefined && cc !== null) {
    if (!isObj(cc) || !Array.isArray(cc.valid_channels) || !cc.valid_channels.every((c) => typeof c === "string"))
      throw new RenderError("bad_content", "channel_config.valid_channels must be an array of strings", index);
    if (cc.valid_channels.length > 0) {
      let header = `# Valid channels: ${cc.valid_channels.join(", ")}.`;
      if (cc.channel_required === true) header += " Channel must be included for every message.";
      if (functionTools) header += "\nCalls to these tools must go to the commentary channel: 'functions'.";
      sections.push(header);
    }
  }
  return sections.join("\n\n");
}

function developerText(dev: Record<string, unknown>, index: number | null): string {
  const sections: string[] = [];
  const instructions = opt(dev.instructions, "instructions", index);
  if (instructions !== null) sections.push("# Instructions", instructions);
  const namespaces = checkNamespaces(dev.tools, index);
  if (namespaces.length > 0) sections.push(toolsSection(namespaces));
  const formats = dev.response_formats;
  if (formats !== undefined && formats !== null) {
    if (!Array.isArray(formats)) throw new RenderError("bad_content", "response_formats must be an array", index);
    if (formats.length > 0) sections.push(responseFormatsSection(formats, index));
  }
  return sections.join("\n\n");
}

/**
 * The guide's structured-output section:
 * `# Response Formats\n\n## {name}\n\n// {description}\n{schema}`, the
 * schema as compact JSON; without a description, no comment line.
 */
function responseFormatsSection(formats: unknown[], index: number | null): string {
  const sections = ["# Response Formats"];
  for (const f of formats) {
    if (!isObj(f) || typeof f.name !== "string" || f.name === "")
      throw new RenderError("bad_content", "a response format needs a name", index);
    const description = opt(f.description, "description", index);
    const body: string[] = [];
    if (description !== null) for (const line of rustLines(description)) body.push(`// ${line}`);
    body.push(JSON.stringify(f.schema ?? {}));
    sections.push(`## ${f.name}`, body.join("\n"));
  }
  return sections.join("\n\n");
}

function renderMessageInto(out: Pieces, m: HarmonyMessage, functionTools: boolean, index: number | null): void {
  if (!isObj(m) || !ROLES.includes((m as { role: HarmonyRole }).role))
    throw new RenderError("bad_message", `message role must be one of ${ROLES.join(", ")}`, index);
  const name = opt(m.name, "name", index);
  const recipient = opt(m.recipient, "recipient", index);
  const channel = opt(m.channel, "channel", index);
  const contentType = opt(m.content_type, "content_type", index);
  const contents = contentsOf(m, index);

  out.special(T_START);
  if (m.role === "tool") {
    if (name === null) throw new RenderError("tool_without_name", "Tools should have a name!", index);
    out.text(name);
  } else {
    out.text(m.role);
    if (name !== null) out.text(`:${name}`);
  }
  if (recipient !== null && recipient !== "all") out.text(` to=${recipient}`);
  if (channel !== null) {
    out.special(T_CHANNEL);
    out.text(channel);
  }
  if (contentType !== null) {
    if (contentType.startsWith(T_CONSTRAIN)) {
      out.text(" ");
      out.special(T_CONSTRAIN);
      out.text(contentType.slice(T_CONSTRAIN.length));
    } else out.text(` ${contentType}`);
  }
  out.special(T_MESSAGE);

  for (const c of contents) {
    if (!isObj(c)) throw new RenderError("bad_content", "a content item must be an object", index);
    switch (c.type) {
      case "text":
        if (typeof c.text !== "string") throw new RenderError("bad_content", "text content needs a string `text`", index);
        out.text(c.text);
        break;
      case "system_content":
        if (m.role !== "system")
          throw new RenderError("misplaced_content", `SystemContent may only appear in system messages, found in ${m.role}`, index);
        out.text(systemText(c, functionTools, index));
        break;
      case "developer_content":
        if (m.role !== "developer")
          throw new RenderError("misplaced_content", `DeveloperContent may only appear in developer messages, found in ${m.role}`, index);
        out.text(developerText(c, index));
        break;
      default:
        throw new RenderError("bad_content", `unknown content type ${describeValue(c.type)}`, index);
    }
  }
  // Any assistant message with a recipient is a tool call (even `all`, as in the reference).
  out.special(m.role === "assistant" && recipient !== null ? T_CALL : T_END);
}

// ---------------------------------------------------------------------------
// Replay selection
// ---------------------------------------------------------------------------

function isAssistantFinal(m: HarmonyMessage): boolean {
  return isObj(m) && m.role === "assistant" && m.channel === FINAL;
}

function isAnalysis(m: HarmonyMessage): boolean {
  return isObj(m) && m.channel === ANALYSIS;
}

export interface ReplayOptions extends RenderConversationOptions {
  /** The conversation is rendered as a completion prompt (a next turn follows it). */
  forCompletion?: boolean;
}

/**
 * Which messages a rendering keeps (the replay rules). Returns the indices of
 * the messages kept, in order.
 */
export function replayIndices(messages: readonly HarmonyMessage[], options: ReplayOptions = {}): number[] {
  const all = messages.map((_, i) => i);
  if (options.autoDropAnalysis === false) return all;
  const n = messages.length;
  let cut = -1;
  if ((options.dropRule ?? "completed-turns") === "reference") {
    let lastAssistantIsFinal = false;
    for (let i = n - 1; i >= 0; i--) {
      const m = messages[i]!;
      if (isObj(m) && m.role === "assistant") {
        lastAssistantIsFinal = m.channel === FINAL;
        break;
      }
    }
    if (lastAssistantIsFinal) cut = messages.findIndex((m) => isObj(m) && m.channel === FINAL);
  } else {
    // The last assistant final that is followed by a later turn.
    for (let j = options.forCompletion ? n - 1 : n - 2; j >= 0; j--) {
      if (isAssistantFinal(messages[j]!)) {
        cut = j;
        break;
      }
    }
  }
  return all.filter((i) => !(i < cut && isAnalysis(messages[i]!)));
}

// ---------------------------------------------------------------------------
// Public rendering API
// ---------------------------------------------------------------------------

function conversationHasFunctionTools(messages: readonly HarmonyMessage[]): boolean {
  return messages.some((m) => {
    if (!isObj(m)) return false;
    const c = (m as { content?: unknown }).content;
    return Array.isArray(c) ? c.some(hasFunctionTools) : hasFunctionTools(c);
  });
}

function renderInto(out: Pieces, messages: readonly HarmonyMessage[], options: ReplayOptions): void {
  if (!Array.isArray(messages)) throw new RenderError("bad_message", "messages must be an array");
  const functionTools = conversationHasFunctionTools(messages);
  for (const i of replayIndices(messages, options)) renderMessageInto(out, messages[i]!, functionTools, i);
}

/** The pieces of a conversation (no next-turn header). */
export function renderConversationPieces(messages: readonly HarmonyMessage[], options: RenderConversationOptions = {}): RenderPiece[] {
  const out = new Pieces();
  renderInto(out, messages, { ...options, forCompletion: false });
  return out.list;
}

/** The pieces of a completion prompt: the conversation, then `<|start|>{nextRole}`. */
export function renderConversationForCompletionPieces(
  messages: readonly HarmonyMessage[],
  nextRole: HarmonyRole = "assistant",
  options: RenderConversationOptions = {},
): RenderPiece[] {
  if (!ROLES.includes(nextRole)) throw new RenderError("bad_message", `next role must be one of ${ROLES.join(", ")}`);
  const out = new Pieces();
  renderInto(out, messages, { ...options, forCompletion: true });
  out.special(T_START);
  out.text(nextRole);
  return out.list;
}

/**
 * The pieces of a training example: like {@link renderConversationPieces},
 * but when the last message is an assistant `final`, it ends with `<|return|>`.
 */
export function renderConversationForTrainingPieces(
  messages: readonly HarmonyMessage[],
  options: RenderConversationOptions = {},
): RenderPiece[] {
  const pieces = renderConversationPieces(messages, options);
  const last = messages[messages.length - 1];
  if (last !== undefined && isAssistantFinal(last) && pieces.length > 0) pieces[pieces.length - 1] = { special: T_RETURN };
  return pieces;
}

/** The pieces of one message. */
export function renderMessagePieces(message: HarmonyMessage, options: RenderMessageOptions = {}): RenderPiece[] {
  const out = new Pieces();
  renderMessageInto(out, message, options.conversationHasFunctionTools === true, null);
  return out.list;
}

/** Pieces → text with the special tokens written out. */
export function piecesToText(pieces: readonly RenderPiece[]): string {
  let s = "";
  for (const p of pieces) s += "special" in p ? p.special : p.text;
  return s;
}

/**
 * Pieces → token ids: each text piece through `encodeOrdinary` (so text that
 * looks like a special token stays text), each special to its id in `preset`.
 */
export function piecesToTokens(
  pieces: readonly RenderPiece[],
  encodeOrdinary: (text: string) => ArrayLike<number>,
  preset: HarmonyPreset = HARMONY,
): number[] {
  const ids: number[] = [];
  for (const p of pieces) {
    if ("special" in p) {
      const id = preset.specials[p.special];
      if (id === undefined) throw new RenderError("unknown_special", `no special token ${p.special} in ${preset.name}`);
      ids.push(id);
    } else {
      const t = encodeOrdinary(p.text);
      for (let i = 0; i < t.length; i++) ids.push(t[i]!);
    }
  }
  return ids;
}

/** A conversation as prompt text (no next-turn header). */
export function renderConversation(messages: readonly HarmonyMessage[], options: RenderConversationOptions = {}): string {
  return piecesToText(renderConversationPieces(messages, options));
}

/** A completion prompt: the conversation, then `<|start|>{nextRole}` (default assistant). */
export function renderConversationForCompletion(
  messages: readonly HarmonyMessage[],
  nextRole: HarmonyRole = "assistant",
  options: RenderConversationOptions = {},
): string {
  return piecesToText(renderConversationForCompletionPieces(messages, nextRole, options));
}

/** A training example: a trailing assistant final ends with `<|return|>`. */
export function renderConversationForTraining(messages: readonly HarmonyMessage[], options: RenderConversationOptions = {}): string {
  return piecesToText(renderConversationForTrainingPieces(messages, options));
}

/** One message as text. */
export function renderMessage(message: HarmonyMessage, options: RenderMessageOptions = {}): string {
  return piecesToText(renderMessagePieces(message, options));
}
