/**
 * Header text parsing. Two grammars over the decoded header text:
 *
 * - `parseHeaderReference` reproduces openai-harmony v0.0.8 exactly (used by
 *   strict mode, and by resilient mode whenever it gives a sane answer, so
 *   well-formed input parses identically in both modes);
 * - `parseHeaderTolerant` reads the same fields in any order, tolerates the
 *   faults gpt-oss makes (repeated or spaced markers, duplicated recipients,
 *   a stray header before the real one) and reports where free text begins,
 *   which is how resilient mode spots a missing `<|message|>`.
 */
import { HARMONY, type HarmonyPreset } from "./preset.js";

export interface ParsedHeader {
  role: string;
  name: string | null;
  recipient: string | null;
  channel: string | null;
  contentType: string | null;
}

export type ReferenceResult =
  { ok: true; header: ParsedHeader; remaining: string | null } | { ok: false; code: HeaderErrorCode; message: string };

export type HeaderErrorCode = "empty_channel" | "missing_role" | "unknown_role" | "header_trailing_tokens";

/** Rust's `char::is_whitespace` (Unicode White_Space). */
export function isRustWhitespace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0x85) return false;
  return (
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/** Rust's `u8::is_ascii_whitespace` (no vertical tab). */
function isAsciiWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d;
}

/** Rust's `str::trim`. */
export function rustTrim(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isRustWhitespace(s.charCodeAt(a))) a++;
  while (b > a && isRustWhitespace(s.charCodeAt(b - 1))) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/** Rust's `str::split_ascii_whitespace`. */
function splitAsciiWhitespace(s: string): string[] {
  const parts: string[] = [];
  let start = -1;
  for (let i = 0; i < s.length; i++) {
    if (isAsciiWhitespace(s.charCodeAt(i))) {
      if (start >= 0) parts.push(s.slice(start, i));
      start = -1;
    } else if (start < 0) start = i;
  }
  if (start >= 0) parts.push(s.slice(start));
  return parts;
}

const NEEDS_UNICODE_ESCAPE = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\p{Mn}\p{Me}]/u;

/** Rust's `{:?}` formatting of a `str` (quoted, escaped). */
export function rustDebugString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\\") out += "\\\\";
    else if (ch === '"') out += '\\"';
    else if (cp === 0) out += "\\0";
    else if ((cp >= 0x80 && /\p{Zs}/u.test(ch)) || NEEDS_UNICODE_ESCAPE.test(ch)) out += `\\u{${cp.toString(16)}}`;
    else out += ch;
  }
  return out + '"';
}

/** The channel value after a channel marker: up to whitespace or `<`. */
function channelValueEnd(s: string, from: number): number {
  let e = from;
  while (e < s.length) {
    const c = s.charCodeAt(e);
    if (c === 0x3c || isRustWhitespace(c)) break;
    e++;
  }
  return e;
}

/**
 * openai-harmony v0.0.8 `parse_header_from_string`. With `role` null the
 * first word names the author. `parseRecipientAndType` false is the
 * non-strict salvage path, where everything after the channel is content.
 */
export function parseHeaderReference(
  text: string,
  role: string | null,
  preset: HarmonyPreset,
  parseRecipientAndType: boolean,
): ReferenceResult {
  const { channel: channelMarker, constrain, recipient: toPrefix } = preset.markers;
  let h = text;
  let channel: string | null = null;
  const idx = h.indexOf(channelMarker);
  if (idx >= 0) {
    const from = idx + channelMarker.length;
    const end = channelValueEnd(h, from);
    if (end === from) {
      return { ok: false, code: "empty_channel", message: "channel marker present but no channel value found in header" };
    }
    channel = h.slice(from, end);
    h = h.slice(0, idx) + h.slice(end);
  }
  h = rustTrim(h);
  if (h.includes(constrain)) h = rustTrim(h.split(constrain).join(" " + constrain));
  const parts = splitAsciiWhitespace(h);

  let roleStr: string | null = null;
  let resolved: string;
  if (role === null) {
    const first = parts[0];
    if (first === undefined) {
      return { ok: false, code: "missing_role", message: "message header did not contain a role" };
    }
    roleStr = first;
    if (preset.roles.includes(first)) resolved = first;
    else if (parts.length > 1 || first.startsWith(toPrefix)) {
      parts.shift();
      resolved = "tool";
    } else return { ok: false, code: "unknown_role", message: `Unknown role: ${first}` };
  } else resolved = role;
  if (parts.length > 0 && parts[0] === resolved) parts.shift();

  let recipient: string | null = null;
  let contentType: string | null = null;
  if (parseRecipientAndType && parts.length > 0) {
    const count = parts.length;
    const last = parts.pop()!;
    if (last.startsWith(toPrefix)) recipient = last.slice(toPrefix.length);
    // v0.0.8: a single word is the recipient, even `<|constrain|>json`
    else if (count === 1) recipient = last;
    else {
      contentType = last;
      const raw = parts.pop();
      if (raw !== undefined) recipient = raw.startsWith(toPrefix) ? raw.slice(toPrefix.length) : raw;
    }
  }
  const remaining = parts.length > 0 ? parts.join(" ") : null;
  const header: ParsedHeader = {
    role: resolved,
    name: resolved === "tool" ? roleStr : null,
    recipient,
    channel,
    contentType,
  };
  if (parseRecipientAndType && remaining !== null) {
    return {
      ok: false,
      code: "header_trailing_tokens",
      message: `unexpected tokens remaining in message header: Some(${rustDebugString(remaining)})`,
    };
  }
  return { ok: true, header, remaining };
}

export interface TolerantHeader extends ParsedHeader {
  /** Index in the text where free text (not header fields) begins. */
  restStart: number;
  /** Whitespace-separated words from restStart (counted up to 5). */
  restWords: number;
  /** What was out of shape, for the recovery event. */
  repairs: string[];
  /** With `atMessage`: words that are no header field, skipped. */
  junk: string[];
}

export interface TolerantOptions {
  /** The text ended with `<|message|>`: a lone trailing word is a header field. */
  atMessage: boolean;
  /** A recipient is being carried in: a lone trailing word is a content type. */
  carrying: boolean;
}

const IDENT = /^[A-Za-z0-9_][\w.\-/:+@]*$/;

/** The start of a completion whose prompt ended inside ` to`: `=functions.f`. */
const CUT_RECIPIENT = /^=[A-Za-z_][\w.-]*(?=[\s<{[]|$)/;

/** A recipient's name as far as a call's arguments glued to it (`to=functions.f{"a":1}`): a name, then `{` or `[`. */
const NAME_THEN_ARGUMENTS = /^[A-Za-z_][\w.\-/:@]*(?=[{[])/;

/**
 * Where a channel's value that runs on into text ends (`finalHello!`, a
 * `<|message|>` lost between them): after a channel's name followed by an
 * upper-case letter; -1 when it does not.
 */
function gluedChannelEnd(text: string, from: number, to: number, preset: HarmonyPreset): number {
  const { reasoning, commentary, final } = preset.channels;
  for (const known of [reasoning, commentary, final]) {
    const e = from + known.length;
    if (e < to && text.startsWith(known, from)) {
      const c = text.charCodeAt(e);
      if (c >= 0x41 && c <= 0x5a) return e;
    }
  }
  return -1;
}

/** The first `{` or `[` in text[from, to), or -1. */
function firstBrace(text: string, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) return i;
  }
  return -1;
}

function countWords(s: string, from: number, max: number): number {
  let n = 0;
  let inWord = false;
  for (let i = from; i < s.length && n < max; i++) {
    const ws = isRustWhitespace(s.charCodeAt(i));
    if (!ws && !inWord) n++;
    inWord = !ws;
  }
  return n;
}

/** Tolerant header reading; never fails. `role` null: the text names the author. */
export function parseHeaderTolerant(text: string, role: string | null, preset: HarmonyPreset, opts: TolerantOptions): TolerantHeader {
  const { channel: channelMarker, constrain, recipient: toPrefix } = preset.markers;
  const len = text.length;
  const repairs: string[] = [];
  const junk: string[] = [];
  const skipWs = (i: number): number => {
    while (i < len && isRustWhitespace(text.charCodeAt(i))) i++;
    return i;
  };
  const valueEnd = (i: number): number => channelValueEnd(text, i);
  /** A plain word ends at whitespace or at a marker. */
  const wordEnd = (i: number): number => {
    let e = i;
    while (e < len) {
      const c = text.charCodeAt(e);
      if (isRustWhitespace(c)) break;
      if (c === 0x3c && e > i && (text.startsWith(channelMarker, e) || text.startsWith(constrain, e))) break;
      e++;
    }
    return e;
  };

  let resolvedRole: string | null = role;
  let name: string | null = null;
  let recipient: string | null = null;
  let channel: string | null = null;
  let contentType: string | null = null;
  let fields = 0;
  let lastFieldEnd = 0;
  let p = 0;
  let restAt = -1;

  while (p < len) {
    p = skipWs(p);
    if (p >= len) break;
    if (text.startsWith(channelMarker, p)) {
      const q = p + channelMarker.length;
      const e = valueEnd(q);
      const glued = opts.atMessage ? -1 : gluedChannelEnd(text, q, e, preset);
      if (glued > 0) {
        // the channel's name, then the text the model meant after a <|message|>
        if (channel !== null) repairs.push("second_channel");
        channel = text.slice(q, glued);
        repairs.push("channel_glued_to_text");
        if (resolvedRole === null) {
          resolvedRole = preset.implicitRole;
          repairs.push("missing_role");
        }
        fields++;
        lastFieldEnd = p = glued;
        restAt = glued;
        break;
      }
      if (e > q) {
        if (channel !== null) {
          repairs.push("second_channel");
          if (recipient === preset.selfRecipient) recipient = null;
        }
        channel = text.slice(q, e);
      } else repairs.push("empty_channel");
      if (resolvedRole === null) {
        resolvedRole = preset.implicitRole;
        repairs.push("missing_role");
      }
      fields++;
      lastFieldEnd = p = e;
      continue;
    }
    if (text.startsWith(constrain, p)) {
      const q = p + constrain.length;
      const q2 = skipWs(q);
      if (q2 > q) repairs.push("constrain_spaced");
      let e = valueEnd(q2);
      // arguments glued to the type (`<|constrain|>json{"a":1}`) begin the content
      const brace = opts.atMessage ? -1 : firstBrace(text, q2, e);
      if (brace > q2) e = brace;
      if (e > q2) {
        if (contentType !== null) repairs.push("second_content_type");
        contentType = constrain + text.slice(q2, e);
      } else repairs.push("empty_constrain");
      fields++;
      lastFieldEnd = p = e;
      if (brace > q2) {
        repairs.push("arguments_glued_to_header");
        restAt = e;
        break;
      }
      continue;
    }
    // a prompt that ended inside ` to` leaves the completion to begin `=functions.f`
    const cutTo = p === 0 && role !== null && CUT_RECIPIENT.test(text) ? 1 : 0;
    if (cutTo === 1 || text.startsWith(toPrefix, p)) {
      const q = p + (cutTo === 1 ? 1 : toPrefix.length);
      let e = valueEnd(q);
      // arguments glued to the recipient (`to=functions.f{"a":1}`) begin the content
      const named = opts.atMessage ? null : NAME_THEN_ARGUMENTS.exec(text.slice(q, e));
      if (named !== null) e = q + named[0].length;
      const value = text.slice(q, e);
      if (cutTo === 1) repairs.push("recipient_cut_by_the_prompt");
      if (value === "") repairs.push("empty_recipient");
      else if (recipient === null) recipient = value;
      else repairs.push(value === recipient ? "duplicate_recipient" : "conflicting_recipient");
      if (resolvedRole === null) {
        resolvedRole = preset.implicitRole;
        repairs.push("missing_role");
      }
      fields++;
      lastFieldEnd = p = e;
      if (named !== null) {
        repairs.push("arguments_glued_to_header");
        restAt = e;
        break;
      }
      continue;
    }
    const e = wordEnd(p);
    const word = text.slice(p, e);
    if (resolvedRole === null) {
      if (preset.roles.includes(word)) {
        resolvedRole = word;
        name = word === "tool" ? word : null;
      } else {
        const next = skipWs(e);
        const looksLikeTool =
          IDENT.test(word) && (word.includes(".") || text.startsWith(toPrefix, next) || text.startsWith(channelMarker, next));
        if (!looksLikeTool) {
          resolvedRole = preset.implicitRole;
          repairs.push("missing_role");
          if (opts.atMessage) {
            junk.push(word);
            p = e;
            continue;
          }
          restAt = p;
          break;
        }
        resolvedRole = "tool";
        name = word;
      }
      fields++;
      lastFieldEnd = p = e;
      continue;
    }
    if (word === resolvedRole && fields === 0) {
      // a primed header that repeats its role word
      fields++;
      lastFieldEnd = p = e;
      continue;
    }
    const isLast = skipWs(e) >= len;
    if (isLast && IDENT.test(word) && word.length <= 64 && fields > 0) {
      if (recipient !== null || (opts.atMessage && opts.carrying)) {
        if (contentType === null) {
          contentType = word;
          fields++;
          lastFieldEnd = p = e;
          continue;
        }
      } else if (opts.atMessage) {
        recipient = word;
        fields++;
        lastFieldEnd = p = e;
        continue;
      }
    }
    if (opts.atMessage) {
      // the whole text is header: skip the stray word, keep reading fields
      junk.push(word);
      p = e;
      continue;
    }
    restAt = p;
    break;
  }
  if (resolvedRole === null) resolvedRole = preset.implicitRole;
  let restStart = len;
  if (restAt >= 0) {
    // content starts after the single separator that follows the last field
    restStart = lastFieldEnd;
    if (fields > 0 && restStart < len && isRustWhitespace(text.charCodeAt(restStart))) restStart++;
  }
  return {
    role: resolvedRole,
    name: resolvedRole === "tool" ? name : null,
    recipient,
    channel,
    contentType,
    restStart,
    restWords: restAt >= 0 ? countWords(text, restStart, 5) : 0,
    repairs,
    junk,
  };
}

/**
 * Header readings remembered for the many parsers of one thread. A model
 * writes the same few headers over and over (`<|channel|>analysis`, the
 * same tool calls), and reading one builds strings, arrays and objects
 * that live as long as its message. Both readings memoised are pure
 * functions of the header text and the role it is read with, so a parser
 * given a memo emits exactly what it would without one; tests check that.
 *
 * Bounded: each table holds at most `maxEntries` texts of at most
 * `maxTextLength` UTF-16 units, and is cleared when full (the common
 * headers come back at once); at most MAX_MEMO_ROLES roles of at most
 * `maxTextLength` units have tables (a parser's role is its caller's
 * choice). Only for one preset: a parser whose preset differs does not
 * use it.
 */
export class HeaderMemo {
  /** role → header text → the reference's successful reading (immutable, shared). */
  private readonly readings = new Map<string | null, Map<string, Extract<ReferenceResult, { ok: true }>>>();
  /** [explicit, implicit] header → role → text seen to stay a header while it grows. */
  private readonly growing = [new Map<string | null, Set<string>>(), new Map<string | null, Set<string>>()] as const;

  constructor(
    readonly preset: HarmonyPreset,
    readonly maxEntries = 2048,
    readonly maxTextLength = 192,
  ) {}

  /** `parseHeaderReference(text, role, preset, true)`, remembered when it succeeds. */
  reference(text: string, role: string | null): ReferenceResult {
    let byText = this.readings.get(role);
    const known = byText?.get(text);
    if (known !== undefined) return known;
    const r = parseHeaderReference(text, role, this.preset, true);
    if (r.ok && text.length <= this.maxTextLength && (byText !== undefined || this.roomForRole(this.readings, role))) {
      if (byText === undefined) this.readings.set(role, (byText = new Map()));
      else if (byText.size >= this.maxEntries) byText.clear();
      // shared by every parser that reads this header: frozen, so a write would fail loudly
      Object.freeze(r.header);
      byText.set(text, Object.freeze(r));
    }
    return r;
  }

  /** Whether `text`, read with `role`, was found to still be a header (kind 0 explicit, 1 implicit). */
  staysHeader(kind: 0 | 1, text: string, role: string | null): boolean {
    return this.growing[kind].get(role)?.has(text) === true;
  }

  /** Remember that `text` stays a header. */
  noteStaysHeader(kind: 0 | 1, text: string, role: string | null): void {
    if (text.length > this.maxTextLength) return;
    const byRole = this.growing[kind];
    let texts = byRole.get(role);
    if (texts === undefined) {
      if (!this.roomForRole(byRole, role)) return;
      byRole.set(role, (texts = new Set()));
    } else if (texts.size >= this.maxEntries) texts.clear();
    texts.add(text);
  }

  /** Whether `role` may have a table of its own in `byRole` (emptied when MAX_MEMO_ROLES have one). */
  private roomForRole(byRole: Map<string | null, unknown>, role: string | null): boolean {
    if (role !== null && role.length > this.maxTextLength) return false;
    if (byRole.size >= MAX_MEMO_ROLES) byRole.clear();
    return true;
  }
}

/** Roles a HeaderMemo keeps tables for (a stream's role is `assistant`, none, or a caller's few others). */
export const MAX_MEMO_ROLES = 4;

let threadMemo: HeaderMemo | null = null;

/**
 * The HeaderMemo of this thread's parsers given none (`headers`
 * undefined): made at the first, for HARMONY only (null for another
 * preset). Module state, so one per thread: worker threads load their own.
 */
export function threadHeaderMemo(preset: HarmonyPreset): HeaderMemo | null {
  if (preset !== HARMONY) return null;
  return (threadMemo ??= new HeaderMemo(HARMONY));
}
