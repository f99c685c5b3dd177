/**
 * A generator of realistic gpt-oss completions, with faults injected the way
 * serving stacks meet them. Each generated stream carries the messages the
 * model meant (`intended`), which is what a resilient parser must deliver.
 *
 * Everything is a function of (seed, index): a failing stream is replayed by
 * generating the same index again.
 */
import { HARMONY } from "../core/preset.js";
import { decodeLossy } from "../core/utf8.js";
import type { ReferenceMessage } from "../core/events.js";
import type { Vocabulary } from "../core/vocab.js";
import { argumentsFor, type ToolSpec } from "./arguments.js";

export interface Encoder {
  /** Text with special tokens written out → ids. */
  encode(text: string): number[];
  /** Ordinary text → ids. */
  encodeOrdinary(text: string): number[];
}

export const FAULT_KINDS = [
  "restart_after_recipient",
  "restart_after_channel_and_recipient",
  "restart_at_first_message",
  "abandoned_header_closed_by_end",
  "duplicated_recipient",
  "constrain_spaced",
  "missing_message_token",
  "headerless_text_first",
  "missing_start_between_messages",
  "stray_stop_between_messages",
  "junk_text_between_messages",
  "double_start",
  "stray_header_before_analysis",
  "out_of_vocab_token_in_content",
  "invalid_id_between_messages",
  "truncated_mid_header",
  "truncated_mid_content",
  "truncated_mid_arguments",
  "truncated_anywhere",
] as const;

/**
 * Shapes of real gpt-oss output the resilience rules name
 * (docs/resilience.md, rules 8–16), for the engine simulator (`simulate-engine`), where each
 * generation's calls go to the tools its request declares. Not part of
 * `loadtest`'s own catalogue (FAULT_KINDS): their intended messages are
 * defined by what the model meant (the call's JSON, the final answer), which
 * the OpenAI-level checks compare, not by the parser's exact messages.
 */
export const REAL_FAULT_KINDS = [
  /** rule 8: the engine did not stop at <|call|>: the model writes the tool's result and answers from it. */
  "continues_after_call",
  /** rule 8: more text after the <|return|> that ends the answer. */
  "continues_after_return",
  /** rule 9: the answer ends with <|endoftext|> instead of <|return|>. */
  "endoftext_instead_of_return",
  /** rule 9: a reserved special token inside text or arguments. */
  "reserved_token_in_content",
  /** rule 10: the role word `assistant` as text between messages. */
  "role_word_between_messages",
  /** rule 11: `<|channel|>final json`: a content-type word where a recipient could stand. */
  "final_with_type_word",
  /** rule 11: `to=get_weather`, the declared tool's bare name. */
  "bare_tool_name",
  /** rule 12: arguments written as a JSON string's body (`{\"a\":1}`). */
  "args_over_escaped",
  /** rule 12: arguments in a Markdown code fence or after a `json` word. */
  "args_fenced",
  /** rule 12: a stray word or closing brace after the arguments. */
  "args_trailing_junk",
  /** rule 13: the analysis header stripped: the completion starts with its reasoning text. */
  "headerless_reasoning",
  /** rule 14: `<|end|>` where a header's `<|message|>` belongs, text after it. */
  "end_instead_of_message",
  /** rule 15: a garbled channel name (`final>`, `FINAL`, `final_answer`). */
  "channel_misspelled",
  /** rule 16: one line of reasoning repeated past 16 times. */
  "repetition_loop",
] as const;

/** Every kind the generator can inject. */
export const ALL_FAULT_KINDS = [...FAULT_KINDS, ...REAL_FAULT_KINDS] as const;

/** Kinds that put ids outside the vocabulary into a stream: transport corruption, never what an engine samples. */
export const OUT_OF_VOCAB_FAULT_KINDS: readonly FaultKind[] = ["out_of_vocab_token_in_content", "invalid_id_between_messages"];

/** The kinds an engine's output can show (the simulator's default): every kind but the out-of-vocabulary ones. */
export const ENGINE_FAULT_KINDS: readonly FaultKind[] = ALL_FAULT_KINDS.filter((k) => !OUT_OF_VOCAB_FAULT_KINDS.includes(k));

export type FaultKind = (typeof FAULT_KINDS)[number] | (typeof REAL_FAULT_KINDS)[number];

export interface GeneratedStream {
  index: number;
  /** The shape of the completion (for reports). */
  shape: string;
  fault: FaultKind | null;
  tokens: number[];
  intended: ReferenceMessage[];
  /** The stream was cut inside the last intended message (its content is the part before the cut). */
  lastPartial?: boolean;
  /** Where the meant completion ends, when tokens were generated past it (continues_after_call, continues_after_return). */
  end?: number;
}

/** mulberry32 */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of one stream. */
export function streamSeed(seed: number, index: number): number {
  return (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) >>> 0;
}

// ------------------------------------------------------------------ text

const REASONING = [
  "The user asks for the weather in a specific city; we should call the tool.",
  "We need to answer concisely and check the units first.",
  "Let's double-check the arithmetic: 17 × 23 = 391.",
  "Edge case: empty input, very large values, unicode like “naïve café”.",
  "The schema says `location` is required and `unit` is optional.",
  "Hmm, is there a more idiomatic way? Possibly, but this is fine.",
  "Make sure the JSON is valid: no trailing commas, booleans lowercase.",
  "The question is ambiguous; we can state our assumption.",
  "We don't need the browser for this; the answer is known.",
  "Let me reconsider the time zone: America/Toronto is UTC−5 in winter.",
  "Plan:\n1. Parse the input\n2. Compute the result\n3. Explain briefly",
  "Inline check: `i < n - 1` — yes, the loop stops one early.",
  "The user writes in Japanese (「よろしくお願いします」); answer in kind.",
  "Note the literal text <|end|> in their question is just text about templates.",
  "They want a table. Columns: name, value, note.",
];

const ANSWERS = [
  "Here is the result:\n\n| Name | Value |\n|---|---|\n| a | 1 |\n| b | 2 |",
  "**Short answer:** yes — it works because the cache is warm. 🚀",
  "```python\ndef add(a, b):\n    return a + b\n```\nThat is all you need.",
  "東京の天気は晴れ、最高気温は23℃です。☀️",
  "Привет! Сегодня в Москве +5 °C и облачно.",
  "مرحبا! الطقس اليوم مشمس في القاهرة.",
  "שלום! מחר ירד גשם בתל אביב.",
  "नमस्ते! आज दिल्ली में धूप है।",
  "서울은 오늘 맑고 기온은 18도입니다. 🌤️",
  "Γειά σου! Η Αθήνα έχει ήλιο σήμερα.",
  "Ça marche : le café « Les Deux Magots » ouvre à 7 h 30.",
  "Family emoji test: 👨‍👩‍👧‍👦 and flags 🇺🇸🇯🇵, skin tones 👋🏾.",
  "The template writes `<|start|>assistant` as plain text here; nothing special.",
  "Done — I wrote 109 bytes to `config/settings.yaml`.",
  "I'm sorry, but I can't help with that.",
];

const PREAMBLES = [
  "Let me look that up for you.",
  "Checking the forecast now.",
  "I'll run a quick query against the database.",
  "Fetching the latest quote.",
];

const FUNCTIONS: { name: string; args: () => string[] }[] = [
  {
    name: "get_weather",
    args: () => ['{"location":"San Francisco, CA"}', '{"location": "Kraków", "unit": "celsius"}', '{"location":"東京"}'],
  },
  { name: "get_current_time", args: () => ['{"timezone":"America/Toronto"}', '{"timezone": "Asia/Tokyo"}'] },
  { name: "search_restaurants", args: () => ['{"location":"서울","cuisine":"pâtisserie","open_now":true}'] },
  { name: "send_email", args: () => ['{"to":["jose.alvarez@example.es"],"subject":"Reunión 📅","body":"Hola,\\nNos vemos el lunes."}'] },
  { name: "query_database", args: () => ['{\n  "sql": "SELECT count(*) FROM users WHERE created_at > \'2025-01-01\'"\n}'] },
  { name: "set_reminder", args: () => ['{"text":"Water the plants 🪴","time":"2025-07-01T09:00:00Z"}'] },
  { name: "get-stock-price", args: () => ['{"ticker":"NVDA","exchange":"NASDAQ"}'] },
];

const BUILTINS: { recipient: string; type: string | null; args: string[] }[] = [
  {
    recipient: "python",
    type: "code",
    args: ["import math\nprint(math.sqrt(2))", "primes = [n for n in range(2, 50) if all(n % d for d in range(2, n))]\nprint(len(primes))"],
  },
  { recipient: "browser.search", type: null, args: ['{"query":"gpt-oss harmony format","topn":5}'] },
  { recipient: "browser.open", type: null, args: ['{"id":3,"loc":120}'] },
  { recipient: "container.exec", type: "<|constrain|>json", args: ['{"cmd":["python3","-c","print(sum(range(10)))"]}'] },
];

const JUNK = [" 364 ", ".", "commentary", "\n\n", " ", "\n", ";", " ..."];

// ------------------------------------------------------------------ structure

/** One message as the model writes it, before tokenisation. */
interface Part {
  msg: ReferenceMessage;
  /** How the header is spelt (recipient before/after the channel, content type form). */
  header: string;
  content: number[];
  stop: "<|end|>" | "<|call|>" | "<|return|>" | "";
}

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

function sentences(r: () => number, pool: readonly string[], min: number, max: number): string {
  const n = min + Math.floor(r() * (max - min + 1));
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(pick(r, pool));
  return out.join(r() < 0.3 ? "\n\n" : " ");
}

/** Ids memoised per encoder: pooled text and Harmony markup repeat across streams. */
const memos = new WeakMap<Encoder, { text: Map<string, number[]>; markup: Map<string, number[]> }>();
function memoOf(enc: Encoder): { text: Map<string, number[]>; markup: Map<string, number[]> } {
  let m = memos.get(enc);
  if (!m) {
    m = { text: new Map(), markup: new Map() };
    memos.set(enc, m);
  }
  return m;
}

/**
 * Ids for generated content. Pooled sentences are tokenised once; text made
 * of them is tokenised piece by piece (the same text, split where BPE would
 * split anyway), so generation stays cheap at 100k streams.
 */
function tokensOf(enc: Encoder, text: string): number[] {
  const m = memoOf(enc).text;
  const hit = m.get(text);
  if (hit) return hit;
  const pieces = text.split(/(?=(?:\n\n|\s)(?:[^\s]))/);
  if (pieces.length > 1) return pieces.flatMap((p) => tokensOf(enc, p));
  const ids = enc.encodeOrdinary(text);
  if (m.size < 4096) m.set(text, ids);
  return ids;
}

function contentTypeSpelling(r: () => number, type: string | null): { text: string; type: string | undefined } {
  if (type === null) return { text: "", type: undefined };
  if (type.startsWith("<|constrain|>")) {
    // spaced or adjacent
    return r() < 0.6 ? { text: ` ${type}`, type } : { text: type, type };
  }
  return { text: ` ${type}`, type };
}

function toolHeader(r: () => number, recipient: string, channel: string, typeText: string): string {
  return r() < 0.5 ? `<|channel|>${channel} to=${recipient}${typeText}` : ` to=${recipient}<|channel|>${channel}${typeText}`;
}

function message(channel: string, content: string, recipient?: string, contentType?: string): ReferenceMessage {
  // the reference's key order: role, recipient, content, channel, content_type
  const m: ReferenceMessage = { role: "assistant" } as ReferenceMessage;
  if (recipient) m.recipient = recipient;
  m.content = content;
  if (channel) m.channel = channel;
  if (contentType) m.content_type = contentType;
  return m;
}

/**
 * The shape of a well-formed completion. With `tools` (a request's declared
 * function tools), calls go only to them, with arguments for their
 * parameters, and no built-in tool is called; with none declared, the
 * completion answers.
 */
function compose(r: () => number, enc: Encoder, tools?: readonly ToolSpec[]): { shape: string; parts: Part[] } {
  const parts: Part[] = [];
  const text = (channel: string, content: string, stop: Part["stop"]) => {
    parts.push({ msg: message(channel, content), header: `<|channel|>${channel}`, content: tokensOf(enc, content), stop });
  };
  const shapeRoll = r();
  text("analysis", sentences(r, REASONING, 1, r() < 0.1 ? 40 : 6), "<|end|>");
  let shape: string;
  if (shapeRoll < 0.35 || (tools !== undefined && tools.length === 0)) {
    shape = "answer";
    text("final", sentences(r, ANSWERS, 1, 4), "<|return|>");
  } else if (shapeRoll < 0.8 || tools !== undefined) {
    shape = "function_call";
    if (r() < 0.3) text("commentary", pick(r, PREAMBLES), "<|end|>");
    const calls = r() < 0.25 ? 2 + Math.floor(r() * 2) : 1;
    for (let c = 0; c < calls; c++) {
      let name: string;
      let args: string;
      if (tools) {
        const tool = pick(r, tools);
        name = tool.name;
        args = argumentsFor(r, tool);
      } else {
        const fn = pick(r, FUNCTIONS);
        name = fn.name;
        args = pick(r, fn.args());
      }
      const channel = r() < 0.85 ? "commentary" : "analysis";
      const ct = contentTypeSpelling(r, pick(r, ["<|constrain|>json", "<|constrain|>json", "json", "code", null]));
      const recipient = `functions.${name}`;
      parts.push({
        msg: message(channel, args, recipient, ct.type),
        header: toolHeader(r, recipient, channel, ct.text),
        content: tokensOf(enc, args),
        stop: c === calls - 1 ? "<|call|>" : "<|end|>",
      });
    }
    if (calls > 1) shape = "parallel_calls";
  } else {
    shape = "builtin_call";
    const b = pick(r, BUILTINS);
    const args = pick(r, b.args);
    const ct = contentTypeSpelling(r, b.type);
    const channel = r() < 0.8 ? "analysis" : "commentary";
    parts.push({
      msg: message(channel, args, b.recipient, ct.type),
      header: toolHeader(r, b.recipient, channel, ct.text),
      content: tokensOf(enc, args),
      stop: "<|call|>",
    });
  }
  // some completions end without a stop token (the engine hit a limit)
  if (shape === "answer" && r() < 0.08) parts[parts.length - 1]!.stop = "";
  return { shape, parts };
}

// ------------------------------------------------------------------ rendering

interface Rendered {
  tokens: number[];
  /** Per message: [headerStart, contentStart, contentEnd, end) token positions. */
  spans: [number, number, number, number][];
}

/** Ids of Harmony markup (headers, stop tokens), specials allowed. */
function markup(enc: Encoder, text: string): number[] {
  const m = memoOf(enc).markup;
  let ids = m.get(text);
  if (!ids) {
    ids = enc.encode(text);
    if (m.size < 8192) m.set(text, ids);
  }
  return ids;
}

function render(parts: Part[], enc: Encoder, override?: (i: number) => string | undefined): Rendered {
  const tokens: number[] = [];
  const spans: Rendered["spans"] = [];
  for (const [i, p] of parts.entries()) {
    const hs = tokens.length;
    const prefix = i === 0 ? "" : "<|start|>assistant";
    tokens.push(...markup(enc, override?.(i) ?? `${prefix}${p.header}<|message|>`));
    const cs = tokens.length;
    tokens.push(...p.content);
    const ce = tokens.length;
    if (p.stop) tokens.push(...markup(enc, p.stop));
    spans.push([hs, cs, ce, tokens.length]);
  }
  return { tokens, spans };
}

/** Content token positions in [cs, ce) where the prefix is whole UTF-8. */
function charBoundaries(vocab: Vocabulary, tokens: number[], cs: number, ce: number): number[] {
  const out: number[] = [];
  let pending = 0; // bytes still owed to an incomplete character
  for (let i = cs; i < ce; i++) {
    if (pending === 0 && i > cs) out.push(i);
    const id = tokens[i]!;
    for (let b = vocab.byteStart(id); b < vocab.byteEnd(id); b++) {
      const x = vocab.bytes[b]!;
      if (pending > 0 && x >= 0x80 && x < 0xc0) pending--;
      else if (x >= 0xf0) pending = 3;
      else if (x >= 0xe0) pending = 2;
      else if (x >= 0xc0) pending = 1;
      else pending = 0;
    }
  }
  return out;
}

function decodeTokens(vocab: Vocabulary, ids: number[]): string {
  let n = 0;
  for (const id of ids) n += vocab.byteEnd(id) - vocab.byteStart(id);
  const buf = new Uint8Array(n);
  let o = 0;
  for (const id of ids) {
    buf.set(vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id)), o);
    o += vocab.byteEnd(id) - vocab.byteStart(id);
  }
  return decodeLossy(buf, 0, n, new Int32Array(2));
}

// ------------------------------------------------------------------ faults

/** What an injector is given: the fault kind, the random source, the completion's parts, the tokenizer. */
type InjectArgs = [kind: FaultKind, r: () => number, parts: Part[], enc: Encoder, vocab: Vocabulary];

/** A completion with a fault in it: its ids, the messages meant, whether it is cut short, where it ends. */
interface Injected {
  tokens: number[];
  intended: ReferenceMessage[];
  partial?: boolean;
  end?: number;
}

/**
 * Apply a fault. Returns null when the completion has no place for it (the
 * caller then draws another fault kind).
 */
function inject(...[kind, r, parts, enc, vocab]: InjectArgs): Injected | null {
  const intended = parts.map((p) => p.msg);
  const tools = parts.map((p, i) => (p.msg.recipient ? i : -1)).filter((i) => i >= 0);
  const laterTools = tools.filter((i) => i > 0);
  const texts = parts.map((p, i) => (!p.msg.recipient && p.msg.content.trim().split(/\s+/).length >= 3 ? i : -1)).filter((i) => i >= 0);
  const typeSpelling = (t: string | undefined) => (t === undefined ? "" : t.startsWith("<|") ? pick(r, [` ${t}`, t]) : ` ${t}`);

  switch (kind) {
    case "restart_after_recipient":
    case "restart_after_channel_and_recipient": {
      if (laterTools.length === 0) return null;
      const i = pick(r, laterTools);
      const m = parts[i]!.msg;
      const abandoned =
        kind === "restart_after_recipient"
          ? `<|start|>assistant to=${m.recipient}`
          : `<|start|>assistant<|channel|>${m.channel} to=${m.recipient}`;
      const restart = `<|start|>assistant<|channel|>${m.channel}${typeSpelling(m.content_type)}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === i ? abandoned + restart : undefined)).tokens, intended };
    }
    case "restart_at_first_message": {
      if (!parts[0]!.msg.recipient) {
        // make the completion start with its tool call
        const t = tools[0];
        if (t === undefined) return null;
        parts = parts.slice(t);
      }
      const m = parts[0]!.msg;
      const header = `<|start|>assistant to=${m.recipient}<|start|>assistant<|channel|>${m.channel}${typeSpelling(m.content_type)}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === 0 ? header : undefined)).tokens, intended: parts.map((p) => p.msg) };
    }
    case "abandoned_header_closed_by_end": {
      if (laterTools.length === 0) return null;
      const i = pick(r, laterTools);
      const m = parts[i]!.msg;
      const abandoned =
        r() < 0.5
          ? `<|start|>assistant to=${m.recipient}<|channel|>${m.channel}<|end|>`
          : `<|start|>assistant<|channel|>${m.channel} to=${m.recipient}<|end|>`;
      const restart = `<|start|>assistant<|channel|>${m.channel}${typeSpelling(m.content_type)}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === i ? abandoned + restart : undefined)).tokens, intended };
    }
    case "duplicated_recipient": {
      if (tools.length === 0) return null;
      const i = pick(r, tools);
      const m = parts[i]!.msg;
      const prefix = i === 0 ? "" : "<|start|>assistant";
      const ct = typeSpelling(m.content_type);
      const header =
        r() < 0.5
          ? `${prefix} to=${m.recipient} to=${m.recipient}<|channel|>${m.channel}${ct}<|message|>`
          : `${prefix}<|channel|>${m.channel} to=${m.recipient} to=${m.recipient}${ct}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === i ? header : undefined)).tokens, intended };
    }
    case "constrain_spaced": {
      const candidates = tools.filter((i) => parts[i]!.msg.content_type?.startsWith("<|constrain|>"));
      if (candidates.length === 0) return null;
      const i = pick(r, candidates);
      const m = parts[i]!.msg;
      const prefix = i === 0 ? "" : "<|start|>assistant";
      const word = m.content_type!.slice("<|constrain|>".length);
      const header =
        r() < 0.5
          ? `${prefix} to=${m.recipient}<|channel|>${m.channel} <|constrain|> ${word}<|message|>`
          : `${prefix}<|channel|>${m.channel} to=${m.recipient} <|constrain|> ${word}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === i ? header : undefined)).tokens, intended };
    }
    case "missing_message_token": {
      if (texts.length === 0) return null;
      const i = pick(r, texts);
      const m = parts[i]!.msg;
      if (/^\s/.test(m.content)) return null;
      const prefix = i === 0 ? "" : "<|start|>assistant";
      return { tokens: render(parts, enc, (k) => (k === i ? `${prefix}<|channel|>${m.channel} ` : undefined)).tokens, intended };
    }
    case "headerless_text_first": {
      const answer = sentences(r, ANSWERS, 1, 3);
      if (/^\s/.test(answer)) return null;
      const stop = pick(r, ["<|return|>", "<|end|>", ""] as const);
      const only: Part = { msg: message("final", answer), header: "", content: tokensOf(enc, answer), stop };
      return { tokens: [...only.content, ...(stop ? enc.encode(stop) : [])], intended: [only.msg] };
    }
    case "missing_start_between_messages": {
      if (parts.length < 2) return null;
      const i = 1 + Math.floor(r() * (parts.length - 1));
      const p = parts[i]!;
      // the header as written, without the <|start|>assistant before it
      return { tokens: render(parts, enc, (k) => (k === i ? `${p.header}<|message|>` : undefined)).tokens, intended };
    }
    case "stray_stop_between_messages":
    case "junk_text_between_messages":
    case "invalid_id_between_messages": {
      const { tokens, spans } = render(parts, enc);
      const stopped = parts.map((p, i) => (p.stop ? i : -1)).filter((i) => i >= 0);
      if (stopped.length === 0) return null;
      const i = pick(r, kind === "junk_text_between_messages" ? stopped.filter((k) => k < parts.length - 1) : stopped);
      if (i === undefined) return null;
      const at = spans[i]![3];
      const insert =
        kind === "stray_stop_between_messages"
          ? enc.encode(pick(r, ["<|end|>", "<|return|>", "<|call|>"]))
          : kind === "junk_text_between_messages"
            ? enc.encodeOrdinary(pick(r, JUNK))
            : [pick(r, [HARMONY.vocabLimit, 250000, 2 ** 31, 4294967295])];
      tokens.splice(at, 0, ...insert);
      return { tokens, intended };
    }
    case "double_start": {
      if (parts.length < 2) return null;
      const i = 1 + Math.floor(r() * (parts.length - 1));
      const p = parts[i]!;
      return {
        tokens: render(parts, enc, (k) => (k === i ? `<|start|><|start|>assistant${p.header}<|message|>` : undefined)).tokens,
        intended,
      };
    }
    case "stray_header_before_analysis": {
      if (parts[0]!.msg.channel !== "analysis" || parts[0]!.msg.recipient) return null;
      return {
        tokens: render(parts, enc, (k) => (k === 0 ? "<|channel|>commentary to=assistant<|channel|>analysis<|message|>" : undefined))
          .tokens,
        intended,
      };
    }
    case "out_of_vocab_token_in_content": {
      const { tokens, spans } = render(parts, enc);
      const i = Math.floor(r() * parts.length);
      const [, cs, ce] = spans[i]!;
      const bounds = charBoundaries(vocab, tokens, cs, ce);
      if (bounds.length === 0) return null;
      const at = pick(r, bounds);
      const before = decodeTokens(vocab, tokens.slice(cs, at));
      const after = decodeTokens(vocab, tokens.slice(at, ce));
      tokens.splice(at, 0, pick(r, [HARMONY.vocabLimit, 250000, 1_000_000]));
      const copy = intended.slice();
      copy[i] = { ...copy[i]!, content: `${before}\uFFFD${after}` };
      return { tokens, intended: reorder(copy) };
    }
    case "truncated_mid_header": {
      if (parts.length < 2) return null;
      const { tokens, spans } = render(parts, enc);
      const i = 1 + Math.floor(r() * (parts.length - 1));
      const [hs, cs] = spans[i]!;
      // cut after <|start|> and before <|message|> (the header's last token)
      const cut = hs + 1 + Math.floor(r() * Math.max(1, cs - hs - 2));
      return { tokens: tokens.slice(0, Math.min(cut, cs - 1)), intended: intended.slice(0, i) };
    }
    case "truncated_mid_content":
    case "truncated_mid_arguments": {
      const pool = kind === "truncated_mid_arguments" ? tools : parts.map((_, i) => i).filter((i) => !parts[i]!.msg.recipient);
      if (pool.length === 0) return null;
      const { tokens, spans } = render(parts, enc);
      const i = pick(r, pool);
      const [, cs, ce] = spans[i]!;
      const bounds = charBoundaries(vocab, tokens, cs, ce);
      if (bounds.length === 0) return null;
      const cut = pick(r, bounds);
      const copy = intended.slice(0, i + 1);
      copy[i] = { ...copy[i]!, content: decodeTokens(vocab, tokens.slice(cs, cut)) };
      return { tokens: tokens.slice(0, cut), intended: reorder(copy), partial: true };
    }
    case "truncated_anywhere": {
      const { tokens, spans } = render(parts, enc);
      const cut = 1 + Math.floor(r() * (tokens.length - 1));
      const kept: ReferenceMessage[] = [];
      let partial = false;
      for (const [i, [, cs, ce, end]] of spans.entries()) {
        if (end <= cut && (parts[i]!.stop || end === tokens.length)) kept.push(intended[i]!);
        else if (cut >= cs) {
          // inside the content (or right after its last content token)
          kept.push({ ...intended[i]!, content: decodeTokens(vocab, tokens.slice(cs, Math.min(cut, ce))) });
          partial = true;
          break;
        } else break; // inside a header: the message was never started
      }
      return { tokens: tokens.slice(0, cut), intended: reorder(kept), partial };
    }
    default:
      return injectReal(kind, r, parts, enc, vocab);
  }
}

/** A tool's made-up result and the answer the model writes from it, after a call it should have stopped at. */
const INVENTED_RESULTS = ['{"temperature": 21, "unit": "celsius"}', '{"status":"ok","rows":3}', '{"result": "done"}'];
const INVENTED_ANSWERS = ["It is 21 °C and sunny there right now.", "Done: the query returned 3 rows.", "All set."];
const REPEATED_LINES = ["Let me check the units again.\n", "Wait.\n", "Hmm, let me think about this.\n"];
/** Reserved special ids (o200k_harmony names them `<|reserved_N|>`): control tokens that mean nothing. */
const RESERVED_IDS = reservedIds();

/** Every special id of the preset that has no name of its own. */
function reservedIds(): number[] {
  const named = new Set(Object.values(HARMONY.specials));
  const ids: number[] = [];
  for (let id = HARMONY.firstSpecial; id < HARMONY.vocabLimit; id++) if (!named.has(id)) ids.push(id);
  return ids;
}

/** The real-world shapes (REAL_FAULT_KINDS); null when the completion has no place for one. */
function injectReal(...[kind, r, parts, enc, vocab]: InjectArgs): Injected | null {
  const intended = parts.map((p) => p.msg);
  const last = parts[parts.length - 1]!;
  const functionCalls = parts.map((p, i) => (p.msg.recipient?.startsWith("functions.") ? i : -1)).filter((i) => i >= 0);
  const texts = parts.map((p, i) => (!p.msg.recipient ? i : -1)).filter((i) => i >= 0);
  const prefixOf = (i: number) => (i === 0 ? "" : "<|start|>assistant");
  const typeSpelling = (t: string | undefined) => (t === undefined ? "" : t.startsWith("<|") ? pick(r, [` ${t}`, t]) : ` ${t}`);
  const withContent = (i: number, text: string) => parts.map((p, k) => (k === i ? { ...p, content: tokensOf(enc, text) } : p));
  switch (kind) {
    case "continues_after_call": {
      if (last.stop !== "<|call|>" || !last.msg.recipient?.startsWith("functions.")) return null;
      const k = Math.floor(r() * INVENTED_RESULTS.length);
      const tail = [
        ...markup(enc, `<|start|>${last.msg.recipient} to=assistant<|channel|>commentary<|message|>`),
        ...tokensOf(enc, INVENTED_RESULTS[k]!),
        ...markup(enc, "<|end|><|start|>assistant<|channel|>final<|message|>"),
        ...tokensOf(enc, INVENTED_ANSWERS[k]!),
        ...markup(enc, "<|return|>"),
      ];
      const meant = render(parts, enc).tokens;
      return { tokens: [...meant, ...tail], intended, end: meant.length };
    }
    case "continues_after_return": {
      if (last.stop !== "<|return|>") return null;
      const tail = [
        ...markup(enc, "<|start|>assistant<|channel|>analysis<|message|>"),
        ...tokensOf(enc, pick(r, REASONING)),
        ...markup(enc, "<|end|><|start|>assistant<|channel|>final<|message|>"),
        ...tokensOf(enc, pick(r, ANSWERS)),
        ...markup(enc, "<|return|>"),
      ];
      const meant = render(parts, enc).tokens;
      return { tokens: [...meant, ...tail], intended, end: meant.length };
    }
    case "endoftext_instead_of_return": {
      if (last.stop !== "<|return|>") return null;
      const tokens = render(parts, enc).tokens;
      tokens.splice(tokens.length - 1, 1, ...enc.encode("<|endoftext|>"));
      return { tokens, intended };
    }
    case "reserved_token_in_content": {
      const { tokens, spans } = render(parts, enc);
      const i = Math.floor(r() * parts.length);
      const [, cs, ce] = spans[i]!;
      const bounds = charBoundaries(vocab, tokens, cs, ce);
      if (bounds.length === 0) return null;
      tokens.splice(pick(r, bounds), 0, pick(r, RESERVED_IDS));
      return { tokens, intended };
    }
    case "role_word_between_messages": {
      if (parts.length < 2) return null;
      const { tokens, spans } = render(parts, enc);
      const i = Math.floor(r() * (parts.length - 1));
      if (!parts[i]!.stop) return null;
      tokens.splice(spans[i]![3], 0, ...enc.encodeOrdinary(pick(r, ["assistant", "assistant\n", " assistant"])));
      return { tokens, intended };
    }
    case "final_with_type_word": {
      const i = parts.findIndex((p) => p.msg.channel === "final" && !p.msg.recipient);
      if (i < 0) return null;
      const word = pick(r, ["json", "code"]);
      const copy = intended.slice();
      copy[i] = { ...copy[i]!, content_type: word };
      return {
        tokens: render(parts, enc, (k) => (k === i ? `${prefixOf(i)}<|channel|>final ${word}<|message|>` : undefined)).tokens,
        intended: reorder(copy),
      };
    }
    case "bare_tool_name": {
      if (functionCalls.length === 0) return null;
      const i = pick(r, functionCalls);
      const m = parts[i]!.msg;
      const bare = m.recipient!.slice("functions.".length);
      const ct = typeSpelling(m.content_type);
      const header =
        r() < 0.5
          ? `${prefixOf(i)}<|channel|>${m.channel} to=${bare}${ct}<|message|>`
          : `${prefixOf(i)} to=${bare}<|channel|>${m.channel}${ct}<|message|>`;
      return { tokens: render(parts, enc, (k) => (k === i ? header : undefined)).tokens, intended };
    }
    case "args_over_escaped":
    case "args_fenced":
    case "args_trailing_junk": {
      const objects = functionCalls.filter((i) => parts[i]!.msg.content.trimStart().startsWith("{"));
      if (objects.length === 0) return null;
      const i = pick(r, objects);
      const args = parts[i]!.msg.content;
      // over-escaped as seen in real outputs: one line (`{\"a\":1}`); indented JSON is written compact first
      const written =
        kind === "args_over_escaped"
          ? JSON.stringify(args.includes("\n") ? JSON.stringify(JSON.parse(args)) : args).slice(1, -1)
          : kind === "args_fenced"
            ? r() < 0.7
              ? `\`\`\`json\n${args}\n\`\`\``
              : `json${args}`
            : args + pick(r, ["}", " }", "\n}", " commentary"]);
      return { tokens: render(withContent(i, written), enc).tokens, intended };
    }
    case "headerless_reasoning": {
      const first = parts[0]!;
      if (first.msg.channel !== "analysis" || first.msg.recipient || /^\s/.test(first.msg.content)) return null;
      return { tokens: render(parts, enc, (k) => (k === 0 ? "" : undefined)).tokens, intended };
    }
    case "end_instead_of_message": {
      const candidates = texts.filter((i) => !/^\s/.test(parts[i]!.msg.content));
      if (candidates.length === 0) return null;
      const i = pick(r, candidates);
      return {
        tokens: render(parts, enc, (k) => (k === i ? `${prefixOf(i)}<|channel|>${parts[i]!.msg.channel}<|end|>` : undefined)).tokens,
        intended,
      };
    }
    case "channel_misspelled": {
      const candidates = texts.filter((i) => parts[i]!.msg.channel === "final" || parts[i]!.msg.channel === "analysis");
      if (candidates.length === 0) return null;
      const i = pick(r, candidates);
      const spelt =
        parts[i]!.msg.channel === "final"
          ? pick(r, ["final>", "FINAL", "final_answer", "Final"])
          : pick(r, ["analysis>", "ANALYSIS", "Analysis"]);
      return { tokens: render(parts, enc, (k) => (k === i ? `${prefixOf(i)}<|channel|>${spelt}<|message|>` : undefined)).tokens, intended };
    }
    case "repetition_loop": {
      const i = parts.findIndex((p) => p.msg.channel === "analysis" && !p.msg.recipient);
      if (i < 0) return null;
      const line = pick(r, REPEATED_LINES);
      const base = `${parts[i]!.msg.content}\n`;
      const times = 17 + Math.floor(r() * 8);
      const copy = intended.slice();
      copy[i] = { ...copy[i]!, content: base + line.repeat(16) };
      return { tokens: render(withContent(i, base + line.repeat(times)), enc).tokens, intended: reorder(copy) };
    }
    default:
      return null;
  }
}

/** Re-create objects in the reference key order after a spread. */
function reorder(ms: ReferenceMessage[]): ReferenceMessage[] {
  return ms.map((m) => {
    const o = { role: m.role } as ReferenceMessage;
    if (m.name !== undefined) o.name = m.name;
    if (m.recipient !== undefined) o.recipient = m.recipient;
    o.content = m.content;
    if (m.channel !== undefined) o.channel = m.channel;
    if (m.content_type !== undefined) o.content_type = m.content_type;
    return o;
  });
}

export interface GenerateOptions {
  seed: number;
  faultRate: number;
  faults: readonly FaultKind[];
  /** The function tools a request declares: calls go only to them (see compose). */
  tools?: readonly ToolSpec[];
}

/** The stream at `index`: a completion, maybe with one fault. */
export function generateStream(index: number, opts: GenerateOptions, enc: Encoder, vocab: Vocabulary): GeneratedStream {
  const r = rng(streamSeed(opts.seed, index));
  const { shape, parts } = compose(r, enc, opts.tools);
  if (opts.faults.length > 0 && r() < opts.faultRate) {
    // draw kinds until one fits this completion (each draw uniform, so no kind is favoured)
    for (let k = 0; k < 4 * opts.faults.length; k++) {
      const kind = pick(r, opts.faults);
      const out = inject(kind, r, parts, enc, vocab);
      if (out) {
        const g: GeneratedStream = { index, shape, fault: kind, tokens: out.tokens, intended: out.intended };
        if (out.partial) g.lastPartial = true;
        if (out.end !== undefined) g.end = out.end;
        return g;
      }
    }
  }
  return { index, shape, fault: null, tokens: render(parts, enc).tokens, intended: parts.map((p) => p.msg) };
}
