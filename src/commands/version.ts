/** The package's version (`--version`, the start-up banner), read from its package.json. */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The version in the nearest package.json named harmony-sidecar above this module (src/ or dist/src/), or "unknown". */
export function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { name?: unknown; version?: unknown };
      if (pkg.name === "harmony-sidecar" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // none here: one level up
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return "unknown";
}
