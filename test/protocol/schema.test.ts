import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { lazySchemaFromJson, schema, type SchemaJson } from "../../src/protocol/schema.js";

const BUILT_SCHEMA = fileURLToPath(new URL("../../dist/src/protocol/schema.js", import.meta.url));

describe("the worker's lazy schema", () => {
  it("encodes what the schema read from proto/ encodes", () => {
    const json = JSON.parse(JSON.stringify(schema().root.toJSON())) as SchemaJson;
    const lazy = lazySchemaFromJson(json);
    const event = { stream_id: "s", done: { reason: "stop" } };
    expect(Buffer.from(lazy.Event.encode(event).finish())).toEqual(Buffer.from(schema().Event.encode(event).finish()));
    expect(Object.keys(lazy).sort()).toEqual(Object.keys(schema()).sort());
  });

  it("loads protobufjs only when a member is first read (a parser worker starts without it)", () => {
    // a fresh process: this one has loaded protobufjs already
    const script = `
      const { createRequire } = await import("node:module");
      const { lazySchemaFromJson } = await import(${JSON.stringify(BUILT_SCHEMA)});
      const loaded = () => Object.keys(createRequire(${JSON.stringify(BUILT_SCHEMA)}).cache).some((k) => k.includes("protobufjs"));
      const json = JSON.parse(process.env.SCHEMA_JSON);
      const lazy = lazySchemaFromJson(json);
      const before = loaded();
      void lazy.root;
      console.log(JSON.stringify({ before, after: loaded() }));`;
    const env = { ...process.env, SCHEMA_JSON: JSON.stringify(schema().root.toJSON()) };
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env });
    expect(JSON.parse(out)).toEqual({ before: false, after: true });
  });
});
