/**
 * JSON Schema (OpenAPI flavoured) → the TypeScript-like type text that
 * Harmony puts in a developer message's `namespace functions { … }` block.
 *
 * This reproduces openai-harmony's `json_schema_to_typescript` output byte for
 * byte, quirks included (they are what gpt-oss was trained on):
 * - nested objects open `{` on the property line and close with the nested
 *   indent (`    }`), property lines inside them carry that indent;
 * - a property's `title`, `description` and string `examples` become `//`
 *   comment lines above it, its `default` a trailing `// default: …` comment
 *   (a string default is quoted unless the schema has an `enum`);
 * - `oneOf` renders one ` | variant` line per variant with trailing comments;
 * - `nullable: true` appends ` | null`; `type: [..]` joins the types with ` | `;
 * - `integer` is `number`; an array without `items` is `Array<any>`; anything
 *   else (no `type`, `anyOf`, `allOf`, `$ref`, `null`, …) is `any`.
 *
 * Differences that cannot be avoided in JavaScript (documented, not bugs):
 * - property order is the object's own key order, which JavaScript (and
 *   `JSON.parse`) changes in one case: integer-like keys (`"1"`, `"42"`) come
 *   first, in ascending order;
 * - numbers in `default` print as JavaScript sees them: `1.0` in the source
 *   JSON prints as `1` (serde_json would print `1.0`), integers above 2^53
 *   lose precision.
 *
 * Pure: never throws, whatever the input (a nesting depth above
 * {@link MAX_SCHEMA_DEPTH}, or a cycle, renders as `any`).
 */
import { isObj } from "./json.js";

/** Deeper schemas render as `any` (the reference would recurse without bound). */
export const MAX_SCHEMA_DEPTH = 64;

const ABSENT: unique symbol = Symbol("absent");
type Got = unknown | typeof ABSENT;

/** serde_json's `Value::get(key)`: only objects have keys; a key holding `null` is present. */
function get(v: unknown, key: string): Got {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return ABSENT;
  if (!Object.prototype.hasOwnProperty.call(v, key)) return ABSENT;
  const x = (v as Record<string, unknown>)[key];
  return x === undefined ? ABSENT : x;
}

function str(v: Got): string | null {
  return typeof v === "string" ? v : null;
}

function isEnum(schema: unknown): boolean {
  const e = get(schema, "enum");
  return Array.isArray(e) && e.length > 0;
}

function nullable(schema: unknown): boolean {
  return get(schema, "nullable") === true;
}

/** A JSON number as serde_json prints it (as far as a JavaScript number can tell). */
function jsonNumber(n: number): string {
  if (!Number.isFinite(n)) return "null";
  if (Number.isInteger(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER) return String(n);
  return String(n).replace("e+", "e");
}

/** serde_json's compact `Display` of a value (`{"a":1}`, `[1,2]`, `"s"`, `null`). */
export function jsonCompact(v: unknown, depth = 0): string {
  if (depth > MAX_SCHEMA_DEPTH) return "null";
  if (v === null || v === undefined) return "null";
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") return jsonNumber(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return `[${v.map((x) => jsonCompact(x, depth + 1)).join(",")}]`;
  if (typeof v === "object") {
    const parts: string[] = [];
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x === undefined || typeof x === "function" || typeof x === "symbol") continue;
      parts.push(`${JSON.stringify(k)}:${jsonCompact(x, depth + 1)}`);
    }
    return `{${parts.join(",")}}`;
  }
  return "null";
}

/** `default: …` as a trailing comment of a `oneOf` variant (top-level oneOf form). */
function defaultCommentTop(variant: unknown, def: unknown): string {
  if (typeof def === "string" && !isEnum(variant)) return `default: "${def}"`;
  return `default: ${jsonCompact(def)}`;
}

/** `default: …` for a property (or a property-level oneOf variant): enum strings unquoted. */
function defaultCommentProp(schema: unknown, def: unknown): string {
  if (typeof def === "string") return isEnum(schema) ? `default: ${def}` : `default: "${def}"`;
  return `default: ${jsonCompact(def)}`;
}

function withNullable(variant: unknown, typeStr: string): string {
  return nullable(variant) && !typeStr.includes("null") ? `${typeStr} | null` : typeStr;
}

/**
 * The type text for `schema`, with `indent` before every comment and property
 * line it writes (the caller writes the text before the type itself).
 */
export function jsonSchemaToTypeScript(schema: unknown, indent = ""): string {
  return convert(schema, indent, 0);
}

function convert(schema: unknown, indent: string, depth: number): string {
  if (depth > MAX_SCHEMA_DEPTH) return "any";

  const oneOf = get(schema, "oneOf");
  if (Array.isArray(oneOf)) {
    let out = "";
    for (const variant of oneOf) {
      out += `\n${indent} | `;
      out += withNullable(variant, convert(variant, `${indent}   `, depth + 1));
      const trailing: string[] = [];
      const desc = str(get(variant, "description"));
      if (desc !== null) trailing.push(desc);
      const def = get(variant, "default");
      if (def !== ABSENT) trailing.push(defaultCommentTop(variant, def));
      if (trailing.length > 0) out += ` // ${trailing.join(" ")}`;
    }
    return out;
  }

  const type = get(schema, "type");
  if (Array.isArray(type)) {
    const names = type.filter((t): t is string => typeof t === "string").map((t) => (t === "integer" ? "number" : t));
    if (names.length > 0) return names.join(" | ");
  }

  if (typeof type === "string") {
    switch (type) {
      case "object":
        return convertObject(schema, indent, depth);
      case "string": {
        const e = get(schema, "enum");
        if (Array.isArray(e)) {
          const vals = e.filter((x): x is string => typeof x === "string").map((x) => `"${x}"`);
          if (vals.length > 0) return vals.join(" | ");
        }
        return "string";
      }
      case "number":
      case "integer":
        return "number";
      case "boolean":
        return "boolean";
      case "array": {
        const items = get(schema, "items");
        return items === ABSENT ? "Array<any>" : `${convert(items, indent, depth + 1)}[]`;
      }
      default:
        return "any";
    }
  }
  return "any";
}

function convertObject(schema: unknown, indent: string, depth: number): string {
  let out = "";
  const desc = str(get(schema, "description"));
  if (desc !== null) out += `${indent}// ${desc}\n`;
  out += "{\n";

  const props = get(schema, "properties");
  if (isObj(props)) {
    const required = new Set<string>();
    const req = get(schema, "required");
    if (Array.isArray(req)) for (const r of req) if (typeof r === "string") required.add(r);

    for (const [key, val] of Object.entries(props)) {
      if (val === undefined) continue;
      const opt = required.has(key) ? "" : "?";
      const title = str(get(val, "title"));
      if (title !== null) out += `${indent}// ${title}\n${indent}//\n`;
      const oneOf = get(val, "oneOf");
      if (oneOf === ABSENT) {
        const d = str(get(val, "description"));
        if (d !== null) out += `${indent}// ${d}\n`;
      }
      const examples = get(val, "examples");
      if (Array.isArray(examples) && examples.length > 0) {
        out += `${indent}// Examples:\n`;
        for (const ex of examples) if (typeof ex === "string") out += `${indent}// - "${ex}"\n`;
      }

      if (Array.isArray(oneOf)) {
        out += propertyOneOf(key, opt, val, oneOf, indent, depth);
        continue;
      }

      out += `${indent}${key}${opt}: `;
      out += withNullable(val, convert(val, `${indent}    `, depth + 1));
      out += ",";
      if (oneOf === ABSENT) {
        const def = get(val, "default");
        if (def !== ABSENT) out += ` // ${defaultCommentProp(val, def)}`;
      }
      out += "\n";
    }
  }
  out += `${indent}}`;
  return out;
}

function propertyOneOf(key: string, opt: string, val: unknown, variants: unknown[], indent: string, depth: number): string {
  let out = "";
  const propertyDesc = str(get(val, "description"));
  // The property's description is not repeated when the first variant has the same one.
  const firstDesc = variants.length > 0 ? str(get(variants[0], "description")) : null;
  const skipPropertyDesc = propertyDesc !== null && firstDesc === propertyDesc;
  let descAbove = false;
  if (!skipPropertyDesc && propertyDesc !== null) {
    out += `${indent}// ${propertyDesc}\n`;
    descAbove = true;
  }
  const def = get(val, "default");
  if (def !== ABSENT) out += `${indent}// ${defaultCommentProp(val, def)}\n`;
  out += `${indent}${key}${opt}:\n`;
  variants.forEach((variant, i) => {
    out += `${indent} | `;
    out += withNullable(variant, convert(variant, `${indent}   `, depth + 1));
    const trailing: string[] = [];
    if (!(i === 0 && descAbove)) {
      const d = str(get(variant, "description"));
      if (d !== null && d !== propertyDesc) trailing.push(d);
    }
    const vdef = get(variant, "default");
    if (vdef !== ABSENT) trailing.push(defaultCommentProp(variant, vdef));
    if (trailing.length > 0) out += ` // ${trailing.join(" ")}`;
    out += "\n";
  });
  out += `${indent},\n`;
  return out;
}
