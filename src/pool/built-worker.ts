/**
 * Where a worker thread's entry point is built: every thread's entry point
 * lives in the top-level workers/ folder (thin wiring; the work itself is in
 * src/), and tsc builds it to dist/workers/. This module is built to
 * dist/src/pool/, and run from src/pool/ by the tests (vitest's global
 * setup, test/build.setup.ts, rebuilds dist/ first so it is never stale).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CodedError } from "../core/errors.js";

/** The project's worker threads, by their entry point's name in workers/. */
export type WorkerName = "parser" | "render" | "check" | "inspect";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The built entry point of worker `name`: dist/workers/<name>.js (or its CommonJS entry, <name>-entry.cjs, for piscina). */
export function builtWorker(name: WorkerName, form: "module" | "commonjs" = "module"): string {
  const file = form === "module" ? `${name}.js` : `${name}-entry.cjs`;
  const candidates = [
    path.join(here, "../../workers", file), // dist/src/pool → dist/workers
    path.join(here, "../../dist/workers", file), // src/pool → dist/workers
  ];
  const found = candidates.find((f) => existsSync(f));
  if (!found) throw new CodedError("not_built", `workers/${name}.ts is not built; run \`make build\``);
  return found;
}
