/**
 * What the simulator reads from a prompt: its text (decoded from ids with
 * the vocabulary), the function tools its developer message declares (the
 * `namespace functions { … }` block Harmony renders from a request's tools,
 * src/core/schema-ts.ts), and the load tester's request key in the last
 * user message.
 *
 * Prompts are untrusted: the scans are linear, the type reader keeps an
 * explicit stack (no recursion), every count is bounded, and nothing throws.
 */
import { decodeLossy } from "../core/utf8.js";
import type { Vocabulary } from "../core/vocab.js";
import { MAX_SHAPE_CHOICES, MAX_SHAPE_DEPTH, MAX_SHAPE_PROPS, type ArgShape, type Literal, type ToolSpec } from "../loadtest/arguments.js";

/** Tools read from one prompt at most. */
export const MAX_PROMPT_TOOLS = 128;
/** Characters of a tools block read at most (a longer block is read up to here). */
export const MAX_TOOLS_TEXT = 1 << 20;

/** Text of token ids (special tokens by name; an id outside the vocabulary as U+FFFD). */
export function decodeIds(vocab: Vocabulary, ids: readonly number[]): string {
  let n = 0;
  for (const id of ids) if (vocab.isToken(id)) n += vocab.byteEnd(id) - vocab.byteStart(id);
  const buf = new Uint8Array(n);
  let o = 0;
  let out = "";
  for (const id of ids) {
    if (!vocab.isToken(id)) {
      out += decodeLossy(buf, 0, o, vocab.scratch) + "\uFFFD";
      o = 0;
      continue;
    }
    buf.set(vocab.bytes.subarray(vocab.byteStart(id), vocab.byteEnd(id)), o);
    o += vocab.byteEnd(id) - vocab.byteStart(id);
  }
  return out + decodeLossy(buf, 0, o, vocab.scratch);
}

/** The body of the last message of `role` in a rendered prompt, or null. */
export function lastMessage(prompt: string, role: string): string | null {
  const open = `<|start|>${role}<|message|>`;
  const at = prompt.lastIndexOf(open);
  if (at < 0) return null;
  const from = at + open.length;
  const end = prompt.indexOf("<|end|>", from);
  return prompt.slice(from, end < 0 ? prompt.length : end);
}

/**
 * The load tester's key for a request: `harmony-loadtest run=RUN request=N`
 * in its user message (`RUN/N`), or null.
 */
export const KEY_PATTERN = /harmony-loadtest run=([A-Za-z0-9_-]{1,64}) request=(\d{1,12})/;

export function requestKey(userText: string | null): string | null {
  if (userText === null) return null;
  const m = KEY_PATTERN.exec(userText);
  return m ? `${m[1]}/${m[2]}` : null;
}

/**
 * The function tools of a prompt's developer message, or undefined when it
 * declares none (then the generation answers without calling).
 */
export function declaredTools(prompt: string): ToolSpec[] | undefined {
  const dev = lastMessage(prompt, "developer");
  if (dev === null) return undefined;
  const open = dev.indexOf("namespace functions {");
  if (open < 0) return undefined;
  const closeAt = dev.indexOf("} // namespace functions", open);
  const block = dev.slice(open + "namespace functions {".length, closeAt < 0 ? dev.length : closeAt).slice(0, MAX_TOOLS_TEXT);
  const tools: ToolSpec[] = [];
  const decl = /^type ([^\s=][^=\n]*?) = \(/gm;
  let m: RegExpExecArray | null;
  while ((m = decl.exec(block)) !== null && tools.length < MAX_PROMPT_TOOLS) {
    const name = m[1]!;
    const at = decl.lastIndex;
    if (block.startsWith(") => any;", at)) {
      tools.push({ name, params: null });
      continue;
    }
    if (!block.startsWith("_: ", at)) continue;
    const read = readType(block, at + 3);
    tools.push({ name, params: read && block.startsWith(") => any;", skipSpace(block, read.end)) ? read.shape : null });
    if (read) decl.lastIndex = read.end;
  }
  return tools.length > 0 ? tools : undefined;
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && /\s/.test(s[i]!)) i++;
  return i;
}

/** Past spaces and `// …` comment lines. */
function skipGap(s: string, i: number): number {
  for (;;) {
    i = skipSpace(s, i);
    if (s.startsWith("//", i)) {
      const nl = s.indexOf("\n", i);
      i = nl < 0 ? s.length : nl + 1;
    } else return i;
  }
}

type Prop = { name: string; optional: boolean; shape: ArgShape };
type Frame =
  | { t: "union"; of: ArgShape[]; wantMember: boolean; done: (s: ArgShape) => void }
  | { t: "object"; props: Prop[]; typed: boolean; done: (s: ArgShape) => void };

/** A union's members as one shape: one member as itself, string literals merged into one enum. */
function unionShape(of: ArgShape[]): ArgShape {
  if (of.length === 1) return of[0]!;
  if (of.length > 0 && of.every((s) => s.kind === "enum")) {
    return { kind: "enum", values: of.flatMap((s) => (s.kind === "enum" ? s.values : [])).slice(0, MAX_SHAPE_CHOICES) };
  }
  return { kind: "union", of: of.slice(0, MAX_SHAPE_CHOICES) };
}

/** Past the `{ … }` at `i` (strings and comments aside), for an object nested deeper than the shapes go. */
function skipBraces(s: string, i: number): number {
  let depth = 0;
  for (; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') {
      const q = s.indexOf('"', i + 1);
      i = q < 0 ? s.length : q;
    } else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i + 1;
  }
  return s.length;
}

/**
 * Read one TypeScript-like type (schema-ts's output) at `from`: a union of
 * string literals, `string`, `number`, `boolean`, `null`, `any`,
 * `Array<any>`, objects of `name?: type,` lines, each with `[]` suffixes.
 * Null when the text is not such a type.
 */
export function readType(s: string, from: number): { shape: ArgShape; end: number } | null {
  let result: ArgShape | null = null;
  const stack: Frame[] = [{ t: "union", of: [], wantMember: true, done: (x) => (result = x) }];
  let i = from;
  let leadingBar = true;
  /** A member ends: its `[]` suffixes, then it joins the union on top. */
  const member = (shape: ArgShape) => {
    while (s.startsWith("[]", i)) {
      shape = { kind: "array", items: shape };
      i += 2;
    }
    const top = stack[stack.length - 1];
    if (top?.t !== "union") return false;
    if (top.of.length < MAX_SHAPE_CHOICES) top.of.push(shape);
    top.wantMember = false;
    return true;
  };
  for (let guard = 0; stack.length > 0; guard++) {
    if (guard > 4 * (s.length - from) + 16) return null;
    const top = stack[stack.length - 1]!;
    if (top.t === "union") {
      i = skipGap(s, i);
      if (top.wantMember) {
        if (s[i] === "|" && top.of.length === 0 && leadingBar) {
          i++; // a oneOf's variants each start with " | "
          leadingBar = false;
          continue;
        }
        leadingBar = false;
        if (s[i] === "{") {
          if (stack.length >= 2 * MAX_SHAPE_DEPTH) {
            i = skipBraces(s, i);
            if (!member({ kind: "any" })) return null;
            continue;
          }
          i++;
          const props: Prop[] = [];
          stack.push({ t: "object", props, typed: false, done: (x) => member(x) });
          continue;
        }
        if (s[i] === '"') {
          const q = s.indexOf('"', i + 1);
          if (q < 0) return null;
          const lit: Literal = s.slice(i + 1, q);
          i = q + 1;
          if (!member({ kind: "enum", values: [lit] })) return null;
          continue;
        }
        const word = /^(?:Array<any>|[A-Za-z_$][\w$]*)/.exec(s.slice(i, i + 64));
        if (!word) return null;
        i += word[0].length;
        const w = word[0];
        const shape: ArgShape =
          w === "string" || w === "number" || w === "boolean" || w === "null"
            ? { kind: w }
            : w === "Array<any>"
              ? { kind: "array", items: { kind: "any" } }
              : { kind: "any" };
        if (!member(shape)) return null;
        continue;
      }
      // after a member (and a variant's trailing comment): another one, or the union ends
      const j = skipGap(s, i);
      if (s[j] === "|") {
        i = j + 1;
        top.wantMember = true;
        continue;
      }
      stack.pop();
      top.done(unionShape(top.of));
      continue;
    }
    // an object: properties until its closing brace
    i = skipGap(s, i);
    if (top.typed) {
      top.typed = false;
      if (s[i] === ",") i++;
      continue;
    }
    if (s[i] === "}") {
      i++;
      stack.pop();
      top.done({ kind: "object", props: top.props });
      continue;
    }
    // `name?: ` up to the colon on this line (names may hold any character but a newline)
    const nl = s.indexOf("\n", i);
    const lineEnd = nl < 0 ? s.length : nl;
    const colon = s.indexOf(":", i);
    if (colon < 0 || colon > lineEnd || colon === i) return null;
    let name = s.slice(i, colon);
    const optional = name.endsWith("?");
    if (optional) name = name.slice(0, -1);
    i = colon + 1;
    const prop: Prop = { name, optional, shape: { kind: "any" } };
    if (top.props.length < MAX_SHAPE_PROPS) top.props.push(prop);
    top.typed = true;
    leadingBar = true;
    stack.push({ t: "union", of: [], wantMember: true, done: (x) => (prop.shape = x) });
  }
  return result === null ? null : { shape: bounded(result), end: i };
}

/**
 * A copy of `shape` with every part at MAX_SHAPE_DEPTH or deeper as `any`,
 * counted as shapeOfSchema counts (one level per object property or array
 * items; a union's members stand at its level), so both forms of a tool's
 * parameters agree.
 */
function bounded(shape: ArgShape): ArgShape {
  let root: ArgShape = { kind: "any" };
  const stack: { s: ArgShape; depth: number; set: (x: ArgShape) => void }[] = [{ s: shape, depth: 0, set: (x) => (root = x) }];
  while (stack.length > 0) {
    const { s, depth, set } = stack.pop()!;
    if (depth >= MAX_SHAPE_DEPTH) {
      set({ kind: "any" });
      continue;
    }
    switch (s.kind) {
      case "array": {
        const node: ArgShape = { kind: "array", items: { kind: "any" } };
        set(node);
        stack.push({ s: s.items, depth: depth + 1, set: (x) => (node.items = x) });
        break;
      }
      case "union": {
        const of: ArgShape[] = s.of.map(() => ({ kind: "any" }));
        set({ kind: "union", of });
        s.of.forEach((m, k) => stack.push({ s: m, depth, set: (x) => (of[k] = x) }));
        break;
      }
      case "object": {
        const props = s.props.map((p) => ({ ...p, shape: { kind: "any" } as ArgShape }));
        set({ kind: "object", props });
        s.props.forEach((p, k) => stack.push({ s: p.shape, depth: depth + 1, set: (x) => (props[k]!.shape = x) }));
        break;
      }
      default:
        set(s);
    }
  }
  return root;
}
