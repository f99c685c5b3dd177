/**
 * Harmony events -> OpenAI Chat Completions (`chat.completion.chunk` stream,
 * and a `chat.completion` accumulator for non-streaming requests).
 *
 * One adapter per choice of one request. Pure and deterministic: ids and
 * timestamps come from the options, nothing reads a clock or a random source.
 *
 * Mapping:
 * - `reasoning` deltas (analysis channel)      -> `delta.reasoning` or `delta.reasoning_content`
 * - `content` deltas (final channel)           -> `delta.content`
 * - `commentary` deltas (preambles)            -> `delta.content` (option `commentary`)
 * - function calls (`functions.*` recipients)  -> `delta.tool_calls`, arguments through
 *   ./streamed-arguments.ts: their deltas add up to `tool_call_end`'s arguments,
 *   repaired where a known broken shape applies (docs/resilience.md, rule 12)
 * - built-in tool calls (`python`, `browser.*`, `container.*`, ...: not
 *   client-executable) -> their arguments as reasoning text (option `builtinTools`)
 * - a message the parser read as text because calls were not allowed (a
 *   `call_not_allowed` recovery: no tools, or tool_choice "none") -> dropped,
 *   said in the `harmony` chunk before the finish (`recoveries`)
 * - `other` deltas (authors other than the assistant), other `recovery` events -> dropped
 * - `error` events -> no output; kept in `errors`
 * - `done` -> a last chunk with `finish_reason` (and a usage chunk when `promptTokens` is set)
 *
 * Preambles go to `content` as vLLM streams them: they are written for the
 * user ("Let me check the weather in both cities."), unlike chain of thought.
 * Built-in tools are executed by the server's harness, never by the client,
 * so they are not `tool_calls` (a client would try to run `python`); their
 * arguments stay visible as reasoning, as in vLLM. Text of consecutive
 * messages is concatenated as is (no separator is inserted).
 */
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
} from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import { UPSTREAM_DEFAULTS } from "../core/defaults.js";
import type { DeltaKind, DoneEvent, ErrorEvent, FinishReason, HarmonyEvent, ToolCallEndEvent, ToolCallStartEvent } from "../core/events.js";
import { DroppedCalls, type DroppedCall } from "./dropped-calls.js";
import { StreamedArguments } from "./streamed-arguments.js";

export type ReasoningField = "reasoning" | "reasoning_content";
export type ChatFinishReason = "stop" | "length" | "tool_calls";

export interface ChatAdapterOptions {
  /** The completion id (`chatcmpl-...`), repeated in every chunk. */
  id: string;
  model: string;
  /** Unix seconds. */
  created: number;
  /** Where reasoning goes: `reasoning` (current vLLM, OpenRouter; default) or `reasoning_content` (llama.cpp, older vLLM). */
  reasoningField?: ReasoningField;
  /** `choices[].index` of this stream (default 0). */
  choiceIndex?: number;
  /** Preambles (commentary channel, no recipient): `content` (default, as vLLM), `reasoning`, or `drop`. */
  commentary?: "content" | "reasoning" | "drop";
  /** Calls to built-in tools (recipients outside `functionNamespace`): `reasoning` (default, as vLLM) or `drop`. */
  builtinTools?: "reasoning" | "drop";
  /** Recipients `<functionNamespace>.<name>` are client functions (default `functions`). */
  functionNamespace?: string;
  /** Tool call id; default the parser's `tool_call_start.id` (configure the parser's `callIdPrefix` to make ids unique). */
  toolCallId?: (event: ToolCallStartEvent) => string;
  /**
   * Prompt token count. When set, usage is reported: a last chunk with
   * `choices: []` and `usage` (as with `stream_options.include_usage`), and
   * `usage` in the accumulated completion. `completion_tokens` is the parser's
   * token count.
   */
  promptTokens?: number;
}

/** A streamed delta: the official one plus the reasoning field. */
export interface HarmonyChatDelta extends ChatCompletionChunk.Choice.Delta {
  reasoning?: string;
  reasoning_content?: string;
}

export interface HarmonyChatChunkChoice extends ChatCompletionChunk.Choice {
  delta: HarmonyChatDelta;
  finish_reason: ChatFinishReason | null;
  logprobs: null;
}

/** A `chat.completion.chunk` (assignable to the `openai` package's `ChatCompletionChunk`). */
export interface HarmonyChatCompletionChunk extends ChatCompletionChunk {
  choices: HarmonyChatChunkChoice[];
  /**
   * Not OpenAI's: a chunk with no choices that carries a function call's
   * whole arguments after its last delta (the parser's `tool_call_end`,
   * repaired where a known broken shape applies). The call's deltas add up
   * to the same text (./streamed-arguments.ts); the non-streaming answer
   * takes the call's arguments from it, and a streaming front does not
   * send it on.
   */
  harmony?: {
    tool_call_end?: { index: number; choice: number; arguments: string; valid_json: boolean };
    /** On a chunk of its own just before the finish reason: the choice's reasoning tokens (the parser's `done.reasoning_tokens`). */
    reasoning_tokens?: number;
    /** On that chunk: the calls dropped because calls were not allowed. */
    recoveries?: DroppedCall[];
    /** On the same chunk: the parser's repairs by kind (empty when there were none), for a front that logs them. */
    repairs?: Record<string, number>;
  };
}

export interface HarmonyChatCompletionMessage extends ChatCompletionMessage {
  content: string | null;
  refusal: null;
  reasoning?: string | null;
  reasoning_content?: string | null;
  tool_calls?: ChatCompletionMessageFunctionToolCall[];
}

export interface HarmonyChatCompletionChoice extends ChatCompletion.Choice {
  finish_reason: ChatFinishReason;
  logprobs: null;
  message: HarmonyChatCompletionMessage;
}

/** A `chat.completion` (assignable to the `openai` package's `ChatCompletion`). */
export interface HarmonyChatCompletion extends ChatCompletion {
  choices: HarmonyChatCompletionChoice[];
}

/**
 * The chat `finish_reason` for a harmony `done`.
 * - `stop` / `tool_calls`: `tool_calls` when this choice streamed at least one
 *   function call, else `stop` (a stream ending in a built-in tool call has no
 *   client-executable call, so it is `stop`).
 * - `length`: `length`.
 * - `abort`, `error`: `length`. Chat has no finish reason for an output that
 *   ended abnormally; `length` is the one that tells clients the output is
 *   cut short (so a partial answer is not taken as final, and a call whose
 *   arguments may be truncated is not executed because of `tool_calls`).
 *   The harmony reason stays available as `harmonyFinishReason`.
 */
export function chatFinishReason(reason: FinishReason, functionCalls: number): ChatFinishReason {
  switch (reason) {
    case "stop":
    case "tool_calls":
      return functionCalls > 0 ? "tool_calls" : "stop";
    case "length":
    case "abort":
    case "error":
      return "length";
  }
}

type Route = { kind: "function"; toolIndex: number; args: StreamedArguments } | { kind: "builtin" };

/** Streaming adapter: harmony events in, `chat.completion.chunk` objects out. */
export class ChatCompletionChunkAdapter {
  readonly options: Readonly<ChatAdapterOptions>;
  /** Parser `error` events seen (they produce no chunk). */
  readonly errors: ErrorEvent[] = [];
  /** The harmony finish reason once `done` was pushed. */
  harmonyFinishReason: FinishReason | null = null;
  /** The chat finish reason once `done` was pushed. */
  finishReason: ChatFinishReason | null = null;
  /** Function calls streamed so far (the next `tool_calls[].index`). */
  functionCalls = 0;
  /** The parser's repairs so far, by kind. */
  readonly repairs: Record<string, number> = {};
  private started = false;
  private routeIndex = -1;
  private route: Route | null = null;
  private readonly reasoningField: ReasoningField;
  private readonly choiceIndex: number;
  private readonly namespace: string;
  /** Calls dropped because calls were not allowed (`call_not_allowed` recoveries). */
  readonly droppedCalls = new DroppedCalls();

  constructor(options: ChatAdapterOptions) {
    this.options = { ...options };
    this.reasoningField = options.reasoningField ?? UPSTREAM_DEFAULTS.reasoningField;
    this.choiceIndex = options.choiceIndex ?? 0;
    this.namespace = options.functionNamespace ?? "functions";
  }

  /** True once `done` was pushed; later events are ignored. */
  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** The first chunk (`delta.role: "assistant"`), once; `push` sends it itself if needed. */
  start(): HarmonyChatCompletionChunk[] {
    if (this.started) return [];
    this.started = true;
    return [this.chunk({ role: "assistant", content: "" }, null)];
  }

  push(event: HarmonyEvent): HarmonyChatCompletionChunk[] {
    if (this.finished) return [];
    const out = this.start();
    if (this.droppedCalls.drops(event)) return out;
    switch (event.type) {
      case "message_start":
        this.settleArguments(out);
        this.routeIndex = event.index;
        this.route = null;
        break;
      case "tool_call_start":
        this.settleArguments(out);
        this.toolCallStart(event, out);
        break;
      case "tool_call_end":
        if (event.index === this.routeIndex && this.route?.kind === "function") this.toolCallEnd(this.route, event, out);
        break;
      case "delta":
        this.delta(event.index, event.kind, event.text, out);
        break;
      case "error":
        this.errors.push(event);
        break;
      case "done":
        this.done(event, out);
        break;
      case "recovery":
        this.repairs[event.kind] = (this.repairs[event.kind] ?? 0) + (event.count ?? 1);
        break;
      case "message_end":
        break;
    }
    return out;
  }

  /**
   * The delta field a text delta of message `index` and `kind` goes to when
   * push() would make it one chunk of that text and nothing else (the role
   * chunk sent, not finished, no call dropped or waiting to be, reasoning or
   * final text); null when push() must decide. Changes nothing.
   */
  plainField(index: number, kind: DeltaKind): "content" | ReasoningField | null {
    if (!this.started || this.finished || !this.droppedCalls.keeps(index)) return null;
    if (kind === "content") return "content";
    if (kind === "reasoning") return this.reasoningField;
    return null;
  }

  private toolCallStart(e: ToolCallStartEvent, out: HarmonyChatCompletionChunk[]): void {
    this.routeIndex = e.index;
    if (e.namespace !== this.namespace) {
      this.route = { kind: "builtin" };
      return;
    }
    const toolIndex = this.functionCalls++;
    this.route = { kind: "function", toolIndex, args: new StreamedArguments() };
    const id = this.options.toolCallId ? this.options.toolCallId(e) : e.id;
    out.push(this.chunk({ tool_calls: [{ index: toolIndex, id, type: "function", function: { name: e.name, arguments: "" } }] }, null));
  }

  /**
   * The call's whole arguments: what they have beyond the streamed deltas
   * (a repair's text where the generated one stopped being JSON) as a last
   * delta, then the harmony chunk that carries them.
   */
  private toolCallEnd(route: Extract<Route, { kind: "function" }>, e: ToolCallEndEvent, out: HarmonyChatCompletionChunk[]): void {
    this.argumentsDelta(route.toolIndex, route.args.end(e.arguments), out);
    const call = { index: route.toolIndex, choice: this.choiceIndex, arguments: e.arguments, valid_json: e.valid_json };
    out.push(this.noChoices({ harmony: { tool_call_end: call } }));
  }

  /** A function call that ends with no tool_call_end (cut short by a length limit or an abort): its held deltas, as generated. */
  private settleArguments(out: HarmonyChatCompletionChunk[]): void {
    const route = this.route;
    if (route?.kind === "function" && !route.args.settled) this.argumentsDelta(route.toolIndex, route.args.flush(), out);
  }

  private argumentsDelta(toolIndex: number, text: string, out: HarmonyChatCompletionChunk[]): void {
    if (text !== "") out.push(this.chunk({ tool_calls: [{ index: toolIndex, function: { arguments: text } }] }, null));
  }

  private delta(index: number, kind: DeltaKind, text: string, out: HarmonyChatCompletionChunk[]): void {
    switch (kind) {
      case "reasoning":
        out.push(this.chunk(this.reasoningDelta(text), null));
        return;
      case "content":
        out.push(this.chunk({ content: text }, null));
        return;
      case "commentary": {
        const mode = this.options.commentary ?? "content";
        if (mode === "content") out.push(this.chunk({ content: text }, null));
        else if (mode === "reasoning") out.push(this.chunk(this.reasoningDelta(text), null));
        return;
      }
      case "tool_args": {
        const route = index === this.routeIndex ? this.route : null;
        if (route?.kind === "function") this.argumentsDelta(route.toolIndex, route.args.push(text), out);
        else if ((this.options.builtinTools ?? "reasoning") === "reasoning") {
          out.push(this.chunk(this.reasoningDelta(text), null));
        }
        return;
      }
      case "other":
        return; // text of authors other than the assistant (tool results, user, ...)
    }
  }

  private done(e: DoneEvent, out: HarmonyChatCompletionChunk[]): void {
    this.settleArguments(out);
    this.harmonyFinishReason = e.finish_reason;
    const reason = chatFinishReason(e.finish_reason, this.functionCalls);
    this.finishReason = reason;
    // not OpenAI's: the choice's reasoning tokens, for a front that reports the engine's usage (it does not send this on)
    const dropped = this.droppedCalls.recoveries;
    out.push(
      this.noChoices({
        harmony: {
          reasoning_tokens: e.reasoning_tokens,
          ...(dropped.length > 0 ? { recoveries: dropped.map((r) => ({ ...r })) } : {}),
          repairs: { ...this.repairs },
        },
      }),
    );
    out.push(this.chunk({}, reason));
    if (this.options.promptTokens !== undefined) {
      out.push(this.noChoices({ usage: usageOf(this.options.promptTokens, e.tokens, e.reasoning_tokens) }));
    }
  }

  private reasoningDelta(text: string): HarmonyChatDelta {
    return this.reasoningField === "reasoning" ? { reasoning: text } : { reasoning_content: text };
  }

  /** A chunk with no choices, carrying `extra` (usage, or the harmony extension). */
  private noChoices(extra: Pick<HarmonyChatCompletionChunk, "usage" | "harmony">): HarmonyChatCompletionChunk {
    return {
      id: this.options.id,
      object: "chat.completion.chunk",
      created: this.options.created,
      model: this.options.model,
      choices: [],
      ...extra,
    };
  }

  private chunk(delta: HarmonyChatDelta, finish: ChatFinishReason | null): HarmonyChatCompletionChunk {
    return {
      id: this.options.id,
      object: "chat.completion.chunk",
      created: this.options.created,
      model: this.options.model,
      choices: [{ index: this.choiceIndex, delta, finish_reason: finish, logprobs: null }],
    };
  }
}

function usageOf(prompt: number, completion: number, reasoning: number): CompletionUsage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    completion_tokens_details: { reasoning_tokens: reasoning },
  };
}

/**
 * Non-streaming: harmony events in (`push`), one `chat.completion` out
 * (`result()`). It folds the streaming adapter's chunks, so both paths agree
 * by construction; `addChunk` folds chunks from elsewhere.
 */
export class ChatCompletionAccumulator {
  readonly adapter: ChatCompletionChunkAdapter;
  private content: string | null = null;
  private reasoning: string | null = null;
  private readonly toolCalls: ChatCompletionMessageFunctionToolCall[] = [];
  private finish: ChatFinishReason | null = null;
  private usage: CompletionUsage | undefined;

  constructor(options: ChatAdapterOptions) {
    this.adapter = new ChatCompletionChunkAdapter(options);
  }

  get finished(): boolean {
    return this.finish !== null;
  }

  push(event: HarmonyEvent): void {
    for (const chunk of this.adapter.push(event)) this.addChunk(chunk);
  }

  /** Folds one chunk of this choice (chunks of other choices are ignored). */
  addChunk(chunk: HarmonyChatCompletionChunk): void {
    if (chunk.usage) this.usage = { ...chunk.usage };
    const want = this.adapter.options.choiceIndex ?? 0;
    const end = chunk.harmony?.tool_call_end;
    if (end && end.choice === want) {
      // the call's whole arguments, repaired where a known broken shape applied
      const call = this.toolCalls[end.index];
      if (call) call.function.arguments = end.arguments;
    }
    for (const choice of chunk.choices) {
      if (choice.index !== want) continue;
      const d = choice.delta;
      if (d.content) this.content = (this.content ?? "") + d.content;
      const r = d.reasoning ?? d.reasoning_content;
      if (r) this.reasoning = (this.reasoning ?? "") + r;
      for (const tc of d.tool_calls ?? []) {
        let call = this.toolCalls[tc.index];
        if (!call) {
          call = { id: "", type: "function", function: { name: "", arguments: "" } };
          this.toolCalls[tc.index] = call;
        }
        if (tc.id) call.id = tc.id;
        if (tc.function?.name) call.function.name = tc.function.name;
        if (tc.function?.arguments) call.function.arguments += tc.function.arguments;
      }
      if (choice.finish_reason) this.finish = choice.finish_reason;
    }
  }

  /** The `chat.completion`; throws if the stream has not finished (no `done` yet). */
  result(): HarmonyChatCompletion {
    // a bug of the caller's: it asked before pushing the stream's done event
    if (this.finish === null) throw new Error("bug: ChatCompletionAccumulator.result(): the stream has not finished (push its done event)");
    const o = this.adapter.options;
    const message: HarmonyChatCompletionMessage = { role: "assistant", content: this.content, refusal: null };
    message[o.reasoningField ?? UPSTREAM_DEFAULTS.reasoningField] = this.reasoning;
    if (this.toolCalls.length > 0) {
      message.tool_calls = this.toolCalls.map((c) => ({ id: c.id, type: "function", function: { ...c.function } }));
    }
    const completion: HarmonyChatCompletion = {
      id: o.id,
      object: "chat.completion",
      created: o.created,
      model: o.model,
      choices: [{ index: o.choiceIndex ?? 0, message, finish_reason: this.finish, logprobs: null }],
    };
    if (this.usage) completion.usage = { ...this.usage };
    return completion;
  }
}
