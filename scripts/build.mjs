#!/usr/bin/env node
// The build, one command for every place that builds (`make build`, the
// container image's build stage, vitest's global setup): tsc, then what tsc
// does not make:
// - every other file of src/ (the inspector page's HTML, style and script), copied to
//   its place in dist/src/, since the built code reads them beside itself;
// - the vocabulary table file, written from tiktoken (src/vocab/table-file.ts), so
//   no process or thread rebuilds the table when it starts;
// - the CLI's execute bit, and dist/.built (what test/build.setup.ts compares with the sources).
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.json")], { stdio: "inherit" });

// src/inspect/tsconfig.json only type-checks the page's script; nothing reads it at run time
const assets = readdirSync(path.join(root, "src"), { recursive: true, withFileTypes: true }).filter(
  (e) => e.isFile() && !e.name.endsWith(".ts") && e.name !== "tsconfig.json",
);
for (const e of assets) {
  const from = path.join(e.parentPath ?? e.path, e.name);
  const to = path.join(dist, path.relative(root, from));
  mkdirSync(path.dirname(to), { recursive: true });
  copyFileSync(from, to);
}

const { HARMONY } = await import(pathToFileURL(path.join(dist, "src/core/preset.js")).href);
const { tableFilePath } = await import(pathToFileURL(path.join(dist, "src/vocab/encoding.js")).href);
const { encodeTableFile, writeTableFile } = await import(pathToFileURL(path.join(dist, "src/vocab/table-file.js")).href);
const { buildFromTiktoken, ranksChecksum } = await import(pathToFileURL(path.join(dist, "src/vocab/tiktoken.js")).href);
// always written anew: the file's checksum names the ranks it came from, not the code that built it
writeTableFile(tableFilePath(), encodeTableFile(buildFromTiktoken(HARMONY, false), ranksChecksum(HARMONY)));

chmodSync(path.join(dist, "src/cli.js"), 0o755);
writeFileSync(path.join(dist, ".built"), "");
