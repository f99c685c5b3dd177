/**
 * vitest's global setup: the worker threads run the compiled src/pool/worker.ts
 * from dist/, so a test run after an edit would otherwise test the new code on
 * the main thread and the old code in the workers. Rebuild when any source is
 * newer than the last build (what `make build` does, marked by dist/.built).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (e.name.endsWith(".ts")) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

export default function setup(): void {
  const marker = path.join(root, "dist/.built");
  const built = existsSync(marker) ? statSync(marker).mtimeMs : 0;
  const sources = Math.max(
    newest(path.join(root, "src")),
    newest(path.join(root, "bench")),
    statSync(path.join(root, "tsconfig.json")).mtimeMs,
  );
  if (sources <= built) return;
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.json")], { stdio: "inherit" });
  const now = new Date();
  if (existsSync(marker)) utimesSync(marker, now, now);
  else writeFileSync(marker, "");
}
