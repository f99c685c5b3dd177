/**
 * Only a tool is called (docs/resilience.md, rule 11): which recipients of an
 * assistant message name a tool, in resilient mode.
 *
 * A tool call needs a recipient that names a tool: `functions.NAME`, a
 * built-in (`browser.*`, `python`, `container.*`), or a bare name that is a
 * declared tool or reads as a function name. Role, channel and content-type
 * words are never tool names: `<|channel|>final json` is the final channel
 * with content type `json`, and `to=assistant` names no recipient. When the
 * stream declares its tools, recipients are matched to them whole (names may
 * hold spaces: `functions.Web Search` is the declared `Web Search`; a bare
 * `read_file` is `functions.read_file`), and a call to an undeclared tool is
 * kept but reported (`unknown_tool`).
 */
import type { ParsedHeader } from "./header.js";
import type { HarmonyPreset } from "./preset.js";

/** The most tools a stream may declare (`Open.tools`, `/v1/parse`'s `tools`), and the longest name: past either, `bad_option`. */
export const MAX_TOOLS = 256;
export const MAX_TOOL_NAME = 256;

/** The namespace of function tools. */
export const FUNCTIONS = "functions";

/** Built-in tools: a recipient that is one of these, or starts with one and a dot. */
const BUILTINS = ["browser", "python", "container"];

/** Words of a content type (the reference reads them as a recipient when no `to=` came first). */
const CONTENT_TYPE_WORDS = new Set(["json", "code", "text", "markdown"]);

/** A name that reads as a function's: an identifier. */
const FUNCTION_NAME = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** The tools a stream declares (their function names, whole). */
export class DeclaredTools {
  private readonly names: ReadonlySet<string>;
  /** Declared names that hold white space, longest first (matched in header text). */
  readonly spaced: readonly string[];

  constructor(names: Iterable<string>) {
    const set = new Set<string>();
    for (const n of names) if (n !== "") set.add(n);
    this.names = set;
    this.spaced = [...set].filter((n) => /\s/.test(n)).sort((a, b) => b.length - a.length);
  }

  get size(): number {
    return this.names.size;
  }

  has(name: string): boolean {
    return this.names.has(name);
  }

  /**
   * Header text with the spaces of declared names that follow `functions.`
   * or `to=` replaced by {@link SPACE_STAND_IN}, so that the header grammar
   * reads such a name as one word; {@link restoreSpaces} undoes it.
   */
  protect(text: string): string {
    let out = text;
    for (const name of this.spaced) {
      const joined = name.replace(/\s/g, SPACE_STAND_IN);
      for (const lead of [`${FUNCTIONS}.`, "to="]) out = out.split(lead + name).join(lead + joined);
    }
    return out;
  }
}

/** Stands for a space inside a declared tool name while a header is read (a private-use character). */
export const SPACE_STAND_IN = "\uE000";

/** A value read from protected header text, with its spaces back. */
export function restoreSpaces(s: string | null): string | null {
  return s === null || !s.includes(SPACE_STAND_IN) ? s : s.split(SPACE_STAND_IN).join(" ");
}

/** What rule 11 makes of a header's recipient. */
export interface RecipientVerdict {
  /** The header to use (the given one when nothing changed). */
  header: ParsedHeader;
  /** Why the recipient was dropped or changed, for a `header_repaired` recovery; null: unchanged. */
  repaired: string | null;
  /** The call names a tool the stream did not declare. */
  unknown: boolean;
}

function isBuiltin(recipient: string): boolean {
  for (const b of BUILTINS) if (recipient === b || recipient.startsWith(`${b}.`)) return true;
  return false;
}

/** The recipient of an assistant message, judged (a declared name's spaces already restored). */
export function judgeRecipient(h: ParsedHeader, tools: DeclaredTools | null, preset: HarmonyPreset): RecipientVerdict {
  const r = h.recipient;
  if (r === null || h.role !== preset.implicitRole) return { header: h, repaired: null, unknown: false };
  const channels = preset.channels;
  const word = r.startsWith(preset.markers.constrain) ? "" : r.toLowerCase();
  // role, channel and content-type words are never tool names, nor is the bare namespace
  // (`to=functions` with the tool's name inside the arguments), unless a tool of that name is declared
  if (r === FUNCTIONS && !(tools !== null && tools.has(r)))
    return { header: { ...h, recipient: null }, repaired: `${JSON.stringify(r)} is a namespace, not a tool`, unknown: false };
  if (
    r.includes("<|") ||
    preset.roles.includes(r) ||
    r === channels.reasoning ||
    r === channels.commentary ||
    r === channels.final ||
    CONTENT_TYPE_WORDS.has(word) ||
    r.startsWith(preset.markers.constrain)
  ) {
    const isType = CONTENT_TYPE_WORDS.has(word) || r.startsWith(preset.markers.constrain);
    const header: ParsedHeader = { ...h, recipient: null };
    if (isType && header.contentType === null) header.contentType = r;
    return { header, repaired: `${JSON.stringify(r)} names no tool${isType ? "; read as the content type" : ""}`, unknown: false };
  }
  const prefix = `${FUNCTIONS}.`;
  const bare = r.startsWith(prefix) ? r.slice(prefix.length) : r;
  if (tools !== null && tools.size > 0) {
    if (tools.has(bare)) {
      if (r === bare)
        return {
          header: { ...h, recipient: prefix + bare },
          repaired: `bare ${JSON.stringify(r)} is the declared function ${prefix}${bare}`,
          unknown: false,
        };
      return { header: h, repaired: null, unknown: false };
    }
    return { header: h, repaired: null, unknown: !isBuiltin(r) };
  }
  if (r.startsWith(prefix) || isBuiltin(r) || r.includes(".") || FUNCTION_NAME.test(r))
    return { header: h, repaired: null, unknown: false };
  return { header: { ...h, recipient: null }, repaired: `${JSON.stringify(r)} does not read as a tool name`, unknown: false };
}
