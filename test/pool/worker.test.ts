/**
 * The parser worker's entry, as piscina loads it: by `require()`. Node's
 * require() of an ES module can abort the whole process on Node 20 (CHECKs
 * in node's src/module_wrap.cc, seen as a vitest fork dying on
 * `facade->InstantiateModule(...)` and on "v8::Module::IsGraphAsync must be
 * used on an instantiated module"), so the file piscina gets is CommonJS
 * (workers/parser-entry.cts): its named handler export is a promise of the
 * ES module's handler, which it loads with import(). The ES module itself
 * keeps its handler a named export, with no default export (no facade).
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { WORKER_HANDLER, workerFile } from "../../src/pool/pool.js";
import { schema } from "../../src/protocol/schema.js";
import { harmony } from "../helpers.js";

async function inWorker<T>(code: string): Promise<T> {
  const { enc } = harmony();
  const w = new Worker(code, { eval: true, workerData: { table: enc.table, schema: schema().root.toJSON() } });
  try {
    return await new Promise<T>((resolve, reject) => {
      w.once("message", resolve);
      w.once("error", reject);
    });
  } finally {
    await w.terminate();
  }
}

describe("the parser worker's entry", () => {
  it("is CommonJS: require() of it loads no ES module, and its handler export is a promise of the worker's function", async () => {
    expect(workerFile()).toMatch(/\.cjs$/);
    const code = `const { parentPort } = require("node:worker_threads");
const entry = require(${JSON.stringify(workerFile())});
const kind = typeof entry.handle.then;
entry.handle.then((f) => parentPort.postMessage({ keys: Object.keys(entry), kind, handler: typeof f }));`;
    expect(await inWorker(code)).toEqual({ keys: [WORKER_HANDLER], kind: "function", handler: "function" });
  });

  it("loads the ES module, whose handler is a named export and which has no default export", async () => {
    const code = `const { parentPort } = require("node:worker_threads");
import(${JSON.stringify(workerFile().replace(/-entry\.cjs$/, ".js"))}).then((m) => parentPort.postMessage(Object.keys(m)));`;
    expect(await inWorker(code)).toEqual([WORKER_HANDLER]);
  });
});
