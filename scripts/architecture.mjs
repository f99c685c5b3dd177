// The import graph of src/ and workers/, read from the code with TypeScript's own import scanner,
// checked against the layer rules, and written as docs/architecture.md.
//   node scripts/architecture.mjs          print the problems (exit 1 if any)
//   node scripts/architecture.mjs --write  also rewrite docs/architecture.md
// test/architecture.test.ts runs the same checks and fails when the page is stale.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The layers, lowest first: a module may import its own files and the modules
 * it lists, nothing else. `server.ts` and `cli.ts` are modules of one file.
 */
export const LAYERS = [
  ["core", "the pure Harmony codec: parser, header grammar, UTF-8, vocabulary, events, renderer, code tables, the settings' defaults"],
  ["protocol", "the wire: protobuf schema and field table, frame readers (binary, JSON), the frame writer, gRPC method definitions"],
  ["vocab", "the o200k_harmony vocabulary: its table file (built from tiktoken's ranks), and text to ids in plain JS"],
  [
    "inspect",
    "the stream inspector: POST /v1/parse's work on a worker thread of its own (with the front's Chat and Responses chunks, from the openai adapters), and the page's logic (served to the browser too: it imports nothing)",
  ],
  ["openai", "OpenAI shapes: chat request to Harmony conversation, Harmony events to Chat and Responses streams"],
  ["store", "the reasoning store (tool call id to chain of thought) and the per-stream reasoning buffer"],
  ["upstream", "inference engines behind one interface (vLLM, SGLang, TensorRT-LLM, llama.cpp)"],
  ["pool", "parser sessions on worker threads (piscina) and the main thread's inline slot"],
  ["service", "connections: frames decoded, validated, routed to the pool, answered in order; metrics; generation"],
  ["transport", "the edges: WebSocket and HTTP, gRPC, the OpenAI front"],
  ["server", "the composition root: builds the service and starts its edges"],
  ["client", "the bundled client (WebSocket and gRPC)"],
  [
    "loadtest",
    "the fault-injecting load tester: generator, runner and checker, for the parser service and for OpenAI-compatible endpoints",
  ],
  ["simulate", "the vLLM-compatible gpt-oss engine simulator: vLLM's completions contract, generations from the load tester's generator"],
  ["commands", "the CLI's subcommands and the settings table"],
  ["cli", "the `harmony-sidecar` binary"],
  [
    "workers",
    "the worker threads' entry points (top-level `workers/`, thin wiring: the parser pool's, the render thread's, the answer check's, the inspector's parse, `parse --batch`'s helper)",
  ],
];

export const ALLOWED = {
  core: [],
  protocol: ["core"],
  vocab: ["core"],
  inspect: ["core", "vocab", "openai"],
  openai: ["core"],
  store: ["core"],
  upstream: ["core"],
  pool: ["core", "protocol", "vocab", "openai", "store"],
  service: ["core", "protocol", "vocab", "openai", "store", "upstream", "pool"],
  transport: ["core", "protocol", "vocab", "inspect", "openai", "store", "upstream", "pool", "service"],
  server: ["core", "protocol", "vocab", "inspect", "openai", "store", "upstream", "pool", "service", "transport"],
  client: ["core", "protocol"],
  loadtest: ["core", "protocol", "client"],
  simulate: ["core", "vocab", "loadtest"],
  commands: [
    "core",
    "protocol",
    "vocab",
    "inspect",
    "openai",
    "store",
    "upstream",
    "pool",
    "service",
    "transport",
    "server",
    "client",
    "loadtest",
    "simulate",
  ],
  cli: ["commands", "loadtest"],
  workers: ["core", "protocol", "vocab", "inspect", "openai", "store", "pool", "service"],
};

function sourceFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith(".ts") || e.name.endsWith(".cts")) out.push(p);
  }
  return out.sort();
}

/** `src/core/parser.ts` → `core`; `src/server.ts` → `server`; `workers/render.ts` → `workers`. */
export function moduleOf(rel) {
  const parts = rel.split("/");
  if (parts[0] === "workers") return "workers";
  return parts.length > 2 ? parts[1] : parts[1].replace(/\.ts$/, "");
}

/** Every file of src/ and workers/ with its imports: internal ones as repo paths, others as written. */
export function readGraph() {
  const files = [...sourceFiles(path.join(root, "src")), ...sourceFiles(path.join(root, "workers"))];
  return files.map((abs) => {
    const rel = path.relative(root, abs).split(path.sep).join("/");
    const text = readFileSync(abs, "utf8");
    const info = ts.preProcessFile(text, true, true);
    const internal = [];
    const external = [];
    for (const imp of info.importedFiles) {
      const spec = imp.fileName;
      if (spec.startsWith(".")) {
        const target = path
          .relative(root, path.resolve(path.dirname(abs), spec))
          .split(path.sep)
          .join("/");
        internal.push(target.replace(/\.js$/, ".ts"));
      } else external.push(spec);
    }
    return { file: rel, module: moduleOf(rel), imports: internal, external, lines: text.split("\n").length };
  });
}

/** Import cycles among files (each as a list of files, the first repeated at the end). */
export function findCycles(graph) {
  const edges = new Map(graph.map((n) => [n.file, n.imports]));
  const cycles = [];
  const state = new Map(); // 1: on the stack, 2: done
  // iterative depth-first search (no recursion over the graph)
  for (const start of edges.keys()) {
    if (state.get(start)) continue;
    const stack = [[start, 0]];
    const pathStack = [start];
    state.set(start, 1);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const next = (edges.get(top[0]) ?? [])[top[1]++];
      if (next === undefined) {
        state.set(top[0], 2);
        stack.pop();
        pathStack.pop();
        continue;
      }
      if (!edges.has(next)) continue;
      const s = state.get(next);
      if (s === 1) cycles.push([...pathStack.slice(pathStack.indexOf(next)), next]);
      else if (!s) {
        state.set(next, 1);
        stack.push([next, 0]);
        pathStack.push(next);
      }
    }
  }
  return cycles;
}

/** Imports that break the layer rules, and node: or package imports in the pure core. */
export function findViolations(graph) {
  const out = [];
  for (const n of graph) {
    const allowed = ALLOWED[n.module];
    if (!allowed) {
      out.push(`${n.file}: module "${n.module}" is not in scripts/architecture.mjs's LAYERS`);
      continue;
    }
    for (const target of n.imports) {
      // the CommonJS file piscina loads (workers/<name>-entry.cts) loads its worker's ES module: the one import of an entry point
      if (target.startsWith("workers/")) {
        if (n.file !== target.replace(/\.ts$/, "-entry.cts"))
          out.push(`${n.file} imports ${target}: an entry point is started by its path, never imported`);
        continue;
      }
      if (!target.startsWith("src/")) {
        out.push(`${n.file} imports ${target}, outside src/`);
        continue;
      }
      const m = moduleOf(target);
      if (m !== n.module && !allowed.includes(m)) out.push(`${n.file} imports ${target}: ${n.module} may not import ${m}`);
    }
    if (n.module === "core" && n.external.length > 0)
      out.push(`${n.file} imports ${n.external.join(", ")}: the core imports nothing outside itself`);
  }
  return out;
}

/** docs/architecture.md, made from the graph. */
export function renderPage(graph) {
  const edges = new Map();
  for (const n of graph) {
    for (const t of n.imports) {
      const m = moduleOf(t);
      if (m === n.module) continue;
      const key = `${n.module} --> ${m}`;
      edges.set(key, (edges.get(key) ?? 0) + 1);
    }
  }
  const byModule = new Map();
  for (const n of graph) byModule.set(n.module, [...(byModule.get(n.module) ?? []), n]);
  const lines = [];
  lines.push("# Architecture");
  lines.push("");
  lines.push(
    "<!-- Made by `node scripts/architecture.mjs --write` from the imports of src/ and workers/; test/architecture.test.ts fails when it is stale. -->",
  );
  lines.push("");
  lines.push("Each folder of `src/` is one module with one role. Modules are layered:");
  lines.push("a module imports only the modules below it (its column in the table), never");
  lines.push("one above, and no file imports another in a cycle. `core` imports nothing,");
  lines.push("not even `node:` modules: it is the pure codec everything else stands on.");
  lines.push("The worker threads' entry points live in the top-level `workers/` folder:");
  lines.push("each is a thin wiring file, started by its built path (`src/pool/built-worker.ts`), never imported");
  lines.push("(but by its CommonJS entry, `workers/<name>-entry.cts`, for piscina, which loads a worker with require()).");
  lines.push("");
  // (no line counts: the page changes when the structure does, not at every edit)
  lines.push("| module | role | may import | files |");
  lines.push("|---|---|---|---|");
  for (const [m, role] of LAYERS) {
    const files = byModule.get(m) ?? [];
    lines.push(`| \`${m}\` | ${role} | ${ALLOWED[m].map((x) => `\`${x}\``).join(", ") || "nothing"} | ${files.length} |`);
  }
  lines.push("");
  lines.push("## Imports between modules");
  lines.push("");
  lines.push("An arrow points from the importing module to the imported one; its label is the number of import statements.");
  lines.push("");
  lines.push("```mermaid");
  lines.push("graph BT");
  for (const [key, count] of [...edges].sort()) lines.push(`  ${key.replace(" --> ", ` -->|${count}| `)}`);
  lines.push("```");
  lines.push("");
  lines.push("## Files");
  lines.push("");
  for (const [m] of LAYERS) {
    const files = byModule.get(m) ?? [];
    if (files.length === 0) continue;
    lines.push(`- \`${m}\`: ${files.map((f) => `\`${f.file.replace(/^src\//, "")}\``).join(", ")}`);
  }
  lines.push("");
  return lines.join("\n");
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const graph = readGraph();
  const problems = [...findCycles(graph).map((c) => `cycle: ${c.join(" → ")}`), ...findViolations(graph)];
  for (const p of problems) console.log(p);
  if (process.argv.includes("--write")) writeFileSync(path.join(root, "docs/architecture.md"), renderPage(graph));
  process.exit(problems.length > 0 ? 1 : 0);
}
