/**
 * vitest's global setup: the worker threads run the compiled workers/*.ts
 * from dist/, so a test run after an edit would otherwise test the new code on
 * the main thread and the old code in the workers. Rebuild when any source is
 * newer than the last build (what `make build` does, scripts/build.mjs,
 * marked by dist/.built).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The newest mtime of the files under `dir` that `keep` takes. */
function newest(dir: string, keep: (name: string) => boolean): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, keep));
    else if (keep(e.name)) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

export default function setup(): void {
  const marker = path.join(root, "dist/.built");
  const built = existsSync(marker) ? statSync(marker).mtimeMs : 0;
  const sources = Math.max(
    newest(path.join(root, "src"), () => true), // the page's files are part of the build too
    newest(path.join(root, "workers"), (name) => name.endsWith(".ts")),
    newest(path.join(root, "bench"), (name) => name.endsWith(".ts")),
    statSync(path.join(root, "tsconfig.json")).mtimeMs,
    statSync(path.join(root, "scripts/build.mjs")).mtimeMs,
  );
  if (sources <= built) return;
  execFileSync(process.execPath, [path.join(root, "scripts/build.mjs")], { stdio: "inherit" });
}
