/**
 * The Responses API request and usage in terms of Chat Completions: a
 * Responses `input` (with `instructions`, `tools`, `reasoning`) becomes the
 * chat request the renderer takes, and an engine's token counts become a
 * Responses `usage` object.
 */
import type { RequestErrorCode } from "../core/errors.js";
import { describeValue, isObj, type JsonObject as Obj } from "../core/json.js";

/** Token counts as OpenAI-compatible engines report them. */
export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  /** Prompt tokens served from the engine's prefix cache (vLLM with --enable-prompt-tokens-details). */
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
}

/** The engine's cached prompt tokens, when it reported a count. */
export function cachedTokens(usage: CompletionUsage): number {
  const n = usage.prompt_tokens_details?.cached_tokens;
  return typeof n === "number" && Number.isInteger(n) && n >= 0 ? n : 0;
}

/**
 * A Chat Completions `usage` object from an engine's token counts (cached
 * prompt tokens passed through) and the parser's count of reasoning tokens.
 */
export function chatUsage(usage: CompletionUsage, reasoningTokens: number): Obj {
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
    prompt_tokens_details: { cached_tokens: cachedTokens(usage) },
    completion_tokens_details: { reasoning_tokens: reasoningTokens },
  };
}

/** A bad Responses request: the code (src/core/errors.ts), what is wrong and where. */
export interface InputFault {
  ok: false;
  code: RequestErrorCode | "item_not_found";
  message: string;
  param: string;
}

/**
 * What a function the prompt declares (its Harmony name, `functions.NAME`)
 * is to the client: a `function` tool, or a `custom` (freeform) one, either
 * maybe inside a `namespace` tool.
 */
export interface ToolRoute {
  kind: "function" | "custom";
  /** The tool's name as the client declared it. */
  name: string;
  /** The `namespace` tool it belongs to, or null. */
  namespace: string | null;
}

/** A custom (freeform) tool, as gpt-oss is given it: a function taking the one string the client's tool takes. */
export const CUSTOM_TOOL_PARAMETERS = Object.freeze({
  type: "object",
  properties: { input: { type: "string", description: "The tool's whole input, as free text." } },
  required: ["input"],
  additionalProperties: false,
});

/** The Harmony function name of a namespace member: `namespace__name` (one flat `functions` namespace, as gpt-oss was trained). */
export function namespacedName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

/**
 * Responses tool types the sidecar cannot give gpt-oss, refused by name:
 * hosted tools (the server would have to run them; the sidecar runs no
 * tool) and built-in client tools with no gpt-oss counterpart.
 */
const HOSTED_TOOL_TYPES = new Set([
  "web_search",
  "web_search_2025_08_26",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "file_search",
  "code_interpreter",
  "computer",
  "computer_use",
  "computer_use_preview",
  "image_generation",
  "mcp",
  "tool_search",
  "programmatic_tool_calling",
  "local_shell",
  "shell",
  "apply_patch",
]);

/** The description of a custom tool as a function: the client's, and the input's grammar when it has one. */
function customDescription(t: Obj): string {
  const parts: string[] = [];
  if (typeof t.description === "string" && t.description !== "") parts.push(t.description);
  const f = t.format;
  if (isObj(f) && f.type === "grammar" && typeof f.definition === "string")
    parts.push(`The input follows this ${typeof f.syntax === "string" ? f.syntax : ""} grammar:\n${f.definition}`);
  parts.push("Put the whole input, as text, in `input`.");
  return parts.join("\n\n");
}

/**
 * A Responses request's `tools` as chat functions, and what each
 * function is to the client. `function` tools as they are; `custom` tools
 * as a function taking one string (`input`); a `namespace` tool's members
 * as functions named `namespace__name`; any other type refused by name.
 */
export function responsesTools(tools: unknown): { ok: true; functions: Obj[]; routes: Map<string, ToolRoute> } | InputFault {
  const functions: Obj[] = [];
  const routes = new Map<string, ToolRoute>();
  if (tools === undefined || tools === null) return { ok: true, functions, routes };
  if (!Array.isArray(tools)) return { ok: false, code: "bad_tool", message: "tools must be an array", param: "tools" };
  const add = (t: Obj, path: string, namespace: string | null, nsDescription: string | null): InputFault | null => {
    if (typeof t.name !== "string" || t.name === "")
      return { ok: false, code: "bad_tool", message: "a tool needs a name", param: `${path}.name` };
    const kind = t.type === "custom" ? "custom" : "function";
    const name = namespace === null ? t.name : namespacedName(namespace, t.name);
    if (routes.has(name))
      return { ok: false, code: "bad_tool", message: `two tools are named ${describeValue(name)}`, param: `${path}.name` };
    routes.set(name, { kind, name: t.name, namespace });
    let description = kind === "custom" ? customDescription(t) : typeof t.description === "string" ? t.description : "";
    if (nsDescription) description = description === "" ? nsDescription : `${nsDescription}\n\n${description}`;
    const parameters = kind === "custom" ? CUSTOM_TOOL_PARAMETERS : t.parameters;
    functions.push({ type: "function", function: { name, description, parameters } });
    return null;
  };
  for (const [i, t] of tools.entries()) {
    const path = `tools[${i}]`;
    if (!isObj(t)) return { ok: false, code: "bad_tool", message: "a tool must be an object", param: path };
    let bad: InputFault | null = null;
    if (t.type === "function" || t.type === "custom") bad = add(t, path, null, null);
    else if (t.type === "namespace") {
      if (typeof t.name !== "string" || t.name === "")
        return { ok: false, code: "bad_tool", message: "a namespace needs a name", param: `${path}.name` };
      if (!Array.isArray(t.tools))
        return { ok: false, code: "bad_tool", message: "a namespace's tools must be an array", param: `${path}.tools` };
      const nsDescription = typeof t.description === "string" && t.description !== "" ? `(${t.name}: ${t.description})` : null;
      for (const [k, m] of t.tools.entries()) {
        const mpath = `${path}.tools[${k}]`;
        if (!isObj(m) || (m.type !== "function" && m.type !== "custom"))
          return {
            ok: false,
            code: "unsupported_tool",
            message: `a namespace holds function and custom tools, not ${describeValue(isObj(m) ? m.type : m)}`,
            param: `${mpath}.type`,
          };
        bad = add(m, mpath, t.name, nsDescription);
        if (bad) break;
      }
    } else if (typeof t.type === "string" && HOSTED_TOOL_TYPES.has(t.type))
      return {
        ok: false,
        code: "unsupported_tool",
        message: `tools of type ${describeValue(t.type)} are not supported: the sidecar runs no tool itself, and gpt-oss has no client-side counterpart (function, custom and namespace tools are)`,
        param: `${path}.type`,
      };
    else return { ok: false, code: "unsupported_tool", message: `unknown tool type ${describeValue(t.type)}`, param: `${path}.type` };
    if (bad) return bad;
  }
  return { ok: true, functions, routes };
}

/** What `encrypted_content` holds when the sidecar wrote it: this prefix, then the reasoning as base64 (UTF-8). Not encrypted: the client's own reasoning, carried for stateless clients. */
export const REASONING_CARRIER_PREFIX = "harmony-sidecar.reasoning.v1:";

/** The reasoning `encrypted_content` carries, when the sidecar wrote it (another server's is opaque: null). */
export function carriedReasoning(encrypted: unknown): string | null {
  if (typeof encrypted !== "string" || !encrypted.startsWith(REASONING_CARRIER_PREFIX)) return null;
  return Buffer.from(encrypted.slice(REASONING_CARRIER_PREFIX.length), "base64").toString("utf8");
}

/** `encrypted_content` for reasoning `text` (see {@link REASONING_CARRIER_PREFIX}). */
export function carryReasoning(text: string): string {
  return REASONING_CARRIER_PREFIX + Buffer.from(text, "utf8").toString("base64");
}

type Text = { ok: true; text: string } | InputFault;

/** The text of a message's (or a tool output's) content: a string or text parts; other parts refused by name. */
function textOf(content: unknown, path: string): Text {
  if (typeof content === "string") return { ok: true, text: content };
  if (!Array.isArray(content))
    return { ok: false, code: "bad_content", message: "content must be a string or an array of parts", param: path };
  let text = "";
  for (const [k, p] of content.entries()) {
    if (isObj(p) && (p.type === "input_text" || p.type === "output_text" || p.type === "text") && typeof p.text === "string")
      text += p.text;
    else if (isObj(p) && p.type === "refusal" && typeof p.refusal === "string") text += p.refusal;
    else
      return {
        ok: false,
        code: "unsupported_input_item",
        message: `content parts of type ${describeValue(isObj(p) ? p.type : p)} are not supported (text only: gpt-oss reads text)`,
        param: `${path}[${k}]`,
      };
  }
  return { ok: true, text };
}

/** The reasoning a `reasoning` item holds: its `content` (raw chain of thought), else its `summary`, else what the sidecar carried in `encrypted_content`. */
function reasoningOf(item: Obj): string {
  const join = (parts: unknown) =>
    Array.isArray(parts) ? parts.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("") : "";
  const content = join(item.content);
  if (content !== "") return content;
  const summary = join(item.summary);
  if (summary !== "") return summary;
  return carriedReasoning(item.encrypted_content) ?? "";
}

/** Whether a function (or custom tool) call follows item `i` within the same assistant turn (only reasoning and assistant messages between). */
function callFollows(items: readonly unknown[], i: number): boolean {
  for (let j = i + 1; j < items.length; j++) {
    const it = items[j];
    if (!isObj(it)) return false;
    const type = it.type ?? "message";
    if (type === "function_call" || type === "custom_tool_call") return true;
    if (type === "reasoning" || (type === "message" && it.role === "assistant")) continue;
    return false;
  }
  return false;
}

/** Input item types the sidecar cannot render (hosted tools' calls, MCP, compaction, …): refused by name. */
function unsupportedItem(type: unknown, i: number): InputFault {
  return {
    ok: false,
    code: "unsupported_input_item",
    message: `input items of type ${describeValue(type)} are not supported (message, reasoning, function_call, function_call_output, custom_tool_call, custom_tool_call_output and item_reference are)`,
    param: `input[${i}].type`,
  };
}

/** The Harmony name of a call item's function (its namespace folded in, as {@link responsesTools} declares it). */
function callName(item: Obj): string {
  const name = typeof item.name === "string" ? item.name : "";
  return typeof item.namespace === "string" && item.namespace !== "" ? namespacedName(item.namespace, name) : name;
}

/** A tool output's text: a string, text parts, or (leniently) any other JSON. */
function outputOf(output: unknown, path: string): Text {
  if (typeof output === "string") return { ok: true, text: output };
  if (Array.isArray(output)) return textOf(output, path);
  return { ok: true, text: JSON.stringify(output ?? "") };
}

/**
 * Responses `input` (with `instructions`, `tools`, `reasoning`, `text`) →
 * the chat request the renderer takes, following Harmony's turn
 * structure (docs/protocol.md, "Rendering prompts, and restoring dropped reasoning"):
 * - user, system and developer messages as they are;
 * - the assistant items between two of those (or tool outputs) are one
 *   turn in progress: `reasoning` items are its `analysis`; an assistant
 *   message with `phase: "commentary"` (or, without a phase, one a call
 *   follows in the same turn) is a preamble on `commentary`, in the same
 *   chat message as the calls after it, so the turn's reasoning stays in
 *   the prompt while they are in flight; an assistant message with
 *   `phase: "final_answer"` (or no phase and no call after it) is the
 *   `final` answer;
 * - `function_call` and `custom_tool_call` items are calls (a custom
 *   call's input as the one string `{"input": …}`), their outputs tool
 *   messages;
 * - `item_reference` items must be resolved first ({@link resolveReferences});
 * - any other item type is refused by name (`unsupported_input_item`).
 * Returns the chat request and what each declared function is to the
 * client ({@link responsesTools}).
 */
export function responsesToChat(request: Obj): { ok: true; chat: Obj; routes: Map<string, ToolRoute> } | InputFault {
  const messages: Obj[] = [];
  if (typeof request.instructions === "string" && request.instructions !== "")
    messages.push({ role: "developer", content: request.instructions });
  const input = request.input;
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else if (Array.isArray(input)) {
    let cur: Obj | null = null;
    let preamble = false;
    const flush = () => {
      if (cur) {
        if (!Array.isArray(cur.tool_calls) && (preamble || cur.content === null)) cur.channel = "commentary";
        messages.push(cur);
      }
      cur = null;
      preamble = false;
    };
    const pending = (): Obj => (cur ??= { role: "assistant", content: null });
    const spoken = () => cur !== null && (Array.isArray(cur.tool_calls) || cur.content !== null);
    for (const [i, item] of input.entries()) {
      if (!isObj(item)) return { ok: false, code: "bad_request", message: "input items must be objects", param: `input[${i}]` };
      const type = item.type ?? "message";
      switch (type) {
        case "message": {
          const t = textOf(item.content, `input[${i}].content`);
          if (!t.ok) return t;
          if (item.role !== "assistant") {
            if (item.role !== "user" && item.role !== "system" && item.role !== "developer")
              return { ok: false, code: "bad_message", message: `unknown role ${describeValue(item.role)}`, param: `input[${i}].role` };
            flush();
            messages.push({ role: item.role, content: t.text });
            break;
          }
          const phase = item.phase ?? null;
          if (phase !== null && phase !== "commentary" && phase !== "final_answer")
            return {
              ok: false,
              code: "bad_message",
              message: `phase must be commentary or final_answer, not ${describeValue(phase)}`,
              param: `input[${i}].phase`,
            };
          if (phase === "commentary" || (phase === null && callFollows(input, i))) {
            if (spoken()) flush();
            pending().content = t.text;
            preamble = true;
          } else {
            if (spoken()) flush();
            pending().content = t.text;
            flush();
          }
          break;
        }
        case "reasoning": {
          if (spoken()) flush();
          const a = pending();
          a.reasoning = ((a.reasoning as string | undefined) ?? "") + reasoningOf(item);
          break;
        }
        case "function_call":
        case "custom_tool_call": {
          if (typeof item.call_id !== "string" || item.call_id === "")
            return { ok: false, code: "bad_tool_call", message: "a call needs a call_id", param: `input[${i}].call_id` };
          let args: unknown = item.arguments;
          if (type === "custom_tool_call") {
            if (typeof item.input !== "string")
              return {
                ok: false,
                code: "bad_tool_call",
                message: "a custom tool call's input must be a string",
                param: `input[${i}].input`,
              };
            args = JSON.stringify({ input: item.input });
          }
          const a = pending();
          const calls = (a.tool_calls as Obj[] | undefined) ?? [];
          calls.push({ id: item.call_id, type: "function", function: { name: callName(item), arguments: args } });
          a.tool_calls = calls;
          break;
        }
        case "function_call_output":
        case "custom_tool_call_output": {
          const t = outputOf(item.output, `input[${i}].output`);
          if (!t.ok) return t;
          flush();
          messages.push({ role: "tool", tool_call_id: item.call_id, content: t.text });
          break;
        }
        case "item_reference":
          return {
            ok: false,
            code: "item_not_found",
            message: `item ${describeValue(item.id)} is not stored`,
            param: `input[${i}].id`,
          };
        default:
          return unsupportedItem(type, i);
      }
    }
    flush();
  } else return { ok: false, code: "bad_request", message: "input must be a string or an array of items", param: "input" };
  const tools = responsesTools(request.tools);
  if (!tools.ok) return tools;
  const effort = isObj(request.reasoning) ? request.reasoning.effort : undefined;
  const format = isObj(request.text) ? request.text.format : undefined;
  const responseFormat = !isObj(format)
    ? format
    : format.type === "json_schema"
      ? {
          type: "json_schema",
          json_schema: { name: format.name, description: format.description, schema: format.schema, strict: format.strict },
        }
      : format;
  return {
    ok: true,
    routes: tools.routes,
    chat: {
      messages,
      ...(tools.functions.length > 0 ? { tools: tools.functions } : {}),
      ...(effort ? { reasoning_effort: effort } : {}),
      // text.format (Responses' shape, flat) as Chat's response_format (nested json_schema)
      ...(responseFormat !== undefined ? { response_format: responseFormat } : {}),
      ...(isObj(request.harmony) ? { harmony: request.harmony } : {}),
    },
  };
}

/**
 * A Responses `tool_choice` in the terms of {@link responsesTools}'
 * functions: a named custom tool, or a function inside a namespace, by
 * its Harmony name; anything else as it is (checked by toolChoiceOf).
 */
export function responsesToolChoice(choice: unknown): unknown {
  if (!isObj(choice)) return choice;
  if ((choice.type === "function" || choice.type === "custom") && typeof choice.name === "string")
    return { type: "function", name: callName(choice) };
  return choice;
}

/** The `item_reference` items of `items`: their ids, with where they are. */
export function itemReferences(items: readonly unknown[]): { index: number; id: unknown }[] {
  const out: { index: number; id: unknown }[] = [];
  items.forEach((item, index) => {
    if (isObj(item) && item.type === "item_reference") out.push({ index, id: item.id });
  });
  return out;
}

/** The response an item id of the sidecar's names (`rs_<base>_3`, `msg_<base>_in0`, … → `resp_<base>`), or null for an id the sidecar did not make. */
export function responseIdOfItem(id: string): string | null {
  const m = /^[a-z]+_([0-9a-z]+)_(?:in)?[0-9]+$/.exec(id);
  return m === null ? null : `resp_${m[1]}`;
}

/** The item `id` among a stored response's output and input items, or null. */
export function findItem(record: PreviousResponse, id: string): Obj | null {
  const output = Array.isArray(record.response.output) ? record.response.output : [];
  for (const item of output) if (isObj(item) && item.id === id) return item;
  for (const item of record.input) if (item.id === id) return item;
  return null;
}

/** `items` with each `item_reference` replaced by the item it names (`found`, by id); a reference not found is `item_not_found`. */
export function resolveReferences(items: readonly unknown[], found: ReadonlyMap<string, Obj>): { ok: true; items: unknown[] } | InputFault {
  const out: unknown[] = [];
  for (const [i, item] of items.entries()) {
    if (!isObj(item) || item.type !== "item_reference") {
      out.push(item);
      continue;
    }
    const target = typeof item.id === "string" ? found.get(item.id) : undefined;
    if (target === undefined || (isObj(target) && target.type === "item_reference"))
      return {
        ok: false,
        code: "item_not_found",
        message: `Item with id ${describeValue(item.id)} not found.`,
        param: `input[${i}].id`,
      };
    out.push(target);
  }
  return { ok: true, items: out };
}

/** A stored response, as a continuation reads it (src/store/responses.ts). */
export interface PreviousResponse {
  response: Obj;
  input: Obj[];
}

/**
 * The input items of a request that continues `previous`
 * (`previous_response_id`): the previous response's input items and output
 * items, then this request's `input` (a string is one user message). The
 * previous response's `instructions` are not carried over, as in OpenAI's
 * API.
 */
export function continuedInput(
  previous: PreviousResponse | null,
  input: unknown,
): { ok: true; items: unknown[] } | { ok: false; message: string; param: string } {
  let mine: unknown[];
  if (typeof input === "string") mine = [{ type: "message", role: "user", content: input }];
  else if (Array.isArray(input)) mine = input;
  else if ((input === undefined || input === null) && previous !== null) mine = [];
  else return { ok: false, message: "input must be a string or an array of items", param: "input" };
  if (previous === null) return { ok: true, items: mine };
  const output = Array.isArray(previous.response.output) ? previous.response.output : [];
  const items: unknown[] = [];
  for (const item of previous.input) items.push(item);
  for (const item of output) items.push(item);
  for (const item of mine) items.push(item);
  return { ok: true, items };
}

/** The prefix of an input item's id, by its type (as OpenAI's ids read). */
const ITEM_ID_PREFIX: Readonly<Record<string, string>> = {
  message: "msg",
  reasoning: "rs",
  function_call: "fc",
  function_call_output: "fco",
  custom_tool_call: "ctc",
  custom_tool_call_output: "ctco",
};

/**
 * `items` (objects, as `responsesToChat` accepted them) as stored input
 * items: each has an `id`, its own or `<prefix>_<base>_in<n>`; a bare string
 * input is one user message.
 */
export function storedInputItems(items: readonly unknown[], base: string): Obj[] {
  const out: Obj[] = [];
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    if (!isObj(item)) continue;
    if (typeof item.id === "string" && item.id !== "") {
      out.push(item);
      continue;
    }
    const type = typeof item.type === "string" ? item.type : "message";
    out.push({ id: `${ITEM_ID_PREFIX[type] ?? "item"}_${base}_in${i}`, ...item, ...(item.type === undefined ? { type: "message" } : {}) });
  }
  return out;
}

/** A Responses `usage` object from an engine's token counts and the parser's count of reasoning tokens. */
export function responsesUsage(usage: CompletionUsage, reasoningTokens: number): Obj {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: cachedTokens(usage) },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}
