/** The layer rules of docs/architecture.md, checked on the real imports of src/. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module script without type declarations
import { findCycles, findViolations, readGraph, renderPage } from "../scripts/architecture.mjs";

type Node = { file: string; module: string; imports: string[]; external: string[]; lines: number };
const graph = readGraph() as Node[];

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
      "workers/check.ts",
      "workers/inspect.ts",
      "workers/parser.ts",
      "workers/render.ts",
    ]);
    const bad: Node[] = [{ file: "src/service/x.ts", module: "service", imports: ["workers/render.ts"], external: [], lines: 1 }];
    expect(findViolations(bad)).toEqual([
      "src/service/x.ts imports workers/render.ts: an entry point is started by its path, never imported",
    ]);
  });

  it("the worker entry points are thin wiring", () => {
    for (const n of graph.filter((x) => x.module === "workers")) expect(n.lines, n.file).toBeLessThan(80);
  });
});
