/**
 * Harmony events -> OpenAI Responses API streaming events.
 *
 * One adapter per response. Pure and deterministic: ids and timestamps come
 * from the options. Every event carries `type` and `sequence_number`
 * (0, 1, 2, ... per stream).
 *
 * Output items, one per harmony message that has text (opened on its first
 * delta; function calls on `tool_call_start`):
 * - analysis (`reasoning` deltas)             -> `reasoning` item, one `reasoning_text` part
 * - final (`content` deltas)                  -> `message` item, `phase: "final_answer"`, one `output_text` part
 * - preambles (`commentary` deltas)           -> `message` item, `phase: "commentary"` (option `commentary`)
 * - function calls (`functions.*` recipients) -> `function_call` item (`call_id`, `name`, `arguments`);
 *   the `function_call_arguments.delta`s add up to the `.done` arguments,
 *   repaired where a known broken shape applies (./streamed-arguments.ts)
 * - built-in tool calls (`python`, `browser.*`, ...: not client-executable)
 *                                             -> `reasoning` item holding the call's arguments (option `builtinTools`)
 * - a message the parser read as text because calls were not allowed
 *   (a `call_not_allowed` recovery: the request has no tools, or
 *   tool_choice "none")                       -> dropped (a call's arguments are no answer),
 *                                                said in the closing event's `harmony.recoveries`
 * - `other` deltas, other `recovery` events   -> dropped; `error` events -> kept in `errors`
 *
 * The stream ends with `response.completed` (finish `stop` / `tool_calls`),
 * `response.incomplete` (`length`: `incomplete_details.reason:
 * "max_output_tokens"`; `abort`: `incomplete_details: {}`), or
 * `response.failed` (`error`: `error.code: "server_error"`).
 */
import type {
  Response,
  ResponseContentPartAddedEvent,
  ResponseContentPartDoneEvent,
  ResponseFunctionToolCall,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseReasoningItem,
  ResponseStreamEvent,
  ResponseUsage,
} from "openai/resources/responses/responses";
import type { DeltaKind, DoneEvent, ErrorEvent, FinishReason, HarmonyEvent, ToolCallStartEvent } from "../core/events.js";
import { DroppedCalls } from "./dropped-calls.js";
import { StreamedArguments } from "./streamed-arguments.js";

/** Response fields echoed from the request (instructions, tools, tool_choice, temperature, ...). */
export type ResponseEcho = Partial<
  Omit<Response, "id" | "object" | "created_at" | "model" | "status" | "output" | "output_text" | "error" | "incomplete_details" | "usage">
>;

export interface ResponsesAdapterOptions {
  /** The response id (`resp_...`). Item ids derive from it: `rs_<id>_<n>`, `msg_<id>_<n>`, `fc_<id>_<n>` (`resp_` stripped, n = output index). */
  id: string;
  model: string;
  /** Unix seconds (`created_at`). */
  created: number;
  /** Preambles (commentary channel, no recipient): `message` (default; `phase: "commentary"`), `reasoning`, or `drop`. */
  commentary?: "message" | "reasoning" | "drop";
  /** Calls to built-in tools (recipients outside `functionNamespace`): `reasoning` (default) or `drop`. */
  builtinTools?: "reasoning" | "drop";
  /** Recipients `<functionNamespace>.<name>` are client functions (default `functions`). */
  functionNamespace?: string;
  /** `call_id` of a function call; default the parser's `tool_call_start.id`. */
  toolCallId?: (event: ToolCallStartEvent) => string;
  /**
   * Prompt token count. When set, the final response has `usage`
   * (`output_tokens` = the parser's token count; `reasoning_tokens` = its
   * `done.reasoning_tokens`).
   */
  promptTokens?: number;
  /** Request fields to echo in every `response` object. Defaults: tools [], tool_choice "auto", parallel_tool_calls true, others null. */
  echo?: ResponseEcho;
}

type Target = "reasoning" | "final" | "commentary" | "function_call";

interface OpenItem {
  target: Target;
  /** The harmony message it belongs to. */
  msg: number;
  outputIndex: number;
  id: string;
  /** The text sent (function_call: the arguments streamed so far, then the whole arguments). */
  text: string;
  /** function_call only */
  callId: string;
  name: string;
  /** function_call only: what of the generated arguments may be streamed yet. */
  args: StreamedArguments | null;
  /** The JSON of its text delta events up to their sequence number (made on first use by plainDelta). */
  plainHead: string;
}

export type ItemStatus = "completed" | "incomplete";

/** The type of an item's text delta events (null: a call's, whose arguments stream as their own deltas). */
function textDeltaType(target: Target): "response.reasoning_text.delta" | "response.output_text.delta" | null {
  if (target === "reasoning") return "response.reasoning_text.delta";
  return target === "function_call" ? null : "response.output_text.delta";
}

/** Streaming adapter: harmony events in, Responses API stream events out. */
export class ResponsesStreamAdapter {
  readonly options: Readonly<ResponsesAdapterOptions>;
  /** Parser `error` events seen. */
  readonly errors: ErrorEvent[] = [];
  /** The harmony finish reason once `done` was pushed. */
  harmonyFinishReason: FinishReason | null = null;
  /** The parser's repairs so far, by kind. */
  readonly repairs: Record<string, number> = {};
  private seq = 0;
  private started = false;
  private readonly output: ResponseOutputItem[] = [];
  private open: OpenItem | null = null;
  /** The function call (or built-in call) of the current message, from `tool_call_start`. */
  private call: { msg: number; builtin: boolean } | null = null;
  private final: Response | null = null;
  /** Calls dropped because calls were not allowed (`call_not_allowed` recoveries). */
  readonly droppedCalls = new DroppedCalls();
  private readonly base: string;
  private readonly namespace: string;

  constructor(options: ResponsesAdapterOptions) {
    this.options = { ...options };
    this.base = options.id.startsWith("resp_") ? options.id.slice(5) : options.id;
    this.namespace = options.functionNamespace ?? "functions";
  }

  get finished(): boolean {
    return this.final !== null;
  }

  /** The final `response` object once finished, else null. */
  get response(): Response | null {
    return this.final === null ? null : structuredCloneJson(this.final);
  }

  /** `response.created` and `response.in_progress`, once; `push` sends them itself if needed. */
  start(): ResponseStreamEvent[] {
    if (this.started) return [];
    this.started = true;
    return [
      { type: "response.created", sequence_number: this.seq++, response: this.snapshot("in_progress") },
      { type: "response.in_progress", sequence_number: this.seq++, response: this.snapshot("in_progress") },
    ];
  }

  push(event: HarmonyEvent): ResponseStreamEvent[] {
    if (this.finished) return [];
    const out = this.start();
    if (this.droppedCalls.drops(event)) return out;
    switch (event.type) {
      case "message_start":
        if (this.open) this.close("completed", out);
        this.call = null;
        break;
      case "tool_call_start":
        this.toolCallStart(event, out);
        break;
      case "tool_call_end":
        // function_call_arguments.done and the item carry the whole arguments, repaired where needed; the
        // deltas end with what they have beyond the streamed text
        if (this.open?.target === "function_call" && this.open.msg === event.index) {
          const it = this.open;
          this.argumentsDelta(it, it.args!.end(event.arguments), out);
          it.text = event.arguments;
        }
        break;
      case "delta":
        this.delta(event.index, event.kind, event.text, out);
        break;
      case "message_end":
        // A message cut by the end of the stream (`eos`) is closed by `done`,
        // with a status that depends on why the stream ended.
        if (this.open && this.open.msg === event.index && event.stop !== "eos") this.close("completed", out);
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
    }
    return out;
  }

  /**
   * The event type a text delta of message `index` and `kind` makes when
   * push() would make it one text delta event of the open item and nothing
   * else (started, not finished, no call dropped or waiting to be, the item
   * open for that message and target, not a call's arguments); null when
   * push() must decide. Changes nothing.
   */
  plainType(index: number, kind: DeltaKind): "response.reasoning_text.delta" | "response.output_text.delta" | null {
    if (!this.started || this.finished || !this.droppedCalls.keeps(index)) return null;
    const it = this.open;
    const target = this.targetOf(index, kind);
    if (it === null || target === null || it.msg !== index || it.target !== target) return null;
    return textDeltaType(target);
  }

  /**
   * The delta plainType said is plain, taken as push() takes it, and its
   * event's JSON: the bytes JSON.stringify writes of the event push() would
   * have returned (test/transport/responses-text.test.ts), with no event object.
   */
  plainDelta(text: string): string {
    const it = this.open!;
    it.text += text;
    if (it.plainHead === "") {
      const logprobs = it.target === "reasoning" ? "" : '"logprobs":[],';
      it.plainHead = `{"type":"${textDeltaType(it.target)!}","content_index":0,${logprobs}"item_id":${JSON.stringify(it.id)},"output_index":${it.outputIndex},"sequence_number":`;
    }
    return `${it.plainHead}${this.seq++},"delta":${JSON.stringify(text)}}`;
  }

  private toolCallStart(e: ToolCallStartEvent, out: ResponseStreamEvent[]): void {
    if (this.open) this.close("completed", out);
    const builtin = e.namespace !== this.namespace;
    this.call = { msg: e.index, builtin };
    if (builtin) return; // its arguments open a reasoning item on the first delta
    const callId = this.options.toolCallId ? this.options.toolCallId(e) : e.id;
    this.openItem("function_call", e.index, out, callId, e.name);
  }

  private targetOf(index: number, kind: DeltaKind): Target | null {
    switch (kind) {
      case "reasoning":
        return "reasoning";
      case "content":
        return "final";
      case "commentary": {
        const mode = this.options.commentary ?? "message";
        return mode === "message" ? "commentary" : mode === "reasoning" ? "reasoning" : null;
      }
      case "tool_args":
        if (this.call && this.call.msg === index && !this.call.builtin) return "function_call";
        return (this.options.builtinTools ?? "reasoning") === "reasoning" ? "reasoning" : null;
      case "other":
        return null;
    }
  }

  private delta(index: number, kind: DeltaKind, text: string, out: ResponseStreamEvent[]): void {
    const target = this.targetOf(index, kind);
    if (target === null) return;
    if (!this.open || this.open.msg !== index || this.open.target !== target) {
      if (this.open) this.close("completed", out);
      this.openItem(target, index, out, "", "");
    }
    const it = this.open!;
    if (it.target === "function_call") return this.argumentsDelta(it, it.args!.push(text), out);
    it.text += text;
    const common = { item_id: it.id, output_index: it.outputIndex, sequence_number: this.seq++, delta: text };
    switch (it.target) {
      case "reasoning":
        out.push({ type: "response.reasoning_text.delta", content_index: 0, ...common });
        break;
      case "final":
      case "commentary":
        out.push({ type: "response.output_text.delta", content_index: 0, logprobs: [], ...common });
        break;
    }
  }

  private argumentsDelta(it: OpenItem, text: string, out: ResponseStreamEvent[]): void {
    if (text === "") return;
    it.text += text;
    out.push({
      type: "response.function_call_arguments.delta",
      item_id: it.id,
      output_index: it.outputIndex,
      sequence_number: this.seq++,
      delta: text,
    });
  }

  private openItem(target: Target, msg: number, out: ResponseStreamEvent[], callId: string, name: string): void {
    const outputIndex = this.output.length;
    const prefix = target === "reasoning" ? "rs" : target === "function_call" ? "fc" : "msg";
    const args = target === "function_call" ? new StreamedArguments() : null;
    const it: OpenItem = {
      target,
      msg,
      outputIndex,
      id: `${prefix}_${this.base}_${outputIndex}`,
      text: "",
      callId,
      name,
      args,
      plainHead: "",
    };
    this.open = it;
    const item = this.item(it, "in_progress");
    this.output.push(item);
    out.push({
      type: "response.output_item.added",
      sequence_number: this.seq++,
      output_index: outputIndex,
      item: this.item(it, "in_progress"),
    });
    if (target !== "function_call") {
      const part: ResponseContentPartAddedEvent["part"] =
        target === "reasoning" ? { type: "reasoning_text", text: "" } : { type: "output_text", text: "", annotations: [], logprobs: [] };
      out.push({
        type: "response.content_part.added",
        sequence_number: this.seq++,
        item_id: it.id,
        output_index: outputIndex,
        content_index: 0,
        part,
      });
    }
  }

  private close(status: ItemStatus, out: ResponseStreamEvent[]): void {
    const it = this.open;
    if (!it) return;
    // a call that ends with no tool_call_end (cut short by a length limit or an abort): its held deltas, as generated
    if (it.args && !it.args.settled) this.argumentsDelta(it, it.args.flush(), out);
    this.open = null;
    const where = { item_id: it.id, output_index: it.outputIndex };
    let part: ResponseContentPartDoneEvent["part"] | null = null;
    switch (it.target) {
      case "reasoning":
        out.push({ type: "response.reasoning_text.done", sequence_number: this.seq++, ...where, content_index: 0, text: it.text });
        part = { type: "reasoning_text", text: it.text };
        break;
      case "final":
      case "commentary":
        out.push({
          type: "response.output_text.done",
          sequence_number: this.seq++,
          ...where,
          content_index: 0,
          text: it.text,
          logprobs: [],
        });
        part = { type: "output_text", text: it.text, annotations: [], logprobs: [] };
        break;
      case "function_call":
        out.push({
          type: "response.function_call_arguments.done",
          sequence_number: this.seq++,
          ...where,
          name: it.name,
          arguments: it.text,
        });
        break;
    }
    if (part) out.push({ type: "response.content_part.done", sequence_number: this.seq++, ...where, content_index: 0, part });
    const item = this.item(it, status);
    this.output[it.outputIndex] = item;
    out.push({ type: "response.output_item.done", sequence_number: this.seq++, output_index: it.outputIndex, item: this.item(it, status) });
  }

  /** A fresh item object (events never share objects with each other or with the adapter's state). */
  private item(it: OpenItem, status: "in_progress" | ItemStatus): ResponseOutputItem {
    const added = status === "in_progress";
    switch (it.target) {
      case "reasoning": {
        const r: ResponseReasoningItem = {
          type: "reasoning",
          id: it.id,
          summary: [],
          content: added ? [] : [{ type: "reasoning_text", text: it.text }],
          status,
        };
        return r;
      }
      case "final":
      case "commentary": {
        const m: ResponseOutputMessage = {
          type: "message",
          id: it.id,
          role: "assistant",
          status,
          content: added ? [] : [{ type: "output_text", text: it.text, annotations: [], logprobs: [] }],
          phase: it.target === "final" ? "final_answer" : "commentary",
        };
        return m;
      }
      case "function_call": {
        const f: ResponseFunctionToolCall = {
          type: "function_call",
          id: it.id,
          call_id: it.callId,
          name: it.name,
          arguments: added ? "" : it.text,
          status,
        };
        return f;
      }
    }
  }

  private done(e: DoneEvent, out: ResponseStreamEvent[]): void {
    this.harmonyFinishReason = e.finish_reason;
    const r = e.finish_reason;
    const cut = r === "length" || r === "abort" || r === "error";
    if (this.open) this.close(cut ? "incomplete" : "completed", out);
    const status = r === "error" ? "failed" : r === "length" || r === "abort" ? "incomplete" : "completed";
    const response = this.snapshot(status);
    if (r === "length") response.incomplete_details = { reason: "max_output_tokens" };
    else if (r === "abort") response.incomplete_details = {};
    if (r === "error") {
      const last = this.errors[this.errors.length - 1];
      response.error = {
        code: "server_error",
        message: last ? `${last.code}: ${last.message}` : "the harmony stream ended with an error",
      };
    }
    if (this.options.promptTokens !== undefined) response.usage = usageOf(this.options.promptTokens, e.tokens, e.reasoning_tokens);
    this.final = response;
    const copy = structuredCloneJson(response);
    // not OpenAI's: the reasoning tokens, for a front that reports the engine's usage, the calls dropped, and the
    // repairs, for its log (it takes this off)
    const harmony = {
      reasoning_tokens: e.reasoning_tokens,
      ...(this.droppedCalls.recoveries.length > 0 ? { recoveries: this.droppedCalls.recoveries.map((r) => ({ ...r })) } : {}),
      repairs: { ...this.repairs },
    };
    const type = status === "completed" ? "response.completed" : status === "incomplete" ? "response.incomplete" : "response.failed";
    out.push({ type, sequence_number: this.seq++, response: copy, harmony } as ResponseStreamEvent);
  }

  private snapshot(status: "in_progress" | "completed" | "incomplete" | "failed"): Response {
    const o = this.options;
    const output = this.output.map((i) => structuredCloneJson(i));
    return {
      id: o.id,
      object: "response",
      created_at: o.created,
      model: o.model,
      status,
      output,
      output_text: outputText(output),
      error: null,
      incomplete_details: null,
      instructions: null,
      metadata: null,
      parallel_tool_calls: true,
      temperature: null,
      top_p: null,
      tool_choice: "auto",
      tools: [],
      ...structuredCloneJson(o.echo ?? {}),
    };
  }
}

/** The SDK's `output_text` convenience: the text of every `output_text` part of every message item. */
function outputText(output: ResponseOutputItem[]): string {
  let s = "";
  for (const item of output) {
    if (item.type !== "message") continue;
    for (const c of item.content) if (c.type === "output_text") s += c.text;
  }
  return s;
}

function usageOf(input: number, output: number, reasoning: number): ResponseUsage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

/** A deep copy of plain JSON data (no `structuredClone`: keeps the module free of host APIs beyond ES2022). */
function structuredCloneJson<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
