/**
 * What the docs (README.md and docs/*.md) claim that the code can check, checked against the code:
 * the paths and sections they point at, the settings' defaults, the flags and variables they name,
 * the codes and messages they quote, and the counts they give. Each kind of claim is one test that
 * reads both sides and fails on drift, as fastify's test/internals/errors.test.js checks its
 * docs/Reference/Errors.md against lib/errors.js both ways. docs/errors.md's code tables have their
 * own test (test/core/errors-doc.test.ts), and docs/protocol.md's settings table its flags and
 * variables (test/e2e/settings.test.ts).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { SETTINGS, type Setting } from "../src/commands/settings.js";
import { AFTER_STOP_RAW_BYTES, REPEAT_LIMIT } from "../src/core/index.js";
import { MAX_JSON_DEPTH } from "../src/core/json.js";
import * as codes from "../src/core/errors.js";
import { MAX_BATCH_LINE_BYTES } from "../src/commands/parse.js";
import { FAULT_KINDS, REAL_FAULT_KINDS } from "../src/loadtest/generate.js";
import { MAX_STREAMED_ARGUMENT_CHARS } from "../src/openai/streamed-arguments.js";
import { FIELDS } from "../src/protocol/fields.js";
import { MAX_TOOL_NAME, MAX_TOOLS } from "../src/core/tools.js";
import { DEFAULTS, defaultWorkers } from "../src/service/service.js";
import { ENGINE_KINDS } from "../src/upstream/index.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const CLI = path.join(ROOT, "dist/src/cli.js");
const read = (rel: string) => readFileSync(path.join(ROOT, rel), "utf8");

/** The project's docs, by repo path. */
const DOCS = new Map(
  [
    "README.md",
    ...readdirSync(path.join(ROOT, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ].map((f) => [f, read(f)]),
);
const README = DOCS.get("README.md")!;
/** Each doc's text with its lines joined, for claims a line break may split. */
/** One line of text: line breaks, with a block comment's ` * ` and a line comment's `//` after them, become one space. */
const flat = (text: string) => text.replace(/\s*\n\s*(?:\*(?!\/)|\/\/)?\s*/g, " ");

function walk(dir: string, keep: (file: string) => boolean): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...walk(rel, keep));
    else if (keep(rel)) out.push(rel);
  }
  return out.sort();
}

/** The comments of a TypeScript file, joined. */
function commentsOf(text: string): string {
  return [...text.matchAll(/\/\*[\s\S]*?\*\/|\/\/.*$/gm)].map((m) => m[0]).join("\n");
}

// ---------------------------------------------------------------- paths and sections

/** The top-level folders a repo path in a doc starts with. */
const PATH_ROOTS = ["src", "test", "docs", "bench", "scripts", "deploy", "proto", "workers"];
const PATH_IN_TEXT = new RegExp(`(?<![\\w./:@-])((?:${PATH_ROOTS.join("|")})/[\\w./*…{},-]*)`, "g");

/** Whether a path pattern (`src/a.ts`, `test/e2e/*.test.ts`, `src/upstream/{a,b}.ts`, `scripts/…`) names something that exists. */
function pathExists(pattern: string): boolean {
  const p = pattern.replace(/[.,:;]+$/, "");
  if (p.includes("…")) return existsSync(path.join(ROOT, p.slice(0, p.indexOf("…"))));
  const braces = /\{([^}]*)\}/.exec(p);
  if (braces) return braces[1]!.split(",").every((alt) => pathExists(p.replace(braces[0], alt)));
  if (!p.includes("*")) return existsSync(path.join(ROOT, p));
  const dir = p.slice(0, p.lastIndexOf("/", p.indexOf("*")));
  const re = new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
  return existsSync(path.join(ROOT, dir)) && walk(dir, () => true).some((f) => re.test(f));
}

/** Repo paths a text names, except those of another repository (`openai/harmony docs/format.md`). */
function pathsIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(PATH_IN_TEXT)) {
    const before = text.slice(Math.max(0, m.index - 40), m.index);
    if (/[\w-]+\/[\w.-]+[\s*`]*$/.test(before)) continue;
    out.push(m[1]!);
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

/** A doc's headings outside code blocks, and the bold lead-ins that open a paragraph (`**Streams named by a number.**`). */
function sectionsOf(text: string): { headings: string[]; leads: string[] } {
  const prose = text.replace(/^```[\s\S]*?^```/gm, "");
  return {
    headings: [...prose.matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1]!.trim()),
    leads: [...prose.matchAll(/^\*\*([^*]+?)\.?\*\*/gm)].map((m) => m[1]!.trim()),
  };
}

// ---------------------------------------------------------------- the CLI's commands and flags

/** `harmony-sidecar --help` and each command's, read once. */
const help = (args: string[]) => execFileSync(process.execPath, [CLI, ...args, "--help"], { encoding: "utf8" });
const COMMANDS = [...help([]).matchAll(/^ {2}([a-z][a-z-]*)(?: \[options\]| \[command\])? {2,}/gm)]
  .map((m) => m[1]!)
  .filter((c) => c !== "help");

interface CliOption {
  flag: string;
  /** Its description in --help, lines joined. */
  text: string;
}
/** Each command's options as its --help lists them (entries only, not flags its descriptions mention). */
const OPTIONS = new Map<string, CliOption[]>(
  [...COMMANDS, ""].map((cmd) => {
    const lines = help(cmd ? [cmd] : []).split("\n");
    const out: CliOption[] = [];
    for (const line of lines) {
      const entry = /^ {2}(?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)(?: [<[][^>\]]+[>\]])?(?: {2,}(.*))?$/.exec(line);
      if (entry) out.push({ flag: entry[1]!, text: entry[2] ?? "" });
      else if (/^ {6,}\S/.test(line) && out.length > 0) out.at(-1)!.text += ` ${line.trim()}`;
    }
    return [cmd, out];
  }),
);
const CLI_FLAGS = new Set([...OPTIONS.values()].flat().map((o) => o.flag));

/**
 * Flags the docs name that belong to other programs, with whose they are. Each must still be named
 * somewhere (so the list does not outlive its use); a benchmark's or a script's must be in its source.
 */
const OTHER_FLAGS: Record<string, string> = {
  "--max-old-space-size": "node",
  "--trace-gc-nvp": "V8",
  "--heap-growing-percent": "V8",
  "--max-inlined-bytecode-size-cumulative": "V8",
  "--api-key": "vLLM, SGLang, trtllm-serve, llama-server",
  "--enable-prompt-tokens-details": "vLLM",
  "--generation-config": "vLLM",
  "--enable-metrics": "SGLang",
  "--metrics": "llama-server",
  "--special": "llama-server",
  "--model-server-metrics-port": "the Gateway API inference extension's endpoint picker",
  "--build-arg": "docker build",
  "--from-literal": "kubectl create secret",
  "--dry-run": "kubectl apply",
  "--omit": "npm ci",
  "--scan": "redis-cli",
  "--pattern": "redis-cli",
  "--write": "scripts/architecture.mjs",
  "--client-heap-growth": "bench/",
  "--server-flags": "bench/",
  "--sched": "bench/",
  "--baseline": "bench/",
};

/** Every `--flag` a text names. */
function flagsIn(text: string): string[] {
  return [...text.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])/g)].map((m) => m[1]!);
}

/** The command lines of a doc that run one of the CLI's commands: (command, its arguments up to a comment, a pipe or the end of the code). */
function commandLines(text: string): { cmd: string; args: string; line: string }[] {
  const joined = text.replace(/\\\n\s*/g, " ");
  const out: { cmd: string; args: string; line: string }[] = [];
  const re = new RegExp(`(?:harmony-sidecar |\`)(${COMMANDS.join("|")}) ((?:--|[^\`\\n|#])[^\`\\n|#]*)`, "g");
  for (const m of joined.matchAll(re)) {
    const before = joined[m.index];
    if (before === "`" && !m[2]!.startsWith("--")) continue; // prose such as `render` of one word, not a command line
    out.push({ cmd: m[1]!, args: m[2]!, line: m[0] });
  }
  return out;
}

// ---------------------------------------------------------------- values

const UNITS: Record<string, number> = { ms: 1, s: 1000, min: 60_000, h: 3_600_000, KiB: 1024, MiB: 1 << 20, GiB: 1 << 30 };

/** A default as a doc writes it (`120 s`, `4 MiB`, `262,144`, `` `drop` ``), as the setting holds it. */
function docValue(raw: string): string {
  const v = raw.trim().replace(/^[`"]|[`"]$/g, "");
  const m = /^(\d[\d,]*(?:\.\d+)?) ?(ms|s|min|h|KiB|MiB|GiB)?$/.exec(v);
  if (!m) return v;
  return String(Number(m[1]!.replace(/,/g, "")) * (m[2] ? UNITS[m[2]]! : 1));
}

/** A setting's default as the docs would say it, and what its help says the default stands for (`0: 75% of the heap limit`). */
function settingDefaults(s: Setting): string[] {
  const d = String(s.default);
  const meaning = new RegExp(`\\(${d}: ([^;)]+)`).exec(s.help);
  return [d === "" ? "none" : d, ...(meaning ? [meaning[1]!.trim()] : [])];
}

/** A flag's default as --help shows it (commander's `(default: "x")`), for the commands other than serve. */
function helpDefaults(flag: string): string[] {
  const out: string[] = [];
  for (const [, opts] of OPTIONS)
    for (const o of opts.filter((x) => x.flag === flag)) {
      for (const m of o.text.matchAll(/default:? "?([^",)]+)"?/g)) out.push(m[1]!.trim());
    }
  return out;
}

const BY_FLAG = new Map(SETTINGS.map((s) => [s.flag.split(" ")[0]!, s as Setting]));

/** The defaults a flag has: its settings row's, or what --help gives for it. */
function defaultsOf(flag: string): string[] {
  const s = BY_FLAG.get(flag);
  return s ? settingDefaults(s) : helpDefaults(flag);
}

/**
 * Prose claims of one of the CLI's flags' default: "`--flag`, default 120 s", "`--flag` (default 16)",
 * "`--flag` (4 MiB)", "`--flag v` (the default)", "`--flag`, 100,000 by default". (Other programs' flags
 * are not read: their defaults are theirs.)
 */
function defaultClaims(text: string): { flag: string; value: string; quote: string }[] {
  const t = flat(text);
  const out: { flag: string; value: string; quote: string }[] = [];
  const unit = "(?: ?(?:ms|s|min|h|KiB|MiB|GiB)\\b)";
  const value = `(\`[^\`]+\`|\\d+% of [a-z ]+|\\d[\\d,.]*${unit}?)`;
  // a bare "(N)" after a flag is a default only with a unit or thousands: "(413)" is a status
  const size = `(\\d[\\d.]*${unit}|\\d{1,3}(?:,\\d{3})+)`;
  const forms = [
    new RegExp(`\`(--[a-z-]+)(?: <[^>]+>)?\`[^\`.;]{0,25}?\\bdefault:? ${value}`, "g"),
    new RegExp(`\`(--[a-z-]+)\` \\(${size}\\)`, "g"),
    new RegExp(`\`(--[a-z-]+)\`,? ${value} by default`, "g"),
    new RegExp(`\`(--[a-z-]+) ([^\`\\s]+)\`,? \\(?(?:the )?default\\b`, "g"),
  ];
  for (const re of forms)
    for (const m of t.matchAll(re)) if (CLI_FLAGS.has(m[1]!)) out.push({ flag: m[1]!, value: m[2]!.trim(), quote: m[0] });
  return out;
}

// ---------------------------------------------------------------- the tests

describe("the docs point at what is there", () => {
  it("every repo path a doc names exists (globs match something)", () => {
    const missing: string[] = [];
    for (const [doc, text] of DOCS) for (const p of pathsIn(text)) if (!pathExists(p)) missing.push(`${doc}: ${p}`);
    expect(missing).toEqual([]);
  });

  it("every repo path a comment in src/ names exists", () => {
    const missing: string[] = [];
    for (const file of walk("src", (f) => f.endsWith(".ts")))
      for (const p of pathsIn(commentsOf(read(file)))) if (!pathExists(p)) missing.push(`${file}: ${p}`);
    expect(missing).toEqual([]);
  });

  it("every relative link resolves, to a heading that is there when it names one", () => {
    const broken: string[] = [];
    for (const [doc, text] of DOCS)
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#");
        const abs = file ? path.resolve(ROOT, path.dirname(doc), file) : path.join(ROOT, doc);
        if (!existsSync(abs)) {
          broken.push(`${doc}: ${target}`);
          continue;
        }
        if (anchor && statSync(abs).isFile() && !sectionsOf(readFileSync(abs, "utf8")).headings.map(slug).includes(anchor))
          broken.push(`${doc}: ${target} (no such heading)`);
      }
    expect(broken).toEqual([]);
  });

  it("every Markdown file a doc names is in the repository", () => {
    const mdFiles = new Set(walk(".", (f) => f.endsWith(".md") && !f.includes("node_modules/")).map((f) => path.basename(f)));
    const missing: string[] = [];
    for (const [doc, text] of DOCS)
      for (const m of text.replace(/\]\([^)]*\)/g, "").matchAll(/(?<![\w/.-])([A-Za-z][\w-]*\.md)\b/g)) {
        const before = text.slice(Math.max(0, m.index - 40), m.index);
        if (/[\w-]+\/[\w.-]+[\s`]*(?:docs\/)?$/.test(before)) continue; // another repository's file
        if (!mdFiles.has(m[1]!)) missing.push(`${doc}: ${m[1]}`);
      }
    expect(missing).toEqual([]);
  });

  it('every section a doc or a comment quotes (README, "Use with vLLM") is one of that doc\'s headings or paragraph leads', () => {
    const sources = [...DOCS, ...walk("src", (f) => f.endsWith(".ts")).map((f) => [f, commentsOf(read(f))] as const)];
    const bad: string[] = [];
    for (const [from, text] of sources)
      for (const m of flat(text).matchAll(/\b(README(?:\.md)?|(?:docs\/|bench\/)?[\w-]+\.md),? "([^"]+)"/g)) {
        const named = m[1]!.startsWith("README") ? "README.md" : m[1]!.includes("/") ? m[1]! : `docs/${m[1]}`;
        if (!existsSync(path.join(ROOT, named))) continue; // another repository's document (the paths test covers ours)
        const { headings, leads } = sectionsOf(read(named));
        if (![...headings, ...leads].some((h) => h === m[2] || h.startsWith(`${m[2]}:`))) bad.push(`${from}: ${m[0]}`);
      }
    expect(bad).toEqual([]);
  });

  it("README's layout table has a row for every module of src/ (and workers/)", () => {
    const rows = [...README.matchAll(/^\| `([^`]+)`(?:, `([^`]+)`)? \|/gm)].flatMap((m) => [m[1]!, m[2]].filter(Boolean) as string[]);
    const modules = readdirSync(path.join(ROOT, "src"), { withFileTypes: true }).map((e) =>
      e.isDirectory() ? `src/${e.name}/` : `src/${e.name}`,
    );
    if (existsSync(path.join(ROOT, "workers"))) modules.push("workers/");
    expect(modules.filter((m) => !rows.includes(m))).toEqual([]);
  });
});

describe("the docs name the settings and flags there are", () => {
  it("reads the CLI's commands and their flags", () => {
    expect(COMMANDS).toEqual(["parse", "serve", "render", "loadtest", "simulate-engine"]);
    expect(CLI_FLAGS).toContain("--upstream-timeout-ms");
    expect(CLI_FLAGS).toContain("--fault-rate");
    expect(CLI_FLAGS).not.toContain("--heap-growing-percent"); // named in serve's help text, not one of its flags
  });

  it("every flag a doc names is one of the CLI's, or another program's on the list", () => {
    const unknown: string[] = [];
    for (const [doc, text] of DOCS)
      for (const flag of flagsIn(text)) if (!CLI_FLAGS.has(flag) && !(flag in OTHER_FLAGS)) unknown.push(`${doc}: ${flag}`);
    expect([...new Set(unknown)]).toEqual([]);
  });

  it("every flag on the list of other programs' is still named, and a benchmark's or script's is in its source", () => {
    const named = new Set([...DOCS.values()].flatMap((t) => flagsIn(t)));
    const sources = (dir: string) => walk(dir, (f) => /\.(ts|mjs)$/.test(f)).map(read);
    const stale: string[] = [];
    for (const [flag, owner] of Object.entries(OTHER_FLAGS)) {
      if (!named.has(flag)) stale.push(`${flag} (${owner}): named in no doc`);
      if (owner === "bench/" && !sources("bench").some((t) => t.includes(flag))) stale.push(`${flag}: no benchmark reads it`);
      if (owner.startsWith("scripts/") && !read(owner).includes(flag)) stale.push(`${flag}: ${owner} does not read it`);
      if (CLI_FLAGS.has(flag)) stale.push(`${flag}: is the CLI's own now`);
    }
    expect(stale).toEqual([]);
  });

  it("a command line in a doc gives its command only that command's flags", () => {
    const wrong: string[] = [];
    let lines = 0;
    for (const [doc, text] of DOCS)
      for (const { cmd, args, line } of commandLines(text)) {
        lines++;
        const own = new Set(OPTIONS.get(cmd)!.map((o) => o.flag));
        for (const flag of flagsIn(args)) if (!own.has(flag)) wrong.push(`${doc}: ${flag} is not a flag of ${cmd} (${line.trim()})`);
      }
    expect(lines).toBeGreaterThan(20);
    expect(wrong).toEqual([]);
  });

  it("every HARMONY_* variable a doc names is a setting's", () => {
    const envs = new Set<string>(SETTINGS.map((s) => s.env));
    const unknown: string[] = [];
    for (const [doc, text] of DOCS)
      for (const m of text.matchAll(/\bHARMONY_[A-Z0-9_]+\b/g)) if (!envs.has(m[0])) unknown.push(`${doc}: ${m[0]}`);
    expect(unknown).toEqual([]);
  });

  it("docs/protocol.md's settings table gives each setting's default", () => {
    const rows = [...DOCS.get("docs/protocol.md")!.matchAll(/^\| .+ \| `(--[a-z-]+)` \| `HARMONY_[A-Z_]+` \| (.+) \|$/gm)];
    expect(rows.length).toBe(SETTINGS.length);
    const wrong: string[] = [];
    for (const [, flag, cell] of rows) {
      if (flag === "--workers") continue; // computed from the cores: the next test
      const said = docValue(cell!.replace(/ \(.*\)$/, "").replace(/^none$/, "none"));
      if (!settingDefaults(BY_FLAG.get(flag!)!).includes(said))
        wrong.push(`${flag}: the table says ${cell}, the settings table ${BY_FLAG.get(flag!)!.default}`);
    }
    expect(wrong).toEqual([]);
  });

  it("the default worker count is what docs/protocol.md and README say: 0 on 1–2 cores, CPU count − 1 (at most 8) on more", () => {
    const doc = DOCS.get("docs/protocol.md")!;
    expect(doc).toContain("0 on 1–2 cores; CPU count − 1 (at most 8) on more");
    expect(flat(README)).toContain("With 3 or more cores the default is CPU count − 1 workers (at most 8)");
    expect([1, 2, 3, 4, 9, 10, 64].map(defaultWorkers)).toEqual([0, 0, 2, 3, 8, 8, 8]);
  });

  it("every default a doc's prose gives a flag is that flag's default", () => {
    const claims = [...DOCS].flatMap(([doc, text]) => defaultClaims(text).map((c) => ({ doc, ...c })));
    expect(claims.length).toBeGreaterThan(15);
    const wrong = claims
      .filter((c) => !defaultsOf(c.flag).map(docValue).includes(docValue(c.value)))
      .map((c) => `${c.doc}: "${c.quote}" but ${c.flag}'s default is ${defaultsOf(c.flag).join(" / ") || "none given"}`);
    expect(wrong).toEqual([]);
  });
});

describe("the docs quote the codes and messages there are", () => {
  const ALL_CODES = new Set<string>([
    ...Object.keys(codes.PARSE_ERROR_CODES),
    ...Object.keys(codes.INPUT_ERROR_CODES),
    ...Object.keys(codes.SERVICE_ERROR_CODES),
    ...Object.keys(codes.REQUEST_ERROR_CODES),
    ...Object.keys(codes.RENDER_ERROR_CODES),
    ...Object.keys(codes.HTTP_ERROR_CODES),
    ...Object.keys(codes.PROCESS_ERROR_CODES),
    ...codes.RECOVERY_KINDS,
  ]);

  it("every code in a doc table's code column is in src/core/errors.ts", () => {
    const unknown: string[] = [];
    let cells = 0;
    for (const [doc, text] of DOCS) {
      const lines = text.split("\n");
      for (let i = 0; i + 1 < lines.length; i++) {
        if (!/^\|.*\|$/.test(lines[i]!) || !/^\|[-| :]+\|$/.test(lines[i + 1]!)) continue;
        const header = lines[i]!.split("|").map((c) => c.trim());
        const col = header.findIndex((c) => c === "code");
        if (col < 0) continue;
        for (let j = i + 2; j < lines.length && lines[j]!.startsWith("|"); j++) {
          const cell = lines[j]!.split(/(?<!\\)\|/)[col] ?? "";
          for (const m of cell.matchAll(/`([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+)`/g)) {
            cells++;
            if (!ALL_CODES.has(m[1]!)) unknown.push(`${doc}: ${m[1]}`);
          }
        }
      }
    }
    expect(cells).toBeGreaterThan(60);
    expect(unknown).toEqual([]);
  });

  it("every message docs/errors.md quotes is one the code can give", () => {
    // the string and template literals of src/core/, a template's substitutions as wildcards
    const literals: RegExp[] = [];
    for (const file of walk("src/core", (f) => f.endsWith(".ts"))) {
      const visit = (node: ts.Node): void => {
        if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) literals.push(new RegExp(`^${escape(node.text)}$`));
        else if (ts.isTemplateExpression(node))
          literals.push(new RegExp(`^${[node.head.text, ...node.templateSpans.map((s) => s.literal.text)].map(escape).join(".+?")}$`));
        ts.forEachChild(node, visit);
      };
      visit(ts.createSourceFile(file, read(file), ts.ScriptTarget.ES2022, true));
    }
    const quoted = [...DOCS.get("docs/errors.md")!.matchAll(/Message: `([^`]+)`/g)].map((m) => m[1]!.replace(/\\\|/g, "|"));
    expect(quoted.length).toBeGreaterThan(5);
    const sample = (q: string) => q.replace(/\{[a-z]+\}/g, "X");
    expect(quoted.filter((q) => !literals.some((re) => re.test(sample(q))))).toEqual([]);
  });

  it("unknown_op's text names every op a frame can carry", () => {
    const ops = Object.keys(FIELDS.Op);
    expect(ops).toContain("render");
    const docRow = /^\| `unknown_op` \| (.*) \|$/m.exec(DOCS.get("docs/errors.md")!)![1]!;
    for (const op of ops) {
      expect(codes.SERVICE_ERROR_CODES.unknown_op, op).toContain(op);
      expect(docRow, op).toContain(`\`${op}\``);
    }
  });
});

describe("the docs give the counts there are", () => {
  const cases = read("test/fixtures/realworld/cases.jsonl")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { engine: string; ambiguous: boolean });
  const faults = new Set(
    read("test/fixtures/conformance/malformed.jsonl")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => (JSON.parse(l) as { fault: string }).fault),
  );
  /** The number a doc gives in the first group of `re` (in its text with lines joined). */
  const said = (doc: string, re: RegExp): number => {
    const m = re.exec(flat(doc === "README.md" || doc.startsWith("docs/") ? DOCS.get(doc)! : read(doc)));
    expect(m, `${doc} says ${re}`).not.toBeNull();
    return Number(m![1]!.replace(/,/g, ""));
  };
  const WORDS: Record<string, number> = { one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10 };

  it("the real-world outputs: how many, from where, how many unambiguous (README, the fixtures' README)", () => {
    expect(said("README.md", /holds (\d+) real gpt-oss outputs/)).toBe(cases.length);
    expect(said("test/fixtures/realworld/README.md", /There are (\d+) cases/)).toBe(cases.length);
    expect(said("README.md", /all (\d+) unambiguous ones/)).toBe(cases.filter((c) => !c.ambiguous).length);
    const last = said("README.md", /The (\d+) added last/);
    expect(said("README.md", /got \d+ of their (\d+) unambiguous ones/)).toBe(cases.slice(-last).filter((c) => !c.ambiguous).length);
    // "(llama.cpp 19, LM Studio 17, …, mlx-lm, TensorRT-LLM 1 each, 8 others; each with its source)"
    const ENGINE: Record<string, string> = {
      "llama.cpp": "llama.cpp",
      "LM Studio": "lmstudio",
      Ollama: "ollama",
      vLLM: "vllm",
      Cline: "cline",
      "Roo Code": "roo-code",
      "mlx-lm": "mlx-lm",
      "TensorRT-LLM": "tensorrt-llm",
      others: "other",
    };
    const list = /real gpt-oss outputs quoted in public bug reports and logs \(([^;]+);/.exec(flat(README))![1]!;
    const byEngine: Record<string, number> = {};
    let waiting: string[] = []; // names before "N each"
    for (const part of list.split(", ")) {
      const m = /^(?:(\d+) (.+)|(.+?) (\d+)( each)?|(.+))$/.exec(part)!;
      const [name, n] = m[1] ? [m[2]!, m[1]] : m[3] ? [m[3], m[4]!] : [m[6]!, undefined];
      waiting.push(name);
      if (n === undefined) continue;
      for (const w of m[5] ? waiting : [name]) byEngine[ENGINE[w] ?? w] = Number(n);
      waiting = [];
    }
    expect(waiting).toEqual([]);
    const counted: Record<string, number> = {};
    for (const c of cases) counted[c.engine] = (counted[c.engine] ?? 0) + 1;
    expect(byEngine).toEqual(counted);
  });

  it("the fault kinds: the conformance corpus's, the load tester's and the real-world shapes (README, docs/loadtest.md)", () => {
    expect(said("README.md", /the (\d+) kinds of the conformance corpus's fault catalogue/)).toBe(faults.size);
    // "plus ids out of range between messages and truncation at any token": the load tester's own two
    expect(FAULT_KINDS.filter((k) => !faults.has(k))).toEqual(["invalid_id_between_messages", "truncated_anywhere"]);
    for (const doc of ["README.md", "docs/loadtest.md"]) {
      expect(said(doc, /(\d+) synthetic kinds/)).toBe(FAULT_KINDS.length);
      expect(said(doc, /(\d+) real-world shapes/)).toBe(REAL_FAULT_KINDS.length);
    }
    expect(help(["loadtest"])).toContain(`(${FAULT_KINDS.length} kinds)`);
  });

  it("the commands and the engines (README)", () => {
    const five = /the `harmony-sidecar` binary's (\w+) commands \(([^)]+)\)/.exec(flat(README))!;
    expect(WORDS[five[1]!]).toBe(COMMANDS.length);
    expect([...five[2]!.matchAll(/`([a-z-]+)`/g)].map((m) => m[1])).toEqual(COMMANDS);
    const kinds = /--upstream-kind ((?:[a-z]+ \| )+[a-z]+)/.exec(README)![1]!.split(" | ");
    // and the layout's rows for src/upstream/ (README, docs/architecture.md) name every engine
    const NAMES: Record<string, string> = { vllm: "vLLM", sglang: "SGLang", trtllm: "TensorRT-LLM", llamacpp: "llama.cpp" };
    const rows = [
      /^\| `src\/upstream\/` \| (.*) \|$/m.exec(README)![1]!,
      /^\| `upstream` \| (.*) \|$/m.exec(DOCS.get("docs/architecture.md")!)![1]!,
    ];
    for (const kind of ENGINE_KINDS.filter((k) => k !== "auto")) for (const row of rows) expect(row, kind).toContain(NAMES[kind]);
    expect(["vllm", ...kinds]).toEqual(ENGINE_KINDS); // "--upstream-kind sglang | trtllm | llamacpp | auto", vllm being the default
  });

  it("limits the docs give as numbers (README, docs/security.md, docs/errors.md, docs/protocol.md, docs/resilience.md)", () => {
    expect(said("README.md", /JSON nested past (\d+) levels/)).toBe(MAX_JSON_DEPTH);
    expect(said("docs/security.md", /nested at most (\d+) deep/)).toBe(MAX_JSON_DEPTH);
    expect(said("docs/errors.md", /nested deeper than (\d+) arrays and objects/)).toBe(MAX_JSON_DEPTH);
    expect(said("docs/errors.md", /A `--batch` line longer than (\d+) MiB/) * 2 ** 20).toBe(MAX_BATCH_LINE_BYTES);
    expect(said("README.md", /repeated more than (\d+) times/)).toBe(REPEAT_LIMIT);
    expect(said("README.md", /is cut after the (\d+)th/)).toBe(REPEAT_LIMIT);
    expect(said("README.md", /a call's first (\d+) Ki characters/) * 1024).toBe(MAX_STREAMED_ARGUMENT_CHARS);
    expect(said("docs/protocol.md", /at most (\d+) names of at most \d+ characters/)).toBe(MAX_TOOLS);
    expect(said("docs/protocol.md", /at most \d+ names of at most (\d+) characters/)).toBe(MAX_TOOL_NAME);
    expect(said("docs/resilience.md", /`after_stop` keeps at most (\d+) KiB/) * 1024).toBe(AFTER_STOP_RAW_BYTES);
    expect(said("README.md", /The main thread parses the first (\d+) streams itself/)).toBe(DEFAULTS.inline);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
