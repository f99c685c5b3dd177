/**
 * One home for reading an OpenAI request before the engine: what Chat
 * Completions and Responses ask of a generation, checked in one order and
 * read into a plan that holds everything the later stages need (the
 * choices, the tools and what the parser lets through, a forced call,
 * sampling and limits for the engine, stop strings, streaming and logprobs
 * options, the answer's format), or the refusal: status, code, param and
 * message. Pure: the render (which reads the messages) and the store
 * (Responses' previous turns) are the caller's.
 */
import { MAX_TOP_LOGPROBS } from "../core/defaults.js";
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { checkAnswerFormat, declaredToolNames, forcedCallPieces, toolChoiceOf, type AnswerFormat, type HarmonyPiece } from "./request.js";
import { checkSampling } from "./sampling.js";

/** A request refused before the engine: OpenAI's error fields. */
export interface PlanError {
  ok: false;
  status: 400;
  code: "bad_request";
  param: string | null;
  message: string;
}

/** Which calls the parser lets through (./dropped-calls.ts says what it drops). */
export type CallPolicy = "any" | "none" | "one";

/** What both endpoints plan. */
export interface FrontPlan {
  ok: true;
  /** The choices to generate (Responses: 1). */
  n: number;
  model: string;
  stream: boolean;
  /** The declared function names. */
  tools: string[];
  calls: CallPolicy;
  /** A call to force (tool_choice "required" or a named function), as Harmony pieces; null: none. */
  force: { prefix: HarmonyPiece[]; header: HarmonyPiece[] } | null;
  /** What `response_format` asks the answer to be (null: text, or a format the render refuses). */
  format: AnswerFormat | null;
  /** The engine's parameters: the client's request (its sampling fields), the token limit, logprobs asked. */
  engine: { client: Obj; maxTokens: unknown; logprobs?: number };
}

/** A Chat Completions request's plan. */
export interface ChatPlan extends FrontPlan {
  reasoningField: "reasoning" | "reasoning_content";
  includeUsage: boolean;
  includeReasoning: boolean;
  /** `logprobs: true`: the alternatives asked per token (`top_logprobs`); null: no logprobs. */
  logprobs: { top: number } | null;
  /** The raw `stop` (checked by the sampling check; ./stop.ts reads it). */
  stop: unknown;
}

const refuse = (message: string, param: string | null = null): PlanError => ({
  ok: false,
  status: 400,
  code: "bad_request",
  param,
  message,
});

/**
 * Which calls the parser lets through: tool_choice "none", or a request
 * that declares no tools (and no built-in tool), allows none (a call the
 * model writes anyway is dropped with a call_not_allowed recovery, and the
 * answer says so: ./dropped-calls.ts); parallel_tool_calls false allows one
 * (the first complete call ends the answer).
 */
export function callsOf(request: Obj, tools: readonly string[]): CallPolicy {
  if (request.tool_choice === "none") return "none";
  const builtin = isObj(request.harmony) && isObj(request.harmony.builtin_tools) ? request.harmony.builtin_tools : {};
  if (tools.length === 0 && builtin.browser !== true && builtin.python !== true) return "none";
  if (request.parallel_tool_calls === false) return "one";
  return "any";
}

/**
 * Request fields the sidecar cannot honour yet, refused by name rather than
 * dropped without a word: Responses' logprobs; Chat's logprobs out of shape.
 */
function unsupported(request: Obj, endpoint: "chat" | "responses"): PlanError | null {
  if (endpoint === "responses") {
    const include = Array.isArray(request.include) ? request.include : [];
    if (typeof request.top_logprobs === "number" || include.includes("message.output_text.logprobs"))
      return refuse("logprobs are not supported by the sidecar's Responses yet (Chat Completions has them)", "top_logprobs");
    return null;
  }
  const lp = request.logprobs;
  if (lp !== undefined && lp !== null && typeof lp !== "boolean") return refuse("logprobs must be true or false", "logprobs");
  const top = request.top_logprobs;
  if (top !== undefined && top !== null) {
    if (typeof top !== "number" || !Number.isInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS)
      return refuse(`top_logprobs must be an integer from 0 to ${MAX_TOP_LOGPROBS}`, "top_logprobs");
    if (lp !== true) return refuse("top_logprobs needs logprobs: true", "top_logprobs");
  }
  return null;
}

/**
 * The checks both endpoints make, in this order: `tool_choice` against the
 * declared tools (and a forced call takes n = 1), the sampling fields,
 * what is not supported.
 */
function common(
  request: Obj,
  chat: Obj,
  choice: unknown,
  n: number,
  endpoint: "chat" | "responses",
  maxTokens: unknown,
): FrontPlan | PlanError {
  const tools = declaredToolNames(chat);
  const c = toolChoiceOf(choice, tools);
  if (!c.ok) return refuse(c.message, "tool_choice");
  const force = forcedCallPieces(c.choice);
  if (force !== null && n > 1) return refuse('tool_choice "required" or a named function takes n = 1', "n");
  const bad = checkSampling(request);
  if (bad) return refuse(bad.message, bad.param);
  const no = unsupported(request, endpoint);
  if (no) return no;
  const format = checkAnswerFormat(chat);
  return {
    ok: true,
    n,
    model: typeof request.model === "string" ? request.model : "gpt-oss",
    stream: request.stream === true,
    tools,
    calls: callsOf(request, tools),
    force,
    format: format.ok ? format.format : null,
    engine: { client: request, maxTokens },
  };
}

/** A Chat Completions request (a JSON object) read into its plan; `reasoningField`: the server's default. */
export function planChat(request: Obj, reasoningField: "reasoning" | "reasoning_content"): ChatPlan | PlanError {
  const n = request.n === undefined || request.n === null ? 1 : request.n;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 16) return refuse("n must be an integer from 1 to 16", "n");
  const plan = common(request, request, request.tool_choice, n, "chat", request.max_completion_tokens ?? request.max_tokens);
  if (!plan.ok) return plan;
  const h = isObj(request.harmony) ? request.harmony : {};
  const logprobs = request.logprobs === true ? { top: typeof request.top_logprobs === "number" ? request.top_logprobs : 0 } : null;
  if (logprobs) plan.engine.logprobs = logprobs.top;
  return {
    ...plan,
    reasoningField: h.reasoning_field === "reasoning_content" || h.reasoning_field === "reasoning" ? h.reasoning_field : reasoningField,
    includeUsage: isObj(request.stream_options) && request.stream_options.include_usage === true,
    includeReasoning: request.include_reasoning !== false,
    logprobs,
    stop: request.stop,
  };
}

/**
 * A Responses request read into its plan, given `chat`: its input as a chat
 * request (./responses-input.ts's responsesToChat, after the store's items
 * are in) and `choice`: its tool_choice in Chat's terms.
 */
export function planResponses(request: Obj, chat: Obj, choice: unknown): FrontPlan | PlanError {
  return common(request, chat, choice, 1, "responses", request.max_output_tokens);
}
