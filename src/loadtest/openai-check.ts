/**
 * What came back from an OpenAI-compatible endpoint, read the way a client
 * reads it (Chat Completions and Responses, streamed and not), and checked:
 * calls name a declared tool, their arguments parse and match the tool's
 * schema, no control-token text in what a user or a tool sees, reasoning
 * where it was asked for, finish reasons that agree with the calls, HTTP
 * errors by status; and, when the target reports what the model meant
 * (the engine simulator does), every intended call, the answer and the
 * finish compared with what arrived.
 */
import { Ajv, type ValidateFunction } from "ajv";
import type { IntendedCall, Intent } from "./intent.js";
import type { Api, PlannedRequest, ToolDef } from "./openai-plan.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export interface ReturnedCall {
  name: string;
  arguments: string;
}

/** An answer's body is read up to this many bytes (an endless or huge one is `bad_response`). */
export const MAX_ANSWER_BYTES = 64 << 20;

/** One answer, as a client would take it. */
export interface Answer {
  /** HTTP status; 0: no answer (the connection failed), -1: timed out. */
  status: number;
  /** The error: an HTTP error body's message, or the connection's. */
  error: string | null;
  /** An error event inside a 200 stream. */
  streamError: string | null;
  /** The stream ended as its API ends one ([DONE], or a response's last event), or the JSON was read. */
  complete: boolean;
  /** The body could not be read as its API's shape. */
  malformed: string | null;
  id: string | null;
  /** Chat: `content`; Responses: every message's text, in order. */
  content: string;
  /** The final answer: Chat's content; Responses' `final_answer` messages (messages without a phase too). */
  answer: string;
  reasoning: string;
  calls: ReturnedCall[];
  /** Chat's finish_reason; Responses: stop or tool_calls (completed), length (incomplete), error (failed). */
  finish: string | null;
  completionTokens: number;
  /** Milliseconds from sending to the first text, reasoning or call delta (streams only). */
  firstTokenMs: number | null;
  /** Milliseconds between successive deltas (streams only). */
  gaps: number[];
  totalMs: number;
  /** The raw body or SSE events, kept only when asked (`--only`). */
  raw?: unknown[];
}

export function emptyAnswer(): Answer {
  return {
    status: 0,
    error: null,
    streamError: null,
    complete: false,
    malformed: null,
    id: null,
    content: "",
    answer: "",
    reasoning: "",
    calls: [],
    finish: null,
    completionTokens: 0,
    firstTokenMs: null,
    gaps: [],
    totalMs: 0,
  };
}

/** Incremental reader of one answer's body (a JSON document, or an SSE stream of its API). */
export class AnswerReader {
  readonly answer = emptyAnswer();
  private buffer = "";
  /** Where the search for the next blank line resumes. */
  private scanned = 0;
  private pendingCr = false;
  private json = "";
  private lastDelta = -1;
  private readonly chatCalls = new Map<number, ReturnedCall>();
  private readonly items = new Map<number, Obj>();
  private readonly itemText = new Map<number, string>();
  private readonly itemArgs = new Map<number, string>();
  private readonly decoder = new TextDecoder("utf-8");

  constructor(
    readonly api: Api,
    readonly stream: boolean,
    private readonly started: number,
    private readonly keepRaw = false,
  ) {
    if (keepRaw) this.answer.raw = [];
  }

  /** Body bytes read so far. */
  bytes = 0;

  /** Body bytes as they arrive, at `now` (performance.now()); false once the answer is over MAX_ANSWER_BYTES (stop reading). */
  push(bytes: Uint8Array, now: number): boolean {
    this.bytes += bytes.length;
    if (this.bytes > MAX_ANSWER_BYTES) {
      this.answer.malformed ??= `the answer is over ${MAX_ANSWER_BYTES} bytes`;
      return false;
    }
    const text = this.decoder.decode(bytes, { stream: true });
    if (!this.stream) {
      this.json += text;
      return true;
    }
    // SSE lines end in \n, \r\n or \r (a \r at a chunk's end waits: a \n may follow)
    let t = this.pendingCr ? `\r${text}` : text;
    this.pendingCr = t.endsWith("\r");
    if (this.pendingCr) t = t.slice(0, -1);
    this.buffer += t.replace(/\r\n?/g, "\n");
    // events end at a blank line; the scan resumes where the last one stopped (linear in the body)
    let start = 0;
    for (;;) {
      const k = this.buffer.indexOf("\n\n", Math.max(start, this.scanned - 1));
      if (k < 0) break;
      this.event(this.buffer.slice(start, k), now);
      start = k + 2;
      this.scanned = start;
    }
    if (start > 0) this.buffer = this.buffer.slice(start);
    this.scanned = this.buffer.length;
    return true;
  }

  /** The body ended at `now`. */
  end(now: number): Answer {
    const tail = this.decoder.decode();
    this.answer.totalMs = now - this.started;
    if (!this.stream) {
      this.json += tail;
      this.readJson(this.json);
    } else {
      this.buffer += (this.pendingCr ? "\n" : "") + tail.replace(/\r\n?/g, "\n");
      for (const block of this.buffer.split("\n\n")) if (block.trim() !== "") this.event(block, now);
      this.finishStream();
    }
    return this.answer;
  }

  private delta(now: number): void {
    if (this.answer.firstTokenMs === null) this.answer.firstTokenMs = now - this.started;
    else this.answer.gaps.push(now - this.lastDelta);
    this.lastDelta = now;
  }

  private event(block: string, now: number): void {
    let data = "";
    for (const line of block.split("\n")) if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(line[5] === " " ? 6 : 5);
    if (data === "") return;
    if (data === "[DONE]") {
      if (this.api === "chat") this.answer.complete = true;
      this.answer.raw?.push("[DONE]");
      return;
    }
    let v: unknown;
    try {
      v = JSON.parse(data);
    } catch {
      this.answer.malformed ??= `an event is not JSON: ${data.slice(0, 120)}`;
      return;
    }
    this.answer.raw?.push(v);
    if (!isObj(v)) return;
    if (isObj(v.error) || (typeof v.type === "string" && v.type === "error")) {
      const e = isObj(v.error) ? v.error : v;
      this.answer.streamError ??= `${String(e.code ?? e.type ?? "error")}: ${String(e.message ?? "")}`.slice(0, 300);
      return;
    }
    if (this.api === "chat") this.chatChunk(v, now);
    else this.responsesEvent(v, now);
  }

  private chatChunk(c: Obj, now: number): void {
    if (typeof c.id === "string") this.answer.id ??= c.id;
    if (isObj(c.usage) && typeof c.usage.completion_tokens === "number") this.answer.completionTokens = c.usage.completion_tokens;
    if (!Array.isArray(c.choices)) return;
    for (const ch of c.choices) {
      if (!isObj(ch) || (ch.index ?? 0) !== 0) continue;
      const d = isObj(ch.delta) ? ch.delta : {};
      let any = false;
      if (typeof d.content === "string" && d.content !== "") {
        this.answer.content += d.content;
        any = true;
      }
      const reasoning = typeof d.reasoning === "string" ? d.reasoning : typeof d.reasoning_content === "string" ? d.reasoning_content : "";
      if (reasoning !== "") {
        this.answer.reasoning += reasoning;
        any = true;
      }
      if (Array.isArray(d.tool_calls)) {
        for (const tc of d.tool_calls) {
          if (!isObj(tc)) continue;
          const i = typeof tc.index === "number" ? tc.index : this.chatCalls.size;
          const call = this.chatCalls.get(i) ?? { name: "", arguments: "" };
          const f = isObj(tc.function) ? tc.function : {};
          if (typeof f.name === "string") call.name += f.name;
          if (typeof f.arguments === "string") call.arguments += f.arguments;
          this.chatCalls.set(i, call);
          any = true;
        }
      }
      if (typeof ch.finish_reason === "string") this.answer.finish = ch.finish_reason;
      if (any) this.delta(now);
    }
  }

  private responsesEvent(e: Obj, now: number): void {
    const type = typeof e.type === "string" ? e.type : "";
    const at = typeof e.output_index === "number" ? e.output_index : -1;
    if (type.endsWith(".delta") && typeof e.delta === "string" && e.delta !== "") this.delta(now);
    switch (type) {
      case "response.created":
        if (isObj(e.response) && typeof e.response.id === "string") this.answer.id = e.response.id;
        break;
      case "response.output_item.added":
      case "response.output_item.done":
        if (isObj(e.item)) this.items.set(at, e.item);
        break;
      case "response.output_text.delta":
      case "response.reasoning_text.delta":
      case "response.reasoning_summary_text.delta":
        if (typeof e.delta === "string") this.itemText.set(at, (this.itemText.get(at) ?? "") + e.delta);
        break;
      case "response.function_call_arguments.delta":
        if (typeof e.delta === "string") this.itemArgs.set(at, (this.itemArgs.get(at) ?? "") + e.delta);
        break;
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
        this.answer.complete = true;
        if (isObj(e.response)) this.readResponse(e.response, false);
        break;
    }
  }

  private finishStream(): void {
    if (this.api === "chat") {
      this.answer.calls = [...this.chatCalls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c);
      return;
    }
    // what the stream's items said, when the last event had no output to read
    if (this.answer.calls.length === 0 && this.answer.content === "" && this.answer.reasoning === "") {
      const items = [...this.items.entries()].sort((a, b) => a[0] - b[0]);
      this.fromItems(
        items.map(([i, it]) => {
          if (it.type === "function_call" && typeof it.arguments !== "string") return { ...it, arguments: this.itemArgs.get(i) ?? "" };
          if ((it.type === "message" || it.type === "reasoning") && !Array.isArray(it.content))
            return {
              ...it,
              content: [{ type: it.type === "message" ? "output_text" : "reasoning_text", text: this.itemText.get(i) ?? "" }],
            };
          return it;
        }),
      );
    }
  }

  private readJson(text: string): void {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      this.answer.malformed = `the body is not JSON: ${text.slice(0, 120)}`;
      return;
    }
    this.answer.raw?.push(v);
    if (!isObj(v)) {
      this.answer.malformed = "the body is not a JSON object";
      return;
    }
    this.answer.complete = true;
    if (this.api === "responses") return this.readResponse(v, true);
    if (typeof v.id === "string") this.answer.id = v.id;
    if (isObj(v.usage) && typeof v.usage.completion_tokens === "number") this.answer.completionTokens = v.usage.completion_tokens;
    const ch = Array.isArray(v.choices) ? v.choices.find((c) => isObj(c) && (c.index ?? 0) === 0) : undefined;
    if (!isObj(ch) || !isObj(ch.message)) {
      this.answer.malformed = "no choices[0].message";
      return;
    }
    const m = ch.message;
    this.answer.content = typeof m.content === "string" ? m.content : "";
    this.answer.answer = this.answer.content;
    this.answer.reasoning =
      typeof m.reasoning === "string" ? m.reasoning : typeof m.reasoning_content === "string" ? m.reasoning_content : "";
    this.answer.calls = (Array.isArray(m.tool_calls) ? m.tool_calls : []).flatMap((tc) =>
      isObj(tc) && isObj(tc.function)
        ? [{ name: String(tc.function.name ?? ""), arguments: typeof tc.function.arguments === "string" ? tc.function.arguments : "" }]
        : [],
    );
    this.answer.finish = typeof ch.finish_reason === "string" ? ch.finish_reason : null;
  }

  /** A Response object (non-streamed, or the last event's). */
  private readResponse(r: Obj, whole: boolean): void {
    if (typeof r.id === "string") this.answer.id = r.id;
    if (isObj(r.usage) && typeof r.usage.output_tokens === "number") this.answer.completionTokens = r.usage.output_tokens;
    if (Array.isArray(r.output) && (whole || r.output.length > 0)) this.fromItems(r.output);
    const status = r.status;
    if (status === "completed") this.answer.finish = this.answer.calls.length > 0 ? "tool_calls" : "stop";
    else if (status === "incomplete") this.answer.finish = "length";
    else if (status === "failed") this.answer.finish = "error";
    else this.answer.finish = typeof status === "string" ? status : null;
    if (whole && !Array.isArray(r.output)) this.answer.malformed = "no output";
  }

  private fromItems(items: unknown[]): void {
    let content = "";
    let answer = "";
    let reasoning = "";
    const calls: ReturnedCall[] = [];
    for (const it of items) {
      if (!isObj(it)) continue;
      const parts = Array.isArray(it.content) ? it.content : [];
      const text = parts.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
      if (it.type === "message") {
        content += text;
        if (it.phase !== "commentary") answer += text;
      } else if (it.type === "reasoning") {
        const summary = Array.isArray(it.summary)
          ? it.summary.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("")
          : "";
        reasoning += text || summary;
      } else if (it.type === "function_call") {
        calls.push({ name: String(it.name ?? ""), arguments: typeof it.arguments === "string" ? it.arguments : "" });
      }
    }
    this.answer.content = content;
    this.answer.answer = answer;
    this.answer.reasoning = reasoning;
    this.answer.calls = calls;
  }
}

// ------------------------------------------------------------------ checks

export const OPENAI_FAILURE_KINDS = [
  "http_error",
  "network_error",
  "timeout",
  "stream_error",
  "stream_incomplete",
  "bad_response",
  "undeclared_tool",
  "arguments_invalid",
  "arguments_schema",
  "control_token_text",
  "reasoning_missing",
  "finish_mismatch",
  "lost_tool_call",
  "unintended_call",
  "answer_mismatch",
] as const;
export type OpenAIFailureKind = (typeof OPENAI_FAILURE_KINDS)[number];

export interface OpenAIFailure {
  kind: OpenAIFailureKind;
  detail: string;
}

/** The text of Harmony's control tokens (src/core/preset.ts), which no answer, reasoning or argument should hold. */
const CONTROL = /<\|(?:start|end|message|channel|constrain|return|call|endoftext|startoftext|endofprompt|reserved_\d{1,6})\|>/g;

export function controlTokens(text: string): number {
  CONTROL.lastIndex = 0;
  let n = 0;
  while (CONTROL.exec(text) !== null) n++;
  return n;
}

/** Deep equality of two JSON values (key order aside). */
function jsonEqual(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (x === y) continue;
    if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) return false;
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    if (Array.isArray(x)) {
      const ya = y as unknown[];
      if (x.length !== ya.length) return false;
      x.forEach((v, i) => stack.push([v, ya[i]]));
      continue;
    }
    const xk = Object.keys(x);
    const yo = y as Obj;
    if (xk.length !== Object.keys(yo).length) return false;
    for (const k of xk) {
      if (!Object.prototype.hasOwnProperty.call(yo, k)) return false;
      stack.push([(x as Obj)[k], yo[k]]);
    }
  }
  return true;
}

function parseArgs(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Each declared tool's parameters compiled once (the catalogue is ours, so compiling is safe). */
export class SchemaCheck {
  private readonly ajv = new Ajv({ strict: false, allErrors: false });
  private readonly compiled = new Map<string, ValidateFunction>();

  validate(tool: ToolDef, value: unknown): string | null {
    let v = this.compiled.get(tool.name);
    if (!v) {
      v = this.ajv.compile(tool.parameters);
      this.compiled.set(tool.name, v);
    }
    if (v(value)) return null;
    const e = v.errors?.[0];
    return e ? `${e.instancePath || "/"} ${e.message ?? "is invalid"}` : "does not match";
  }
}

/** What the target said the model meant for this request (choice 0), when it says. */
export interface Reported {
  fault: string | null;
  intent: Intent;
  exact: boolean;
}

export interface Checked {
  failures: OpenAIFailure[];
  /** Intended calls (when reported) and those that arrived with their arguments. */
  intended: number;
  recovered: number;
  /** Calls returned, and those with valid arguments. */
  returned: number;
  validCalls: number;
  /** Control-token texts in the answer, reasoning and arguments; and how many more than the model wrote itself. */
  controlTokens: number;
  controlExcess: number;
}

const short = (s: string, n = 100) => JSON.stringify(s.length > n ? s.slice(0, n) + "…" : s);

export function checkAnswer(req: PlannedRequest, a: Answer, reported: Reported | null, schemas: SchemaCheck): Checked {
  const failures: OpenAIFailure[] = [];
  const fail = (kind: OpenAIFailureKind, detail: string) => failures.push({ kind, detail });
  const out: Checked = { failures, intended: 0, recovered: 0, returned: 0, validCalls: 0, controlTokens: 0, controlExcess: 0 };
  const intent = reported?.exact ? reported.intent : null;
  if (reported?.exact) out.intended = reported.intent.calls.length;
  if (a.status === 0) {
    fail("network_error", a.error ?? "no answer");
    return out;
  }
  if (a.status === -1) {
    fail("timeout", a.error ?? "no answer in time");
    return out;
  }
  if (a.status !== 200) {
    fail("http_error", `HTTP ${a.status}: ${(a.error ?? "").slice(0, 200)}`);
    return out;
  }
  if (a.malformed) fail("bad_response", a.malformed);
  if (a.streamError) fail("stream_error", a.streamError);
  else if (!a.complete) fail("stream_incomplete", req.stream ? "the stream ended without its last event" : "the body was cut short");

  // calls: declared, arguments JSON and valid for the schema (a call cut by a length finish is not one)
  const declared = new Map(req.tools.map((t) => [t.name, t]));
  const calls: { call: ReturnedCall; value: unknown; cut: boolean }[] = [];
  for (const [i, c] of a.calls.entries()) {
    const parsed = parseArgs(c.arguments);
    // the last call of an answer cut short (finish length) may be cut itself: not held against the answer
    const cut = a.finish === "length" && i === a.calls.length - 1;
    if (!parsed.ok && cut) continue;
    out.returned++;
    const tool = declared.get(c.name);
    if (!tool) {
      fail("undeclared_tool", `${short(c.name)} is not a declared tool (declared: ${[...declared.keys()].join(", ") || "none"})`);
      continue;
    }
    if (!parsed.ok) {
      fail("arguments_invalid", `${c.name}: arguments ${short(c.arguments)} are not JSON`);
      continue;
    }
    const bad = schemas.validate(tool, parsed.value);
    if (bad !== null) {
      fail("arguments_schema", `${c.name}: ${short(c.arguments)}: ${bad}`);
      continue;
    }
    out.validCalls++;
    calls.push({ call: c, value: parsed.value, cut });
  }

  // control tokens: beyond what the model itself wrote as text (its reasoning may quote `<|end|>`)
  const contentCount = controlTokens(a.content);
  const reasoningCount = controlTokens(a.reasoning);
  const argsCount = a.calls.reduce((n, c) => n + controlTokens(c.arguments), 0);
  out.controlTokens = contentCount + reasoningCount + argsCount;
  // the reasoning may also hold the answer's own text: text with no header streams as reasoning before it is
  // given again as the answer (docs/resilience.md, rule 13)
  const meant = intent
    ? {
        content: controlTokens(intent.content),
        reasoning: controlTokens(intent.reasoning) + controlTokens(intent.content),
        args: intent.calls.reduce((n, c) => n + controlTokens(c.arguments), 0),
      }
    : { content: 0, reasoning: 0, args: 0 };
  out.controlExcess =
    Math.max(0, contentCount - meant.content) + Math.max(0, reasoningCount - meant.reasoning) + Math.max(0, argsCount - meant.args);
  if (out.controlExcess > 0) {
    const where =
      contentCount > meant.content ? a.content : reasoningCount > meant.reasoning ? a.reasoning : a.calls.map((c) => c.arguments).join(" ");
    CONTROL.lastIndex = 0;
    const m = CONTROL.exec(where);
    const at = m ? Math.max(0, m.index - 30) : 0;
    fail(
      "control_token_text",
      `${out.controlExcess} control-token text${out.controlExcess === 1 ? "" : "s"}, e.g. ${short(where.slice(at, at + 90), 90)}`,
    );
  }

  // reasoning where it was asked for (every request asks): the model's, when the target says what it was
  const wantReasoning = intent ? intent.reasoning.trim() !== "" : true;
  if (wantReasoning && a.reasoning.trim() === "") fail("reasoning_missing", "no reasoning came back");

  // finish reasons that agree with the calls
  if (out.returned > 0 && a.finish !== "tool_calls" && a.finish !== "length")
    fail("finish_mismatch", `${out.returned} call(s) but finish ${String(a.finish)}`);
  else if (a.finish === "tool_calls" && out.returned === 0) fail("finish_mismatch", "finish tool_calls with no call");
  else if (intent && a.finish !== intent.finish) fail("finish_mismatch", `finish ${String(a.finish)}, the model's was ${intent.finish}`);

  if (intent) {
    const unmatched = calls.slice();
    for (const want of intent.calls) {
      const wanted = parseArgs(want.arguments);
      const k = unmatched.findIndex((c) => c.call.name === want.name && wanted.ok && jsonEqual(c.value, wanted.value));
      if (k >= 0) {
        unmatched.splice(k, 1);
        out.recovered++;
      } else fail("lost_tool_call", lostDetail(want, a.calls));
    }
    for (const c of unmatched) if (!c.cut) fail("unintended_call", `${c.call.name}(${short(c.call.arguments, 80)}) was not meant`);
    const got = req.api === "chat" ? a.content : a.answer;
    const meantText = req.api === "chat" ? intent.content : intent.answer;
    if (got !== meantText) fail("answer_mismatch", `got ${short(got)}, the model's was ${short(meantText)}`);
  }
  return out;
}

function lostDetail(want: IntendedCall, got: ReturnedCall[]): string {
  const same = got.find((c) => c.name === want.name);
  return same
    ? `${want.name}: arguments ${short(same.arguments, 80)}, the model's ${short(want.arguments, 80)}`
    : `${want.name}(${short(want.arguments, 80)}) never arrived as a call`;
}
