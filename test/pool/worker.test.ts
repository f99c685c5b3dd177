/**
 * The parser worker's entry (workers/parser.ts), as piscina loads it: by
 * `require()` of an ES module. Its handler is a named export and it has no
 * default export: Node builds a facade module for a required ES module with
 * a default export, and a failed instantiation of that facade is a CHECK in
 * node's src/module_wrap.cc that aborts the whole process (seen as a vitest
 * fork dying on `facade->InstantiateModule(...)`).
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { WORKER_HANDLER, workerFile } from "../../src/pool/pool.js";
import { schema } from "../../src/protocol/schema.js";
import { harmony } from "../helpers.js";

describe("the parser worker's entry", () => {
  it("exports its handler by name and has no default export", async () => {
    const { enc } = harmony();
    const code = `const { parentPort } = require("node:worker_threads");
parentPort.postMessage(Object.keys(require(${JSON.stringify(workerFile())})));`;
    const w = new Worker(code, { eval: true, workerData: { table: enc.table, schema: schema().root.toJSON() } });
    try {
      const keys = await new Promise<string[]>((resolve, reject) => {
        w.once("message", resolve);
        w.once("error", reject);
      });
      expect(keys).toEqual([WORKER_HANDLER]);
    } finally {
      await w.terminate();
    }
  });
});
