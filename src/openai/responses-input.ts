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

/** A Chat Completions `usage` object from an engine's token counts (cached prompt tokens passed through). */
export function chatUsage(usage: CompletionUsage): Obj {
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
    prompt_tokens_details: { cached_tokens: cachedTokens(usage) },
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
  return {
    ok: true,
    chat: {
      messages,
      ...(tools ? { tools } : {}),
      ...(effort ? { reasoning_effort: effort } : {}),
      ...(isObj(request.harmony) ? { harmony: request.harmony } : {}),
    },
  };
}

/** A Responses `usage` object from an engine's token counts. */
export function responsesUsage(usage: CompletionUsage): Obj {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: cachedTokens(usage) },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}
