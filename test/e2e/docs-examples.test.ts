/**
 * The docs' shell examples run. Every ```console or ```sh block right
 * after a `<!-- test: runs -->` line in README.md or docs/*.md is run with
 * `sh` from the repository's root, as a reader would type it (`npx
 * harmony-sidecar …` included), against a real server on a free port:
 * `localhost:8765` and `127.0.0.1:8765` in a command become its address.
 * In a console block, `$ ` starts a command (a line ending in `\`, or
 * inside a quoted string, goes on on the next), and the lines up to the
 * next command are its output: each
 * must be the line printed, `…` standing for any text. A sh block's
 * commands must exit 0. Blocks without the mark (a GPU, a cluster, a run of
 * minutes) are not run.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./test-server.js";
import { runProcess, type Ran } from "../helpers.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MARK = "<!-- test: runs -->";

interface Example {
  file: string;
  line: number;
  kind: "console" | "sh";
  /** Commands and, for console blocks, the output each shows. */
  steps: { command: string; output: string[] }[];
}

/** Whether a shell command's text ends inside a quoted string (its next line belongs to it). */
function inQuote(command: string): boolean {
  let q: string | null = null;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (q === "'") {
      if (c === "'") q = null;
    } else if (c === "\\") i++;
    else if (q === '"') {
      if (c === '"') q = null;
    } else if (c === "'" || c === '"') q = c;
  }
  return q !== null;
}

/** The marked blocks of one Markdown file. */
function examples(file: string, text: string): Example[] {
  const lines = text.split("\n");
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== MARK) continue;
    const fence = /^```(console|sh)\s*$/.exec(lines[i + 1] ?? "");
    if (!fence) throw new Error(`${file}:${i + 1}: ${MARK} is not followed by a console or sh block`);
    const kind = fence[1] as "console" | "sh";
    const body: string[] = [];
    let j = i + 2;
    for (; j < lines.length && !lines[j]!.startsWith("```"); j++) body.push(lines[j]!);
    const steps: Example["steps"] = [];
    for (let k = 0; k < body.length; k++) {
      const l = body[k]!;
      if (kind === "sh" && (l.trim() === "" || l.trim().startsWith("#"))) continue;
      if (kind === "console" && !l.startsWith("$ ")) {
        if (steps.length === 0) throw new Error(`${file}:${i + 3 + k}: output before any command`);
        steps.at(-1)!.output.push(l);
        continue;
      }
      let command = kind === "console" ? l.slice(2) : l;
      while ((command.endsWith("\\") || inQuote(command)) && k + 1 < body.length) command += "\n" + body[++k]!;
      steps.push({ command, output: [] });
    }
    out.push({ file, line: i + 2, kind, steps });
    i = j;
  }
  return out;
}

const FILES = [
  "README.md",
  ...readdirSync(path.join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const ALL = FILES.flatMap((f) => examples(f, readFileSync(path.join(root, f), "utf8")));

/** An expected output line as a pattern: the text as is, `…` any text. */
function pattern(line: string): RegExp {
  return new RegExp(
    `^${line
      .split("…")
      .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("[\\s\\S]*?")}$`,
  );
}

function sh(command: string): Promise<Ran> {
  // npx, node and curl as a reader has them: node's own directory first on the PATH
  const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ""}` };
  return runProcess("sh", ["-c", command], { cwd: root, env });
}

describe("the docs' examples", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ grpcPort: -1 });
  });
  afterAll(async () => {
    await s.server.stop();
  });

  it("are found where the docs mark them", () => {
    const count = (file: string) => ALL.filter((e) => e.file === file).length;
    expect(count("README.md")).toBeGreaterThanOrEqual(3);
    expect(count("docs/protocol.md")).toBeGreaterThanOrEqual(1);
    expect(count("docs/inspect.md")).toBeGreaterThanOrEqual(1);
    for (const e of ALL) expect(e.steps.length, `${e.file}:${e.line}`).toBeGreaterThan(0);
    // no doc example calls a bare harmony-sidecar: it is not on PATH
    for (const e of ALL) for (const st of e.steps) expect(st.command, `${e.file}:${e.line}`).not.toMatch(/(^|[|;&]\s*)harmony-sidecar /m);
  });

  it.each(ALL.map((e) => [`${e.file}:${e.line}`, e] as const))("%s runs and prints what it shows", async (_where, e) => {
    const address = new URL(s.http).host;
    for (const step of e.steps) {
      const command = step.command.replace(/\b(localhost|127\.0\.0\.1):8765\b/g, address);
      const r = await sh(command);
      expect(r.code, `${command}\n${r.stderr}`).toBe(0);
      if (e.kind !== "console") continue;
      const got = r.stdout.replace(/\n$/, "").split("\n");
      const want = step.output;
      expect(got.length, `${command}: the output's lines\n${r.stdout}`).toBe(want.length);
      want.forEach((w, i) => expect(got[i], `${command}: line ${i + 1}`).toMatch(pattern(w.trim())));
    }
  });
});
