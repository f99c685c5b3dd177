/**
 * POST /v1/parse's work, off the HTTP edge: read the request body, encode
 * the text, parse, and write the answer. It runs on the inspector's own
 * worker thread (./worker.ts), so a big input never holds up the main
 * thread; this file has no thread of its own and is what the tests call.
 *
 * Request: `{text | ids, mode?, role?, tools?, calls?, after_stop?, tokens?, chunks?}`.
 * Answer: `{events}`, the events of the CLI's `parse` (one write, one end);
 * with `tokens: true` the ids are written one at a time, as an engine
 * streams them, and the answer adds `tokens` (each token's id and text) and
 * `emitted` (for each event, the token whose write returned it; the token
 * count for the events of the end of the stream): what the page needs to
 * colour tokens and mark recoveries. With `chunks: true` it adds `chunks`:
 * the Chat Completions chunks and Responses events the OpenAI front would
 * stream for these events (./chunks.ts), each with the event it came from.
 */
import type { HarmonyEvent } from "../core/events.js";
import { errorBody, type HttpErrorCode, type InputErrorCode, type RequestErrorCode, type ServiceErrorCode } from "../core/errors.js";
import { describeValue, isObj, parseJson } from "../core/json.js";
import { HarmonyParser, type ParseMode } from "../core/parser.js";
import { MAX_TOOL_NAME, MAX_TOOLS } from "../core/tools.js";
import { FLAG_SPECIAL, FLAG_WHOLE, type Vocabulary } from "../core/vocab.js";
import { frontChunks, type FrontChunks } from "./chunks.js";

export const PARSE_PATH = "/v1/parse";

export type ParseErrorCode = InputErrorCode | RequestErrorCode | ServiceErrorCode | HttpErrorCode;

export interface ParseRequest {
  text: string | null;
  ids: number[] | null;
  mode: ParseMode;
  role: "assistant" | "none";
  tools: string[] | null;
  /** Which calls the stream may make (`Open.calls`; the front's `tool_choice: "none"` and `parallel_tool_calls: false`). */
  calls: "any" | "none" | "one";
  afterStop: "drop" | "parse";
  tokens: boolean;
  chunks: boolean;
}

export interface ParseFailure {
  ok: false;
  status: number;
  code: ParseErrorCode;
  message: string;
}

export interface TokenInfo {
  id: number;
  text: string | null;
  special?: true;
  partial?: true;
}

export interface ParseAnswer {
  events: HarmonyEvent[];
  tokens?: TokenInfo[];
  emitted?: number[];
  chunks?: FrontChunks;
}

const fail = (code: ParseErrorCode, message: string): ParseFailure => ({ ok: false, status: 400, code, message });

/** Check a parsed request body. `maxIds` bounds the ids given (text is bounded after encoding). */
export function checkParseRequest(v: unknown, maxIds: number): { ok: true; req: ParseRequest } | ParseFailure {
  if (!isObj(v)) return fail("bad_request", "the body must be a JSON object");
  const o = v;
  const hasText = o.text !== undefined && o.text !== null;
  const hasIds = o.ids !== undefined && o.ids !== null;
  if (hasText === hasIds) return fail("bad_request", "give either `text` (Harmony text) or `ids` (token ids), not both");
  if (hasText && typeof o.text !== "string") return fail("bad_request", "`text` must be a string");
  let ids: number[] | null = null;
  if (hasIds) {
    if (!Array.isArray(o.ids)) return fail("bad_tokens", "`ids` must be an array of token ids");
    if (o.ids.length > maxIds) return fail("too_many_ids", `${o.ids.length} ids; the limit is ${maxIds} (--max-ids-per-frame)`);
    for (let i = 0; i < o.ids.length; i++) {
      const id: unknown = o.ids[i];
      if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id > 0xffffffff)
        return fail("bad_token_id", `ids[${i}] is not an integer in 0..2^32-1: ${describeValue(id)}`);
    }
    ids = o.ids as number[];
  }
  const mode = o.mode ?? "resilient";
  if (mode !== "resilient" && mode !== "strict") return fail("bad_option", '`mode` must be "resilient" or "strict"');
  const role = o.role ?? "assistant";
  if (role !== "assistant" && role !== "none")
    return fail("bad_option", '`role` must be "assistant" (a completion) or "none" (a whole conversation)');
  const afterStop = o.after_stop ?? "drop";
  if (afterStop !== "drop" && afterStop !== "parse") return fail("bad_option", '`after_stop` must be "drop" or "parse"');
  let tools: string[] | null = null;
  if (o.tools !== undefined && o.tools !== null) {
    if (!Array.isArray(o.tools) || o.tools.length > MAX_TOOLS || o.tools.some((t) => typeof t !== "string" || t.length > MAX_TOOL_NAME))
      return fail("bad_option", `\`tools\` must be an array of at most ${MAX_TOOLS} names of at most ${MAX_TOOL_NAME} characters`);
    tools = o.tools as string[];
  }
  const calls = o.calls ?? "any";
  if (calls !== "any" && calls !== "none" && calls !== "one") return fail("bad_option", '`calls` must be "any", "none" or "one"');
  if (o.tokens !== undefined && typeof o.tokens !== "boolean") return fail("bad_option", "`tokens` must be true or false");
  if (o.chunks !== undefined && typeof o.chunks !== "boolean") return fail("bad_option", "`chunks` must be true or false");
  return {
    ok: true,
    req: {
      text: hasText ? (o.text as string) : null,
      ids,
      mode,
      role,
      tools,
      calls,
      afterStop,
      tokens: o.tokens === true,
      chunks: o.chunks === true,
    },
  };
}

/** A token's id and text (`\xNN` bytes for part of a UTF-8 character, null for an id that is not a token). */
export function describeToken(vocab: Vocabulary, id: number): TokenInfo {
  if (!vocab.isToken(id)) return { id, text: null };
  const f = vocab.flags[id]!;
  if (f & FLAG_WHOLE) return f & FLAG_SPECIAL ? { id, text: vocab.text(id), special: true } : { id, text: vocab.text(id) };
  let hex = "";
  for (let i = vocab.byteStart(id); i < vocab.byteEnd(id); i++) hex += `\\x${vocab.bytes[i]!.toString(16).padStart(2, "0")}`;
  return { id, text: hex, partial: true };
}

/** Parse a checked request: text is encoded first (`encode` writes special tokens out as themselves). */
export function runParseRequest(
  vocab: Vocabulary,
  encode: (text: string) => number[],
  req: ParseRequest,
  maxIds: number,
): { ok: true; answer: ParseAnswer } | ParseFailure {
  const ids = req.ids ?? encode(req.text ?? "");
  if (ids.length > maxIds) return fail("too_many_ids", `the text is ${ids.length} tokens; the limit is ${maxIds} (--max-ids-per-frame)`);
  const parser = new HarmonyParser(vocab, {
    mode: req.mode,
    role: req.role === "none" ? null : "assistant",
    afterStop: req.afterStop,
    tools: req.tools,
    calls: req.calls,
  });
  if (!req.tokens) {
    const events = [...parser.write(ids), ...parser.end()];
    return { ok: true, answer: { events, ...(req.chunks ? { chunks: frontChunks(events) } : {}) } };
  }
  const events: HarmonyEvent[] = [];
  const emitted: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    for (const e of parser.write(ids, i, i + 1)) {
      events.push(e);
      emitted.push(i);
    }
  }
  for (const e of parser.end()) {
    events.push(e);
    emitted.push(ids.length);
  }
  return {
    ok: true,
    answer: { events, tokens: ids.map((id) => describeToken(vocab, id)), emitted, ...(req.chunks ? { chunks: frontChunks(events) } : {}) },
  };
}

/** A POST /v1/parse body for the parse thread (workers/inspect.ts). */
export interface ParseJob {
  id: number;
  body: Uint8Array;
  maxIds: number;
}

/** The parse thread's answer. */
export interface ParseDone {
  id: number;
  status: number;
  /** The answer's JSON, UTF-8 (moved, not copied, to the edge's thread). */
  body: Uint8Array;
}

/** The whole request: body bytes in, status and JSON text out. */
export function answerParse(
  vocab: Vocabulary,
  encode: (text: string) => number[],
  body: Uint8Array,
  maxIds: number,
): { status: number; json: string } {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch (e) {
    return { status: 400, json: JSON.stringify(errorBody("bad_json", `the body is not JSON: ${(e as Error).message}`)) };
  }
  const parsed = parseJson(text);
  if (!parsed.ok) {
    const message = parsed.code === "bad_json" ? `the body is not JSON: ${parsed.message}` : parsed.message;
    return { status: 400, json: JSON.stringify(errorBody(parsed.code, message)) };
  }
  const checked = checkParseRequest(parsed.value, maxIds);
  const r = checked.ok ? runParseRequest(vocab, encode, checked.req, maxIds) : checked;
  if (!r.ok) return { status: r.status, json: JSON.stringify(errorBody(r.code, r.message)) };
  return { status: 200, json: JSON.stringify(r.answer) };
}
