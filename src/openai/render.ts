/**
 * Rendering an OpenAI-style chat request into a Harmony prompt (ids and
 * text), with chain-of-thought restoration from the service's memory.
 *
 * The request is a Chat Completions request; an optional `harmony` object
 * sets what the system message says and whether to restore reasoning:
 *   {"messages": [...], "tools": [...], "reasoning_effort": "high",
 *    "harmony": {"model_identity", "knowledge_cutoff", "current_date",
 *                "builtin_tools": {"browser", "python"}, "restore_reasoning": true}}
 */
import type { RenderErrorCode, RequestErrorCode } from "../core/errors.js";
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { piecesToText, piecesToTokens, renderConversationForCompletionPieces, RenderError } from "../core/render.js";
import { fromOpenAIRequest, type FromOpenAIOptions } from "./request.js";

export interface Restored {
  tool_call_id: string;
  message_index: number;
  chars: number;
}

export type RenderOutcome =
  | { ok: true; ids: number[]; text: string; restored: Restored[] }
  | { ok: false; error: { code: RequestErrorCode | RenderErrorCode; message: string; path: string } };

export interface RenderDeps {
  encodeOrdinary(text: string): ArrayLike<number>;
  /** Remembered reasoning by tool call id (absent: no restoration). */
  recall?(toolCallId: string): string | undefined;
}

const hasReasoning = (m: Obj) =>
  ["reasoning", "reasoning_content", "thinking"].some((k) => typeof m[k] === "string" && (m[k] as string).trim() !== "");

function optionsOf(request: Obj): FromOpenAIOptions & { restore: boolean } {
  const h = isObj(request.harmony) ? request.harmony : {};
  const opts: FromOpenAIOptions & { restore: boolean } = { restore: h.restore_reasoning !== false };
  if (typeof h.model_identity === "string" || h.model_identity === null) opts.modelIdentity = h.model_identity as string | null;
  if (typeof h.knowledge_cutoff === "string" || h.knowledge_cutoff === null) opts.knowledgeCutoff = h.knowledge_cutoff as string | null;
  if (typeof h.current_date === "string") opts.currentDate = h.current_date;
  if (isObj(h.builtin_tools)) opts.builtinTools = { browser: h.builtin_tools.browser === true, python: h.builtin_tools.python === true };
  return opts;
}

/** The assistant messages whose reasoning restoration would look up: tool calls, no reasoning of their own. */
function lacksReasoning(m: unknown): m is Obj & { tool_calls: unknown[] } {
  return isObj(m) && m.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length > 0 && !hasReasoning(m);
}

/**
 * Per message, whether restoration looks its calls up: it lacks reasoning,
 * and so do the assistant messages right before it (one turn sent as
 * several messages, its reasoning in the first: the client sent it back).
 */
function restorable(messages: readonly unknown[]): boolean[] {
  let turnHasReasoning = false;
  return messages.map((m) => {
    if (!isObj(m) || m.role !== "assistant") {
      turnHasReasoning = false;
      return false;
    }
    const lacks = lacksReasoning(m) && !turnHasReasoning;
    if (hasReasoning(m)) turnHasReasoning = true;
    return lacks;
  });
}

function callIdOf(call: unknown): string | undefined {
  return isObj(call) && typeof call.id === "string" ? call.id : undefined;
}

/**
 * The tool call ids {@link restoreReasoning} would look up in `request`
 * (those of assistant messages that call tools and carry no reasoning,
 * nor do the assistant messages of their turn before them), in
 * order; none when the request does not ask for restoration. A store that
 * answers asynchronously fetches these first, in one batch, then hands
 * restoreReasoning what it found.
 */
export function missingReasoning(request: unknown): string[] {
  const ids: string[] = [];
  if (!isObj(request) || !Array.isArray(request.messages) || !optionsOf(request).restore) return ids;
  const messages = request.messages as unknown[];
  const look = restorable(messages);
  for (const [i, m] of messages.entries()) {
    if (!look[i] || !lacksReasoning(m)) continue;
    for (const call of m.tool_calls) {
      const id = callIdOf(call);
      if (id !== undefined) ids.push(id);
    }
  }
  return ids;
}

/**
 * A request with dropped reasoning put back from the store, and what was put
 * back; or the request as it was. `recall` is synchronous: the in-process
 * store, or a map a shared store's batch fetch filled (see missingReasoning).
 */
export function restoreReasoning(
  request: unknown,
  recall: ((toolCallId: string) => string | undefined) | undefined,
): { request: unknown; restored: Restored[] } {
  const restored: Restored[] = [];
  if (!isObj(request) || !recall || !Array.isArray(request.messages)) return { request, restored };
  if (!optionsOf(request).restore) return { request, restored };
  // a turn (the assistant messages between two others) gets the reasoning once, on its first message: where
  // the model wrote it, before the turn's preamble and calls
  const messages = [...(request.messages as unknown[])];
  let start = -1;
  let has = false;
  messages.forEach((m, i) => {
    if (!isObj(m) || m.role !== "assistant") {
      start = -1;
      has = false;
      return;
    }
    if (start < 0) start = i;
    if (hasReasoning(m)) has = true;
    if (has || !lacksReasoning(m)) return;
    for (const call of m.tool_calls) {
      const id = callIdOf(call);
      const text = id === undefined ? undefined : recall(id);
      if (id !== undefined && text !== undefined) {
        restored.push({ tool_call_id: id, message_index: start, chars: text.length });
        messages[start] = { ...(messages[start] as Obj), reasoning: text };
        has = true;
        return;
      }
    }
  });
  return { request: { ...request, messages }, restored };
}

/** Render a request (its reasoning already restored) into prompt ids and text. */
export function renderRestored(request: unknown, restored: Restored[], encodeOrdinary: (text: string) => ArrayLike<number>): RenderOutcome {
  if (!isObj(request)) return { ok: false, error: { code: "bad_request", message: "the request must be a JSON object", path: "" } };
  const { restore: _restore, ...options } = optionsOf(request);
  const conv = fromOpenAIRequest(request, options);
  if (!conv.ok) return { ok: false, error: conv.error };
  try {
    const pieces = renderConversationForCompletionPieces(conv.messages, "assistant");
    return { ok: true, ids: piecesToTokens(pieces, encodeOrdinary), text: piecesToText(pieces), restored };
  } catch (e) {
    if (e instanceof RenderError) return { ok: false, error: { code: e.code, message: e.message, path: "" } };
    throw e;
  }
}

/** Restore, then render, in one go (the CLI; the service splits the two across threads). */
export function renderRequest(request: unknown, deps: RenderDeps): RenderOutcome {
  const { request: req, restored } = restoreReasoning(request, deps.recall);
  return renderRestored(req, restored, deps.encodeOrdinary);
}
