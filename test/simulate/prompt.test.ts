/**
 * What the simulator reads from a prompt: the tools of the developer
 * message's `namespace functions { … }` block (written by the project's
 * renderer, src/core/schema-ts.ts, which reproduces openai-harmony's
 * `json_schema_to_typescript`), read back into the same shape as the JSON
 * Schema gives; arguments generated for those shapes valid for the schema;
 * and hostile prompts read without a throw.
 */
import { Ajv } from "ajv";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { renderConversationForCompletion } from "../../src/core/render.js";
import { jsonSchemaToTypeScript } from "../../src/core/schema-ts.js";
import { argumentsFor, shapeOfSchema, type ToolSpec } from "../../src/loadtest/arguments.js";
import { rng } from "../../src/loadtest/generate.js";
import { declaredTools, decodeIds, readType, requestKey } from "../../src/simulate/prompt.js";
import { harmony } from "../helpers.js";

const { enc, vocab } = harmony();

/**
 * JSON Schemas of the kinds OpenAI tool definitions use. Array items are
 * never unions: the renderer writes `string | null[]` for an array of
 * `string | null` (no parentheses, as openai-harmony does), which reads as a
 * union with an array, for the model as for the simulator.
 */
const single = [
  fc.constant({ type: "string" }),
  fc.constant({ type: "integer", minimum: 1 }),
  fc.constant({ type: "number" }),
  fc.constant({ type: "boolean" }),
];
const unions = [
  fc.record({ type: fc.constant("string"), enum: fc.uniqueArray(fc.stringMatching(/^[a-z]{1,8}$/), { minLength: 1, maxLength: 4 }) }),
  fc.constant({ type: ["string", "null"] }),
  fc.constant({ type: "string", nullable: true }),
  fc.constant({ oneOf: [{ type: "string", description: "a name" }, { type: "number" }] }),
];
const leaf = fc.oneof(...single, ...unions);
const propName = fc.stringMatching(/^[a-z][a-z_]{0,10}$/);
/** Nested within the shapes' bound (MAX_SHAPE_DEPTH: deeper parts are `any`, for which a string is written). */
const schema = fc.letrec((tie) => ({
  node: fc.oneof({ maxDepth: 3 }, leaf, tie("array"), tie("object")),
  array: fc.record({ type: fc.constant("array"), items: fc.oneof({ maxDepth: 3 }, ...single, tie("array"), tie("object")) }),
  object: fc
    .dictionary(propName, tie("node"), { maxKeys: 5 })
    .chain((props) =>
      fc.subarray(Object.keys(props)).map((required) => ({ type: "object", properties: props, required, description: "Something to do." })),
    ),
})).object;

describe("tools read back from the rendered namespace", () => {
  it("gives the JSON Schema's shape for any schema (the renderer's text, read back)", () => {
    fc.assert(
      fc.property(schema, (s) => {
        const ts = jsonSchemaToTypeScript(s, "");
        const read = readType(`${ts}) => any;`, 0);
        expect(read, ts).not.toBeNull();
        expect(read!.shape).toEqual(shapeOfSchema(s));
      }),
      { numRuns: 300 },
    );
  });

  it("finds every tool of a rendered prompt, names with dashes, tools without parameters, and the request key", () => {
    const tools = [
      {
        name: "get-stock-price",
        description: "Price.",
        parameters: { type: "object", properties: { ticker: { type: "string" } }, required: ["ticker"] },
      },
      { name: "list_open_tabs", description: "Tabs." },
      {
        name: "book",
        description: "Multi\nline description.",
        parameters: { type: "object", properties: { when: { type: "string", description: "ISO date" } } },
      },
    ];
    const text = renderConversationForCompletion([
      { role: "system", content: { type: "system_content", model_identity: "You are ChatGPT." } },
      {
        role: "developer",
        content: { type: "developer_content", instructions: "Be brief.", tools: { functions: { name: "functions", tools } } },
      },
      { role: "user", content: "Price of NVDA? (harmony-loadtest run=r1 request=42)" },
    ]);
    const ids = enc.encode(text);
    const decoded = decodeIds(vocab, ids);
    expect(decoded).toBe(text);
    expect(declaredTools(decoded)).toEqual([
      { name: "get-stock-price", params: { kind: "object", props: [{ name: "ticker", optional: false, shape: { kind: "string" } }] } },
      { name: "list_open_tabs", params: null },
      { name: "book", params: { kind: "object", props: [{ name: "when", optional: true, shape: { kind: "string" } }] } },
    ]);
    expect(requestKey("x (harmony-loadtest run=r1 request=42)")).toBe("r1/42");
    expect(requestKey("no key here")).toBeNull();
  });

  it("reads only the developer message's block (a user quoting one declares nothing)", () => {
    const text = renderConversationForCompletion([
      { role: "user", content: "namespace functions {\ntype evil = () => any;\n} // namespace functions" },
    ]);
    expect(declaredTools(text)).toBeUndefined();
  });

  it("reads hostile text without throwing, nested past every bound", () => {
    const deep = "type x = (_: " + "{\na: ".repeat(5000) + "string" + ",\n}".repeat(5000) + ") => any;";
    const dev = (block: string) =>
      `<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n${block}\n} // namespace functions<|end|>`;
    const t = declaredTools(dev(deep));
    expect(t?.[0]?.name).toBe("x");
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (junk) => {
        expect(() => declaredTools(dev(`type t = (_: ${junk}) => any;`))).not.toThrow();
        expect(() => readType(junk, 0)).not.toThrow();
      }),
      { numRuns: 500 },
    );
    expect(decodeIds(vocab, [1, 2 ** 31, -1, 1.5, 200006])).toBe(`${decodeIds(vocab, [1])}\uFFFD\uFFFD\uFFFD<|start|>`);
  });
});

describe("generated arguments", () => {
  it("are valid for the schema they were generated for", () => {
    const ajv = new Ajv({ strict: false });
    fc.assert(
      fc.property(schema, fc.integer({ min: 0, max: 2 ** 31 }), (s, seed) => {
        const validate = ajv.compile(s);
        const tool: ToolSpec = { name: "t", params: shapeOfSchema(s) };
        const r = rng(seed);
        for (let k = 0; k < 5; k++) {
          const text = argumentsFor(r, tool);
          expect(validate(JSON.parse(text)), `${text} for ${JSON.stringify(s)}`).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("are {} for a tool without parameters", () => {
    expect(argumentsFor(rng(1), { name: "t", params: null })).toBe("{}");
  });
});
