/** The layer rules of docs/architecture.md, checked on the real imports of src/; and the tests' folders mirroring src/'s modules. */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module script without type declarations
import { findCycles, findViolations, readGraph, renderPage } from "../scripts/architecture.mjs";

type Node = { file: string; module: string; imports: string[]; external: string[]; lines: number };
const graph = readGraph() as Node[];

/** Folders of test/ that are not one module's: tests across layers, the deployment's, shared data. */
const NOT_A_MODULE = ["e2e", "deploy", "fixtures", "bench"];

/** Every file under test/, as a repo path. */
function testFiles(dir = "test"): string[] {
  const out: string[] = [];
  for (const e of readdirSync(new URL(`../${dir}/`, import.meta.url), { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...testFiles(p));
    else out.push(p);
  }
  return out.sort();
}

/**
 * Files under test/ that break its layout: outside the shared folders, a test of one
 * module lives in test/<module>/ (a module of src/, `server` and `cli` included, or the
 * top-level workers/) and imports that module; test/'s own top-level files are the
 * repository-wide tests (architecture, docs) and the shared helpers.
 */
function misplacedTests(files: string[], modules: Set<string>, importsOf: (file: string) => string[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    const parts = file.split("/");
    if (parts.length === 2 || NOT_A_MODULE.includes(parts[1]!)) continue;
    const m = parts[1]!;
    if (!modules.has(m)) {
      out.push(`${file}: test/${m}/ is named after no module of src/ (nor workers/); move it to the folder of the module it tests`);
      continue;
    }
    if (!file.endsWith(".test.ts") || m === "workers") continue;
    const own = importsOf(file).some((t) => t === `src/${m}.ts` || t.startsWith(`src/${m}/`));
    if (!own) out.push(`${file}: imports nothing of src/${m}; move it to the folder of the module it tests`);
  }
  return out;
}

/** The repo paths of a test file's relative imports (`.js` read as `.ts`). */
function importsOf(file: string): string[] {
  const text = readFileSync(new URL(`../${file}`, import.meta.url), "utf8");
  const dir = file.split("/").slice(0, -1);
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*)["'](\.[^"']+)["']/g)) {
    const parts = [...dir];
    for (const seg of m[1]!.split("/")) {
      if (seg === "..") parts.pop();
      else if (seg !== ".") parts.push(seg);
    }
    out.push(parts.join("/").replace(/\.js$/, ".ts"));
  }
  return out;
}

const modules = new Set(graph.map((n) => n.module));
if (existsSync(new URL("../workers/", import.meta.url))) modules.add("workers");

describe("architecture", () => {
  it("reads the whole tree", () => {
    expect(graph.length).toBeGreaterThan(40);
    expect(graph.find((n) => n.file === "src/server.ts")?.imports).toContain("src/service/service.ts");
  });

  it("has no import cycle", () => {
    expect(findCycles(graph)).toEqual([]);
  });

  it("finds a cycle when there is one", () => {
    const cyclic: Node[] = [
      { file: "src/core/a.ts", module: "core", imports: ["src/core/b.ts"], external: [], lines: 1 },
      { file: "src/core/b.ts", module: "core", imports: ["src/core/c.ts"], external: [], lines: 1 },
      { file: "src/core/c.ts", module: "core", imports: ["src/core/a.ts"], external: [], lines: 1 },
    ];
    expect(findCycles(cyclic)).toEqual([["src/core/a.ts", "src/core/b.ts", "src/core/c.ts", "src/core/a.ts"]]);
  });

  it("has no upward import, and a core that imports nothing outside itself", () => {
    expect(findViolations(graph)).toEqual([]);
  });

  it("finds an upward import and a node: import in the core", () => {
    const bad: Node[] = [
      { file: "src/service/x.ts", module: "service", imports: ["src/transport/http.ts"], external: [], lines: 1 },
      { file: "src/core/y.ts", module: "core", imports: [], external: ["node:fs"], lines: 1 },
    ];
    expect(findViolations(bad)).toHaveLength(2);
  });

  it("test/ mirrors src/: each module's tests live in test/<module>/ and import it", () => {
    expect(misplacedTests(testFiles(), modules, importsOf)).toEqual([]);
  });

  it("finds a test in another module's folder, and one in a folder named after no module", () => {
    const imports: Record<string, string[]> = {
      "test/service/cork.test.ts": ["src/transport/http.ts"],
      "test/server/last-resort.test.ts": ["src/server.ts"],
      "test/store/redis-server.ts": [],
      "test/e2e/sidecar.test.ts": ["src/server.ts"],
      "test/helpers.ts": [],
      "test/docs/readme.test.ts": [],
    };
    expect(misplacedTests(Object.keys(imports), modules, (f) => imports[f]!)).toEqual([
      "test/service/cork.test.ts: imports nothing of src/service; move it to the folder of the module it tests",
      "test/docs/readme.test.ts: test/docs/ is named after no module of src/ (nor workers/); move it to the folder of the module it tests",
    ]);
  });

  it("docs/architecture.md is the page made from the code (node scripts/architecture.mjs --write)", () => {
    const page = readFileSync(new URL("../docs/architecture.md", import.meta.url), "utf8");
    expect(page).toBe(renderPage(graph));
  });

  it("the worker threads' entry points are in workers/, and nothing in src/ is one or imports one", () => {
    // an entry point imports how it talks to its parent (parentPort) or what it was started with (workerData)
    const marker = /import\s*\{[^}]*\b(parentPort|workerData)\b[^}]*\}\s*from\s*"node:worker_threads"/;
    const entries = graph.filter((n) => marker.test(readFileSync(new URL(`../${n.file}`, import.meta.url), "utf8")));
    expect(entries.map((n) => n.file).filter((f) => !f.startsWith("workers/"))).toEqual([]);
    expect(graph.filter((n) => n.module === "workers").map((n) => n.file)).toEqual([
      "workers/batch.ts",
      "workers/check.ts",
      "workers/inspect.ts",
      "workers/parser-entry.cts",
      "workers/parser.ts",
      "workers/render.ts",
    ]);
    const bad: Node[] = [{ file: "src/service/x.ts", module: "service", imports: ["workers/render.ts"], external: [], lines: 1 }];
    expect(findViolations(bad)).toEqual([
      "src/service/x.ts imports workers/render.ts: an entry point is started by its path, never imported",
    ]);
    // only a worker's own CommonJS entry may load it
    const entry: Node[] = [
      { file: "workers/parser-entry.cts", module: "workers", imports: ["workers/parser.ts"], external: [], lines: 1 },
      { file: "workers/render-entry.cts", module: "workers", imports: ["workers/parser.ts"], external: [], lines: 1 },
    ];
    expect(findViolations(entry)).toEqual([
      "workers/render-entry.cts imports workers/parser.ts: an entry point is started by its path, never imported",
    ]);
  });

  it("the worker entry points are thin wiring", () => {
    for (const n of graph.filter((x) => x.module === "workers")) expect(n.lines, n.file).toBeLessThan(80);
  });
});
