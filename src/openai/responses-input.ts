/**
 * The Responses API request and usage in terms of Chat Completions: a
 * Responses `input` (with `instructions`, `tools`, `reasoning`) becomes the
 * chat request the renderer takes, and an engine's token counts become a
 * Responses `usage` object.
 */
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

/** Responses `input` (and `instructions`, `tools`) → a chat request for the renderer. */
export function responsesToChat(request: Obj): { ok: true; chat: Obj } | { ok: false; message: string; param: string } {
  const messages: Obj[] = [];
  if (typeof request.instructions === "string" && request.instructions !== "")
    messages.push({ role: "developer", content: request.instructions });
  const input = request.input;
  const textOf = (content: unknown): string | null => {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return null;
    return content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
  };
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else if (Array.isArray(input)) {
    let assistant: Obj | null = null;
    const flush = () => {
      if (assistant) messages.push(assistant);
      assistant = null;
    };
    const pending = (): Obj => (assistant ??= { role: "assistant", content: null });
    for (const [i, item] of input.entries()) {
      if (!isObj(item)) return { ok: false, message: "input items must be objects", param: `input[${i}]` };
      const type = item.type ?? "message";
      if (type === "message") {
        const text = textOf(item.content);
        if (text === null) return { ok: false, message: "message content must be text", param: `input[${i}].content` };
        if (item.role === "assistant") {
          const a = pending();
          a.content = ((a.content as string | null) ?? "") + text;
          flush();
        } else {
          flush();
          messages.push({ role: item.role, content: text });
        }
      } else if (type === "reasoning") {
        const parts = Array.isArray(item.content) ? item.content : Array.isArray(item.summary) ? item.summary : [];
        const a = pending();
        a.reasoning =
          ((a.reasoning as string | undefined) ?? "") + parts.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
      } else if (type === "function_call") {
        const a = pending();
        const calls = (a.tool_calls as Obj[] | undefined) ?? [];
        calls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } });
        a.tool_calls = calls;
      } else if (type === "function_call_output") {
        flush();
        messages.push({
          role: "tool",
          tool_call_id: item.call_id,
          content: typeof item.output === "string" ? item.output : JSON.stringify(item.output),
        });
      } else return { ok: false, message: `unsupported input item type ${describeValue(type)}`, param: `input[${i}].type` };
    }
    flush();
  } else return { ok: false, message: "input must be a string or an array of items", param: "input" };
  const tools = Array.isArray(request.tools)
    ? request.tools
        .filter((t) => isObj(t) && t.type === "function")
        .map((t) => {
          const f = t as Obj;
          return { type: "function", function: { name: f.name, description: f.description, parameters: f.parameters } };
        })
    : undefined;
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
    chat: {
      messages,
      ...(tools ? { tools } : {}),
      ...(effort ? { reasoning_effort: effort } : {}),
      // text.format (Responses' shape, flat) as Chat's response_format (nested json_schema)
      ...(responseFormat !== undefined ? { response_format: responseFormat } : {}),
      ...(isObj(request.harmony) ? { harmony: request.harmony } : {}),
    },
  };
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
