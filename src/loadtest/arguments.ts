/**
 * Tool arguments the generator writes for declared tools: a small shape of
 * a tool's parameters (what a JSON Schema or Harmony's TypeScript-like
 * `namespace functions { … }` text says about them), and JSON values that
 * satisfy it, drawn from the stream's random source.
 *
 * Shapes are bounded: {@link MAX_SHAPE_DEPTH} levels, {@link MAX_SHAPE_PROPS}
 * properties per object, {@link MAX_SHAPE_CHOICES} enum values or union
 * members; what lies past a bound is `any` (a string is written for it).
 * Constraints neither form carries to the model (`minimum`, `pattern`,
 * `format`, lengths) are not known here: numbers are small positive
 * integers and strings are short text, which meets the common ones.
 */

export const MAX_SHAPE_DEPTH = 8;
export const MAX_SHAPE_PROPS = 64;
export const MAX_SHAPE_CHOICES = 64;

export type Literal = string | number | boolean | null;

export type ArgShape =
  | { kind: "string" }
  | { kind: "number" }
  | { kind: "boolean" }
  | { kind: "null" }
  | { kind: "any" }
  | { kind: "enum"; values: Literal[] }
  | { kind: "array"; items: ArgShape }
  | { kind: "union"; of: ArgShape[] }
  | { kind: "object"; props: { name: string; optional: boolean; shape: ArgShape }[] };

/** A declared function tool: its name and what its arguments look like (null: it takes none). */
export interface ToolSpec {
  name: string;
  params: ArgShape | null;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The shape of a JSON Schema (the subset OpenAI tool definitions use:
 * `type` (one or a list), `properties`, `required`, `items`, `enum`,
 * `const`, `oneOf` / `anyOf`, `nullable`). Walks with an explicit stack;
 * never throws.
 */
export function shapeOfSchema(schema: unknown): ArgShape {
  type Job = { schema: unknown; depth: number; set: (s: ArgShape) => void };
  let root: ArgShape = { kind: "any" };
  const stack: Job[] = [{ schema, depth: 0, set: (s) => (root = s) }];
  while (stack.length > 0) {
    const { schema: s, depth, set } = stack.pop()!;
    if (!isObj(s) || depth >= MAX_SHAPE_DEPTH) {
      set({ kind: "any" });
      continue;
    }
    const nullable = s.nullable === true;
    const done = (x: ArgShape) => set(nullable ? { kind: "union", of: [x, { kind: "null" }] } : x);
    if ("const" in s && isLiteral(s.const)) {
      done({ kind: "enum", values: [s.const] });
      continue;
    }
    if (Array.isArray(s.enum)) {
      const values = s.enum.filter(isLiteral).slice(0, MAX_SHAPE_CHOICES);
      done(values.length > 0 ? { kind: "enum", values } : { kind: "any" });
      continue;
    }
    const alts = Array.isArray(s.oneOf) ? s.oneOf : Array.isArray(s.anyOf) ? s.anyOf : null;
    if (alts) {
      const of: ArgShape[] = alts.slice(0, MAX_SHAPE_CHOICES).map(() => ({ kind: "any" }));
      done({ kind: "union", of });
      // a union's members stand at its level (as the TypeScript form reads back: src/simulate/prompt.ts)
      alts.slice(0, MAX_SHAPE_CHOICES).forEach((a, i) => stack.push({ schema: a, depth, set: (x) => (of[i] = x) }));
      continue;
    }
    const types = Array.isArray(s.type)
      ? s.type.filter((t): t is string => typeof t === "string")
      : typeof s.type === "string"
        ? [s.type]
        : [];
    if (types.length > 1) {
      const of: ArgShape[] = types.slice(0, MAX_SHAPE_CHOICES).map(() => ({ kind: "any" }));
      done({ kind: "union", of });
      types.slice(0, MAX_SHAPE_CHOICES).forEach((t, i) => stack.push({ schema: { ...s, type: t }, depth, set: (x) => (of[i] = x) }));
      continue;
    }
    switch (types[0]) {
      case "string":
        done({ kind: "string" });
        break;
      case "number":
      case "integer":
        done({ kind: "number" });
        break;
      case "boolean":
        done({ kind: "boolean" });
        break;
      case "null":
        done({ kind: "null" });
        break;
      case "array": {
        const node: { kind: "array"; items: ArgShape } = { kind: "array", items: { kind: "any" } };
        done(node);
        if (s.items !== undefined) stack.push({ schema: s.items, depth: depth + 1, set: (x) => (node.items = x) });
        break;
      }
      case "object": {
        const required = new Set(Array.isArray(s.required) ? s.required.filter((x): x is string => typeof x === "string") : []);
        const props: { name: string; optional: boolean; shape: ArgShape }[] = [];
        const node: ArgShape = { kind: "object", props };
        done(node);
        if (isObj(s.properties)) {
          for (const [name, sub] of Object.entries(s.properties).slice(0, MAX_SHAPE_PROPS)) {
            const p = { name, optional: !required.has(name), shape: { kind: "any" } as ArgShape };
            props.push(p);
            stack.push({ schema: sub, depth: depth + 1, set: (x) => (p.shape = x) });
          }
        }
        break;
      }
      default:
        done({ kind: "any" });
    }
  }
  return root;
}

function isLiteral(v: unknown): v is Literal {
  return v === null || typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));
}

// ------------------------------------------------------------------ values

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** Text for a string property, by what its name suggests (the generator's pools: scripts, emoji, escapes). */
const STRINGS: [RegExp, string[]][] = [
  [/location|city|place|origin|destination|^from$|^to$|address/i, ["San Francisco, CA", "Kraków", "東京", "서울", "São Paulo", "Zürich"]],
  [/time.?zone|^tz$/i, ["America/Toronto", "Asia/Tokyo", "Europe/Paris"]],
  [/time|date|when|deadline/i, ["2025-07-01T09:00:00Z", "2025-12-24", "tomorrow 8am"]],
  [/e.?mail|recipient/i, ["jose.alvarez@example.es", "ops@example.com"]],
  [/sql|query|search|q$/i, ["SELECT count(*) FROM users WHERE created_at > '2025-01-01'", "gpt-oss harmony format", "naïve café near me"]],
  [/ticker|symbol/i, ["NVDA", "AAPL", "7203.T"]],
  [/subject|title|name/i, ["Reunión 📅", "Quarterly report", "「よろしく」"]],
  [
    /body|text|message|content|note|description/i,
    ["Hola,\nNos vemos el lunes.", 'She said "yes" — twice.', "Water the plants 🪴", "C:\\Users\\me\\notes.txt"],
  ],
  [/path|file/i, ["config/settings.yaml", "src/index.ts"]],
  [/url|link/i, ["https://example.com/a?b=1&c=2"]],
];
const ANY_STRINGS = ["celsius", "Привет", "ok", "👨‍👩‍👧‍👦", 'a "quoted" word', "line one\nline two"];

function stringFor(r: () => number, name: string): string {
  for (const [re, pool] of STRINGS) if (re.test(name)) return pick(r, pool);
  return pick(r, ANY_STRINGS);
}

type Json = Literal | Json[] | { [k: string]: Json };

/** A value of `shape` (a property named `name`); shapes are bounded, so the walk is too. */
export function valueFor(r: () => number, shape: ArgShape, name = "", depth = 0): Json {
  if (depth > MAX_SHAPE_DEPTH) return stringFor(r, name);
  switch (shape.kind) {
    case "string":
    case "any":
      return stringFor(r, name);
    case "number":
      return 1 + Math.floor(r() * 9);
    case "boolean":
      return r() < 0.5;
    case "null":
      return null;
    case "enum":
      return pick(r, shape.values);
    case "union": {
      // prefer a member that is not null: a null argument says little
      const some = shape.of.filter((s) => s.kind !== "null");
      return valueFor(r, pick(r, some.length > 0 ? some : shape.of), name, depth);
    }
    case "array": {
      const n = 1 + Math.floor(r() * 2);
      const out: Json[] = [];
      for (let i = 0; i < n; i++) out.push(valueFor(r, shape.items, name, depth + 1));
      return out;
    }
    case "object": {
      const out: { [k: string]: Json } = {};
      for (const p of shape.props) if (!p.optional || r() < 0.5) out[p.name] = valueFor(r, p.shape, p.name, depth + 1);
      return out;
    }
  }
}

/** JSON with a space after `:` and `,`, as models often write it. */
function spaced(v: Json, depth = 0): string {
  if (v === null || typeof v !== "object" || depth > MAX_SHAPE_DEPTH + 1) return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => spaced(x, depth + 1)).join(", ")}]`;
  return `{${Object.entries(v)
    .map(([k, x]) => `${JSON.stringify(k)}: ${spaced(x, depth + 1)}`)
    .join(", ")}}`;
}

/** Arguments for a call to `tool`, as JSON text in one of the forms models write (compact, spaced, indented). */
export function argumentsFor(r: () => number, tool: ToolSpec): string {
  // tools take an object: a shape that is not one (or none) gets `{}`
  const v = tool.params?.kind === "object" ? valueFor(r, tool.params) : {};
  const form = r();
  return form < 0.5 ? JSON.stringify(v) : form < 0.85 ? spaced(v) : JSON.stringify(v, null, 2);
}
