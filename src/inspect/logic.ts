/**
 * The stream inspector's pure logic, shared by the page and the tests: it
 * imports nothing, so the browser loads its build (dist/src/inspect/logic.js,
 * served as /inspect/logic.js) as is.
 *
 * - reading what people paste: token ids, Harmony text, SSE logs (an OpenAI
 *   chat stream, vLLM /v1/completions chunks with `token_ids`, a Responses
 *   stream), and the URL fragment that holds an input;
 * - turning POST /v1/parse's answer (events, each with the token it was
 *   emitted at, and the tokens) into coloured token segments and message
 *   cards.
 */

/**
 * First special id and the end of the vocabulary: src/core/preset.ts's
 * `firstSpecial` and `vocabLimit`, written here because this module imports
 * nothing (test/sources.test.ts checks they are the preset's).
 */
export const FIRST_SPECIAL = 199998;
export const VOCAB_LIMIT = 201089;

/**
 * Why the page could not go on, with its code (one of src/core/errors.ts's
 * tables, written here because this module imports nothing): an input it
 * cannot read, an answer it was refused, or a page without its parts.
 */
export class PageError extends Error {
  constructor(
    readonly code: "bad_json" | "bad_token_id" | "unreachable" | "bug",
    message: string,
  ) {
    super(message);
  }
}

/** The events of docs/protocol.md, as the page reads them (JSON, so loosely typed). */
export interface InspectEvent {
  type: "message_start" | "tool_call_start" | "tool_call_end" | "delta" | "message_end" | "recovery" | "error" | "done";
  index?: number;
  role?: string;
  name?: string | null;
  channel?: string | null;
  recipient?: string | null;
  content_type?: string | null;
  call_index?: number;
  id?: string;
  arguments?: string;
  valid_json?: boolean;
  kind?: string;
  text?: string;
  stop?: string;
  at?: number;
  detail?: string;
  raw?: string;
  code?: string;
  message?: string;
  token?: number | null;
  finish_reason?: string;
  tokens?: number;
  messages?: number;
  recoveries?: number;
}

/** One token as /v1/parse describes it with `tokens: true`. */
export interface TokenInfo {
  id: number;
  /** Its text; for a token holding part of a UTF-8 character, its bytes as `\xNN`; null when the id is not a token. */
  text: string | null;
  special?: boolean;
  partial?: boolean;
}

/** One object the OpenAI front would stream, with the index of the event it came from. */
export interface StreamedChunk {
  event: number;
  data: Record<string, unknown>;
}

/** POST /v1/parse's answer. `emitted[i]` is the token whose write returned events[i] (tokens.length: end of stream). */
export interface ParseAnswer {
  events: InspectEvent[];
  tokens?: TokenInfo[];
  emitted?: number[];
  /** With `chunks: true`: the front's Chat chunks and Responses events for these events. */
  chunks?: { chat: StreamedChunk[]; responses: StreamedChunk[] };
}

// ---------------------------------------------------------------- input

export type InputKind = "text" | "ids" | "sse";

/** Token ids from text: a JSON array, or integers separated by whitespace or commas. Throws with a readable message. */
export function parseIdList(text: string): number[] {
  const t = text.trim();
  if (t === "") return [];
  let parts: unknown[];
  if (t.startsWith("[")) {
    try {
      parts = JSON.parse(t) as unknown[];
    } catch (e) {
      throw new PageError("bad_json", `the ids are not a JSON array: ${(e as Error).message}`);
    }
    if (!Array.isArray(parts)) throw new PageError("bad_json", "the ids are not a JSON array");
  } else parts = t.split(/[\s,]+/);
  return parts.map((p, i) => {
    const n = typeof p === "number" ? p : /^\d+$/.test(String(p)) ? Number(p) : NaN;
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
      throw new PageError("bad_token_id", `not a token id at position ${i}: ${JSON.stringify(p)}`.slice(0, 120));
    return n;
  });
}

/** What a pasted input most likely is. */
export function detectInput(text: string): InputKind {
  const t = text.trim();
  if (/^(data:|event:|id:)/m.test(t) || /^\{.*"(choices|object|type)"\s*:/.test(t)) return "sse";
  if (t !== "" && /^\[?[\d\s,]+\]?$/.test(t)) return "ids";
  return "text";
}

/** What a pasted SSE log holds: ids when the log carries them, else the Harmony text it implies. */
export interface SseReading {
  format: "vllm-completions" | "openai-chat" | "openai-responses" | "unknown";
  ids: number[] | null;
  text: string | null;
  /** Data lines read as JSON chunks. */
  chunks: number;
  /** What the reader had to guess or skip, for people. */
  notes: string[];
}

interface Segment {
  kind: "reasoning" | "content" | "call" | "raw";
  text: string;
  name?: string;
}

/**
 * Read an SSE log: `data: {...}` lines (also bare JSON lines), `[DONE]`,
 * comments and `event:` lines skipped. Token ids (`choices[].token_ids`,
 * vLLM) win; otherwise an OpenAI chat stream's reasoning, content and tool
 * calls (or a Responses stream's) are written back as the Harmony text a
 * model would have produced for them, and a completions stream's `text` is
 * taken as Harmony text. Only the first choice is read.
 */
export function readSseLog(log: string): SseReading {
  const notes: string[] = [];
  const ids: number[] = [];
  const segments: Segment[] = [];
  const calls = new Map<number | string, Segment>();
  let format: SseReading["format"] = "unknown";
  let chunks = 0;
  let bad = 0;
  let choice: number | null = null;
  let otherChoices = false;
  let sawIds = false;
  const append = (kind: Segment["kind"], text: string) => {
    if (text === "") return;
    const last = segments[segments.length - 1];
    if (last && last.kind === kind && kind !== "call") last.text += text;
    else segments.push({ kind, text });
  };
  const call = (key: number | string, name: string | undefined, args: string) => {
    let s = calls.get(key);
    if (!s) {
      s = { kind: "call", text: "", name: name ?? "" };
      calls.set(key, s);
      segments.push(s);
    }
    if (name && !s.name) s.name = name;
    s.text += args;
  };
  for (const raw of log.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith(":") || /^(event|id|retry):/.test(line)) continue;
    const data = line.startsWith("data:") ? line.slice(5).trim() : line;
    if (data === "[DONE]") continue;
    let v: unknown;
    try {
      v = JSON.parse(data);
    } catch {
      bad++;
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    chunks++;
    const o = v as Record<string, unknown>;
    if (typeof o.type === "string" && o.type.startsWith("response.")) {
      format = "openai-responses";
      const t = o.type;
      if (t === "response.reasoning_text.delta" && typeof o.delta === "string") append("reasoning", o.delta);
      else if (t === "response.output_text.delta" && typeof o.delta === "string") append("content", o.delta);
      else if (t === "response.output_item.added") {
        const item = o.item as Record<string, unknown> | undefined;
        if (item?.type === "function_call") call(String(item.id ?? o.output_index), String(item.name ?? ""), "");
      } else if (t === "response.function_call_arguments.delta" && typeof o.delta === "string")
        call(String(o.item_id ?? o.output_index), undefined, o.delta);
      continue;
    }
    if (!Array.isArray(o.choices)) continue;
    for (const c of o.choices as unknown[]) {
      if (typeof c !== "object" || c === null) continue;
      const ch = c as Record<string, unknown>;
      const index = typeof ch.index === "number" ? ch.index : 0;
      if (choice === null) choice = index;
      if (index !== choice) {
        otherChoices = true;
        continue;
      }
      if (Array.isArray(ch.token_ids)) {
        sawIds = true;
        for (const id of ch.token_ids) if (typeof id === "number" && Number.isInteger(id)) ids.push(id);
      }
      if (o.object === "text_completion" || typeof ch.text === "string") {
        if (format === "unknown") format = "vllm-completions";
        if (typeof ch.text === "string") append("raw", ch.text);
      }
      const delta = ch.delta as Record<string, unknown> | undefined;
      if (delta && typeof delta === "object") {
        format = "openai-chat";
        const reasoning = delta.reasoning_content ?? delta.reasoning;
        if (typeof reasoning === "string") append("reasoning", reasoning);
        if (typeof delta.content === "string") append("content", delta.content);
        if (Array.isArray(delta.tool_calls)) {
          for (const tc of delta.tool_calls as Record<string, unknown>[]) {
            const fn = (tc.function ?? {}) as Record<string, unknown>;
            call(
              typeof tc.index === "number" ? tc.index : String(tc.id ?? 0),
              typeof fn.name === "string" ? fn.name : undefined,
              typeof fn.arguments === "string" ? fn.arguments : "",
            );
          }
        }
      }
    }
  }
  if (bad > 0) notes.push(`${bad} data line${bad === 1 ? "" : "s"} that are not JSON skipped`);
  if (otherChoices) notes.push(`only choice ${choice} read; the log holds other choices too`);
  if (sawIds) {
    if (format === "unknown") format = "vllm-completions";
    return { format, ids, text: null, chunks, notes };
  }
  if (segments.length === 0) return { format, ids: null, text: null, chunks, notes: [...notes, "no token ids, text or deltas found"] };
  if (segments.every((s) => s.kind === "raw")) {
    notes.push(
      "no token_ids in the log: its text is read as Harmony text (ask vLLM for return_token_ids, or keep special tokens, for the exact stream)",
    );
    return { format, ids: null, text: segments.map((s) => s.text).join(""), chunks, notes };
  }
  notes.push(
    "no token ids in the log: the Harmony text below is what the stream's reasoning, content and tool calls imply, not the tokens the model produced",
  );
  return { format, ids: null, text: harmonyFromSegments(segments), chunks, notes };
}

/** Harmony text for a chat stream's parts, in order, as a completion primed with `<|start|>assistant`. */
function harmonyFromSegments(segments: Segment[]): string {
  let out = "";
  segments.forEach((s, i) => {
    if (i > 0) out += "<|start|>assistant";
    if (s.kind === "reasoning") out += `<|channel|>analysis<|message|>${s.text}<|end|>`;
    else if (s.kind === "call") {
      const name = s.name?.includes(".") ? s.name : `functions.${s.name || "unknown"}`;
      out += `<|channel|>commentary to=${name} <|constrain|>json<|message|>${s.text}<|call|>`;
    } else if (s.kind === "content") out += `<|channel|>final<|message|>${s.text}<|return|>`;
    else out += s.text;
  });
  return out;
}

// ---------------------------------------------------------------- the URL fragment

export interface FragmentInput {
  kind: "text" | "ids";
  value: string;
  role?: "assistant" | "none";
  afterStop?: "drop" | "parse";
  tools?: string[];
  /** Which calls the stream may make (the front's tool_choice "none", parallel_tool_calls false). */
  calls?: "any" | "none" | "one";
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** `#text=<percent-encoded>` or `#ids=1,2,3`, then `&role=none`, `&after_stop=parse`, `&tools=a,b`, `&calls=none` when not the defaults. */
export function encodeFragment(input: FragmentInput): string {
  const parts = [input.kind === "ids" ? `ids=${parseIdList(input.value).join(",")}` : `text=${encodeURIComponent(input.value)}`];
  if (input.role === "none") parts.push("role=none");
  if (input.afterStop === "parse") parts.push("after_stop=parse");
  if (input.tools && input.tools.length > 0) parts.push(`tools=${input.tools.map(encodeURIComponent).join(",")}`);
  if (input.calls === "none" || input.calls === "one") parts.push(`calls=${input.calls}`);
  return "#" + parts.join("&");
}

/** The input a fragment holds (with or without its `#`), or null. `+` stays a plus: only percent-escapes are decoded. */
export function decodeFragment(hash: string): FragmentInput | null {
  const h = hash.startsWith("#") ? hash.slice(1) : hash;
  if (h === "") return null;
  let out: FragmentInput | null = null;
  const opts: Omit<FragmentInput, "kind" | "value"> = {};
  for (const part of h.split("&")) {
    const eq = part.indexOf("=");
    const key = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? "" : part.slice(eq + 1);
    if (key === "text") out = { kind: "text", value: decode(value) };
    else if (key === "ids") out = { kind: "ids", value: decode(value) };
    else if (key === "role" && (value === "none" || value === "assistant")) opts.role = value;
    else if (key === "after_stop" && (value === "parse" || value === "drop")) opts.afterStop = value;
    else if (key === "calls" && (value === "any" || value === "none" || value === "one")) opts.calls = value;
    else if (key === "tools")
      opts.tools = value
        .split(",")
        .map(decode)
        .filter((t) => t !== "");
  }
  return out ? { ...out, ...opts } : null;
}

// ---------------------------------------------------------------- tokens and messages

/** How a token is coloured. */
export type TokenClass = "control" | "header" | "analysis" | "commentary" | "final" | "other" | "junk" | "after" | "invalid";

export interface TokenView {
  at: number;
  id: number;
  /** What to show: the token's text, `\xNN` bytes, or `⟨id⟩` for an id outside the vocabulary. */
  label: string;
  cls: TokenClass;
  /** The message it belongs to (its header or its content), or -1. */
  message: number;
  /** Part of a tool call's arguments. */
  tool: boolean;
  /** Indices (into the events) of the recoveries and errors at this token. */
  marks: number[];
}

export function isSpecial(id: number): boolean {
  return id >= FIRST_SPECIAL && id < VOCAB_LIMIT;
}

/**
 * The colour class of a message's content. A message with no channel is
 * text with no header (docs/resilience.md, rule 13): reasoning until the
 * completion shows it is the answer (segmentTokens recolours it then).
 */
export function channelClass(role: string | undefined, channel: string | null | undefined): TokenClass {
  if (role !== undefined && role !== "assistant") return "other";
  if (channel === "analysis" || channel === null) return "analysis";
  if (channel === "commentary") return "commentary";
  if (channel === "final" || channel === undefined) return "final";
  return "other";
}

/**
 * Each token with its colour, its message and the recoveries and errors
 * marked at it, from /v1/parse's answer with `tokens: true`. Marks at the
 * end of the stream (`at` = the token count) are in `endMarks`.
 */
export function segmentTokens(answer: ParseAnswer): { tokens: TokenView[]; endMarks: number[] } {
  const infos = answer.tokens ?? [];
  const events = answer.events;
  const emitted = answer.emitted ?? events.map(() => infos.length);
  const n = infos.length;
  const startAt = new Map<number, number>();
  const endAt = new Map<number, number>();
  const msgClass = new Map<number, TokenClass>();
  const msgCall = new Map<number, boolean>();
  /** Messages of text with no header (rule 13): reasoning, unless the parser gives them again as content. */
  const headerless = new Set<number>();
  const deltaAt: (number | undefined)[] = new Array(n);
  const junkAt: number[] = [];
  let afterFrom = Infinity;
  const marks: number[][] = Array.from({ length: n }, () => []);
  const endMarks: number[] = [];
  events.forEach((e, i) => {
    const p = emitted[i] ?? n;
    if (e.type === "message_start" && e.index !== undefined) {
      startAt.set(e.index, p);
      msgClass.set(e.index, channelClass(e.role, e.channel));
      if (e.channel === null && (e.role === undefined || e.role === "assistant")) headerless.add(e.index);
      msgCall.set(e.index, e.role === "assistant" && !!e.recipient);
    } else if (e.type === "message_end" && e.index !== undefined) endAt.set(e.index, p);
    else if (e.type === "delta" && e.index !== undefined) {
      if (p < n) deltaAt[p] = e.index;
      // text with no header given again as the answer: it was the answer
      if (
        e.kind === "content" &&
        msgClass.get(e.index) === "analysis" &&
        events.some((m) => m.type === "message_start" && m.index === e.index && m.channel === null)
      )
        msgClass.set(e.index, "final");
    } else if (e.type === "recovery" || e.type === "error") {
      const at = typeof e.at === "number" ? e.at : p;
      if (at >= 0 && at < n) marks[at]!.push(i);
      else endMarks.push(i);
      if (e.type === "recovery" && e.kind === "after_stop") afterFrom = Math.min(afterFrom, at);
      if (e.type === "recovery" && e.kind === "junk_text") junkAt.push(p);
    }
  });
  // content: the tokens strictly between a message's header and its stop, and every token that gave a delta
  const content: (number | undefined)[] = new Array(n);
  for (const [k, from] of startAt) {
    const to = Math.min(endAt.get(k) ?? n, n);
    for (let i = from + 1; i < to; i++) if (content[i] === undefined) content[i] = k;
  }
  for (let i = 0; i < n; i++) if (deltaAt[i] !== undefined) content[i] = deltaAt[i];
  // the next message start at or after each token, and the last end before it
  const starts = [...startAt].sort((a, b) => a[1] - b[1]);
  const ends = [...endAt.values()].sort((a, b) => a - b);
  junkAt.sort((a, b) => a - b);
  const endOf = new Map<number, number>();
  for (const [k, p] of endAt) if (!endOf.has(p)) endOf.set(p, k);
  const out: TokenView[] = new Array(n);
  let si = 0;
  for (let i = 0; i < n; i++) {
    const t = infos[i]!;
    while (si < starts.length && starts[si]![1] < i) si++;
    const next = starts[si];
    const until = next ? next[1] : Infinity;
    // between messages, tokens belong to the next header if no message ends and no junk is reported before it
    const toNext = next !== undefined && !ends.some((e) => e >= i && e < until) && !junkAt.some((j) => j >= i && j < until);
    const k = content[i];
    let cls: TokenClass;
    let message = -1;
    if (isSpecial(t.id) || t.special) {
      cls = "control";
      message = k ?? endOf.get(i) ?? (toNext ? next[0] : -1);
    } else if (k !== undefined) {
      cls = msgClass.get(k) ?? "final";
      message = k;
    } else if (i >= afterFrom) cls = "after";
    else if (t.text === null) cls = "invalid";
    else if (toNext) {
      cls = "header";
      message = next[0];
    } else cls = "junk";
    const tool = k !== undefined && cls !== "control" && (msgCall.get(k) ?? false);
    out[i] = { at: i, id: t.id, label: tokenLabel(t), cls, message, tool, marks: marks[i]! };
  }
  return { tokens: out, endMarks };
}

/** What a token shows: its text, or its bytes, or its id when it is not a token. */
export function tokenLabel(t: TokenInfo): string {
  if (t.text === null) return `⟨${t.id}⟩`;
  return t.text;
}

export interface MessageView {
  index: number;
  role: string;
  name: string | null;
  channel: string | null;
  recipient: string | null;
  content_type: string | null;
  cls: TokenClass;
  text: string;
  stop: string | null;
  call: { id: string; name: string; arguments: string; pretty: string; valid_json: boolean } | null;
  /** A call whose tool_call_start came but no tool_call_end (cut short, or strict mode stopped). */
  open_call: { id: string; name: string } | null;
}

/** JSON arguments indented; anything else as it is. */
export function prettyArguments(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

/** The messages the events describe, in order, with their text and tool calls. */
export function collectMessages(events: InspectEvent[]): MessageView[] {
  const byIndex = new Map<number, MessageView>();
  const out: MessageView[] = [];
  for (const e of events) {
    if (e.index === undefined) continue;
    if (e.type === "message_start") {
      const m: MessageView = {
        index: e.index,
        role: e.role ?? "assistant",
        name: e.name ?? null,
        channel: e.channel ?? null,
        recipient: e.recipient ?? null,
        content_type: e.content_type ?? null,
        cls: channelClass(e.role, e.channel),
        text: "",
        stop: null,
        call: null,
        open_call: null,
      };
      byIndex.set(e.index, m);
      out.push(m);
      continue;
    }
    const m = byIndex.get(e.index);
    if (!m) continue;
    if (e.type === "delta") m.text += e.text ?? "";
    else if (e.type === "message_end") m.stop = e.stop ?? null;
    else if (e.type === "tool_call_start") m.open_call = { id: e.id ?? "", name: e.name ?? "" };
    else if (e.type === "tool_call_end") {
      const args = e.arguments ?? "";
      m.call = {
        id: e.id ?? "",
        name: e.name ?? "",
        arguments: args,
        pretty: e.valid_json ? prettyArguments(args) : args,
        valid_json: e.valid_json === true,
      };
      m.open_call = null;
    }
  }
  return out;
}

/** The `done` event, the recoveries and the errors. */
export function summarize(events: InspectEvent[]): { done: InspectEvent | null; recoveries: number[]; errors: number[] } {
  const recoveries: number[] = [];
  const errors: number[] = [];
  let done: InspectEvent | null = null;
  events.forEach((e, i) => {
    if (e.type === "recovery") recoveries.push(i);
    else if (e.type === "error") errors.push(i);
    else if (e.type === "done") done = e;
  });
  return { done, recoveries, errors };
}

// ---------------------------------------------------------------- what the page says and steps through

/** What Detect chose, in words. */
export function describeKind(kind: InputKind): string {
  return kind === "ids" ? "token ids" : kind === "sse" ? "an SSE log" : "Harmony text";
}

/** Recoveries or errors that say the same thing (type, code or kind, message or detail), with every token they are at. */
export interface MarkGroup {
  /** Index of the first event of the group (into the events). */
  first: number;
  events: number[];
  ats: number[];
}

/**
 * Group `marks` (event indices, in order) by what they say, numbers aside:
 * the forty "Unexpected token N while expecting start token 200006" errors
 * strict mode gives for the rest of a stream are one row with a count.
 */
export function groupMarks(events: InspectEvent[], marks: number[]): MarkGroup[] {
  const groups = new Map<string, MarkGroup>();
  const shape = (t: string | undefined) => (t ?? "").replace(/\d+/g, "#");
  for (const i of marks) {
    const e = events[i]!;
    const key = JSON.stringify([
      e.type,
      e.type === "error" ? e.code : e.kind,
      shape(e.type === "error" ? e.message : e.detail),
      e.raw ?? null,
    ]);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { first: i, events: [], ats: [] }));
    g.events.push(i);
    g.ats.push(typeof e.at === "number" ? e.at : -1);
  }
  return [...groups.values()].sort((a, b) => a.first - b.first);
}

/** A list of token positions for people: `5, 6, 7` or `5, 6, 7, … 44` (the first `head` and the last). */
export function positions(ats: number[], tokenCount: number, head = 6): string {
  const label = (a: number) => (a >= tokenCount ? "end" : String(a));
  if (ats.length <= head + 1) return ats.map(label).join(", ");
  return `${ats.slice(0, head).map(label).join(", ")}, … ${label(ats[ats.length - 1]!)}`;
}

/**
 * Stepping through a stream: at step `k` (0 … n + 1, n tokens), the first
 * `k` tokens are written (k = n + 1: and the stream ended). The events that
 * far are a prefix of the answer's (they come in the order they were
 * emitted); this is its length.
 */
export function eventsAtStep(answer: ParseAnswer, k: number): number {
  const n = answer.tokens?.length ?? 0;
  const emitted = answer.emitted;
  if (!emitted || k > n) return answer.events.length;
  let lo = 0;
  let hi = emitted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (emitted[mid]! < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How many of `chunks` came from the first `events` events (chunks are in event order). */
export function chunksUpTo(chunks: StreamedChunk[], events: number): number {
  let lo = 0;
  let hi = chunks.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (chunks[mid]!.event < events) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
