/**
 * The file piscina loads for a parser worker (src/pool/pool.ts). piscina
 * loads a worker's file with require() first, and Node's require() of an ES
 * module can abort the whole process on Node 20, not just the thread: hard
 * CHECKs in node's module_wrap.cc (`facade->InstantiateModule(...)`,
 * "v8::Module::IsGraphAsync must be used on an instantiated module"). This
 * file is CommonJS, so require() never meets an ES module: it loads the
 * worker (workers/parser.ts) with import(), and piscina awaits the handler
 * export, a promise of the function.
 */
export const handle = import("./parser.js").then((m) => m.handle);
