/**
 * The Harmony renderer: a conversation → prompt text, byte for byte what
 * openai-harmony renders (its `test-data/` renderings are the conformance
 * check, see test/render.test.ts), plus the conversion from an OpenAI
 * Chat-Completions request.
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
 * Replaying history (HARMONY.md §5), `autoDropAnalysis` (default on):
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
 * programming error, since user data enters through {@link fromOpenAIRequest},
 * which never throws: it returns `{ ok: false, error }` for bad input, and a
 * conversation it returns with `ok: true` always renders.
 *
 * Pure: no I/O, no clock (the current date is an option), no module state.
 */
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

export const RENDER_ERROR_CODES = {
  bad_message: "A message is not an object, or its role is not one of system, developer, user, assistant, tool.",
  tool_without_name: "A tool message has no name (the reference's `Tools should have a name!`).",
  misplaced_content: "System content outside a system message, or developer content outside a developer message.",
  bad_content: "Content, a content object, a tool namespace or a header field has the wrong type or value.",
  unknown_special: "piecesToTokens: a special piece that the preset does not define.",
} as const;
export type RenderErrorCode = keyof typeof RENDER_ERROR_CODES;

export class RenderError extends Error {
  override readonly name = "RenderError";
  constructor(
    readonly code: RenderErrorCode,
    message: string,
    /** Index of the offending message in the list given, when there is one. */
    readonly messageIndex: number | null = null,
  ) {
    super(message);
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

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

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
  throw new RenderError("bad_content", `reasoning_effort must be low, medium or high, got ${JSON.stringify(v)}`, index);
}

function checkNamespaces(tools: unknown, index: number | null): ToolNamespaceConfig[] {
  if (tools === undefined || tools === null) return [];
  if (!isObj(tools)) throw new RenderError("bad_content", "tools must be an object of namespaces", index);
  const keys = Object.keys(tools).sort(compareCodePoints);
  return keys.map((k) => {
    const ns = tools[k];
    if (!isObj(ns) || typeof ns.name !== "string" || !Array.isArray(ns.tools))
      throw new RenderError("bad_content", `tool namespace ${JSON.stringify(k)} needs a name and a tools array`, index);
    opt(ns.description, `tool namespace ${k}: description`, index);
    for (const t of ns.tools) {
      if (!isObj(t) || typeof t.name !== "string" || typeof t.description !== "string")
        throw new RenderError("bad_content", `a tool in namespace ${JSON.stringify(k)} needs a string name and description`, index);
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
        throw new RenderError("bad_content", `unknown content type ${JSON.stringify(c.type)}`, index);
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
 * Which messages a rendering keeps (HARMONY.md §5). Returns the indices of
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

// ---------------------------------------------------------------------------
// OpenAI Chat Completions → Harmony
// ---------------------------------------------------------------------------

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

export const REQUEST_ERROR_CODES = {
  bad_request: "The request is not an object, or `messages` is not an array.",
  bad_message: "A message is not an object, or its role is unknown.",
  bad_content: "Content is not a string, null or an array of text parts (images and audio are not supported).",
  bad_reasoning: "`reasoning`, `reasoning_content` or `thinking` is present but not a string.",
  bad_tool_call: "A tool call is not a function call with a name and string or object arguments.",
  unknown_tool_call_id: "A tool message's `tool_call_id` matches no earlier tool call, and it has no `name`.",
  bad_tool: "A `tools` entry is not a function with a name.",
  bad_reasoning_effort: "`reasoning_effort` is not low, medium or high (minimal and none count as low).",
} as const;
export type RequestErrorCode = keyof typeof REQUEST_ERROR_CODES;

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
    else fault("bad_content", `${path}[${i}]`, `unsupported content part ${JSON.stringify(part.type)} (text only)`);
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
  return fault("bad_reasoning_effort", path, `reasoning effort must be low, medium or high, got ${JSON.stringify(v)}`);
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
    if (!isObj(t) || (t.type !== undefined && t.type !== "function") || !isObj(t.function))
      fault("bad_tool", path, 'a tool must be {type: "function", function: {...}}');
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
 *   without tool calls, the content as the `final` message (ending `<|end|>`);
 * - `tool` → `functions.NAME to=assistant` on `commentary`, NAME found
 *   through `tool_call_id` among the earlier tool calls (or the message's
 *   `name`); legacy `function_call` / `function` messages are mapped alike.
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
  if (leading.length > 0 || functions.length > 0) {
    const dev = developerContent();
    if (leading.length > 0) dev.instructions = leading.join("\n\n");
    if (functions.length > 0) dev.tools = { functions: functionsNamespace(functions) };
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
        if (reasoning !== null) out.push({ role: "assistant", channel: ANALYSIS, content: reasoning });
        if (Array.isArray(calls) && calls.length > 0) {
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
          fault("unknown_tool_call_id", `${path}.tool_call_id`, `no earlier tool call has id ${JSON.stringify(m.tool_call_id)}`);
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
        fault("bad_message", `${path}.role`, `unknown role ${JSON.stringify(m.role)}`);
    }
  }
  return out;
}
