/**
 * The one settings table (src/commands/settings.ts) against docs/protocol.md
 * and `serve --help`, and its defaults against the code: each written once,
 * in src/core/defaults.ts.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { helpText, SETTINGS, SettingsReader } from "../../src/commands/settings.js";
import * as defaults from "../../src/core/defaults.js";

const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));

/** The (flag, variable) pairs of docs/protocol.md's settings table. */
const documented = [...doc.matchAll(/^\| [^|]+ \| `(--[a-z-]+)` \| `(HARMONY_[A-Z_]+)` \|/gm)].map((m) => [m[1]!, m[2]!]);
const inCode = SETTINGS.map((s) => [s.flag.split(" ")[0]!, s.env]);

describe("the settings table", () => {
  it("docs/protocol.md lists exactly its flags and variables", () => {
    expect([...documented].sort()).toEqual([...inCode].sort());
  });

  it("serve --help shows every flag with its variable and default", () => {
    const help = execFileSync(process.execPath, [CLI, "serve", "--help"], { encoding: "utf8" }).replace(/\s+/g, " ");
    for (const s of SETTINGS) expect(help).toContain(helpText(s).replace(/\s+/g, " "));
  });

  it("serve --help lists the basic settings first, the rest under Advanced, as docs/protocol.md says", () => {
    const help = execFileSync(process.execPath, [CLI, "serve", "--help"], { encoding: "utf8" });
    const advancedAt = help.indexOf("Advanced options");
    expect(advancedAt).toBeGreaterThan(0);
    const basic = SETTINGS.filter((s) => (s as { group?: string }).group === "basic").map((s) => s.flag.split(" ")[0]!);
    expect(basic.length).toBeGreaterThan(4);
    for (const s of SETTINGS) {
      const flag = s.flag.split(" ")[0]!;
      const at = help.search(new RegExp(`^  ${flag} `, "m"));
      expect(at, flag).toBeGreaterThan(0);
      expect(at < advancedAt, `${flag} listed ${at < advancedAt ? "before" : "after"} Advanced`).toBe(basic.includes(flag));
    }
    const sentence = /\(basic: ((?:`--[a-z-]+`,?\s*)+)\)/.exec(doc.replace(/\n/g, " "));
    expect(sentence, "docs/protocol.md names the basic settings").not.toBeNull();
    expect([...sentence![1]!.matchAll(/`(--[a-z-]+)`/g)].map((m) => m[1])).toEqual(basic);
    // and an example per command, with the name people can run
    expect(help).toMatch(/Examples:\n( {2}.*\n)* {2}\$ npx harmony-sidecar serve/);
  });

  it("every default passes its own row's checks", () => {
    const r = new SettingsReader({}, {});
    for (const s of SETTINGS) {
      if (s.type === "int") expect(r.int(s.key)).toBe(s.default);
      else expect(r.text(s.key)).toBe(String(s.default));
    }
  });

  it("docs/protocol.md gives each row's default", () => {
    const cells = new Map(
      [...doc.matchAll(/^\| [^|]+ \| `(--[a-z-]+)` \| `HARMONY_[A-Z_]+` \| (.+) \|$/gm)].map((m) => [m[1]!, m[2]!.trim()]),
    );
    const MiB = 1024 * 1024;
    for (const s of SETTINGS) {
      const flag = s.flag.split(" ")[0]!;
      const cell = cells.get(flag);
      expect(cell, flag).toBeDefined();
      if (s.key === "workers") {
        // a rule, not a number: defaultWorkers of the usable cores
        expect(cell).toContain(`${defaults.defaultWorkers(2)} on 1–2 cores`);
        expect(cell).toContain(`CPU count − 1 (at most ${defaults.defaultWorkers(1024)})`);
      } else if (s.default === "") expect(cell, flag).toMatch(/^none\b/);
      else if (typeof s.default === "string") expect(cell, flag).toBe(`\`${s.default}\``);
      else {
        const plain = cell!.replace(/^`(.*)`$/, "$1");
        const mib = /^(\d+) MiB$/.exec(plain);
        expect(mib ? Number(mib[1]) * MiB : Number(plain), `${flag}: ${cell}`).toBe(s.default);
      }
    }
  });

  it("bounds come from the row", () => {
    expect(() => new SettingsReader({ heapGrowth: "1001" }, {}).int("heapGrowth")).toThrow(
      /^--heap-growth must be an integer from 0 to 1000, got "1001"$/,
    );
    expect(() => new SettingsReader({}, { HARMONY_GRPC_PORT: "-2" }).int("grpcPort")).toThrow(
      /^--grpc-port \(set by HARMONY_GRPC_PORT\) must be an integer from -1 to 65535, got "-2"$/,
    );
    expect(() => new SettingsReader({ reasoningField: "thinking" }, {}).text("reasoningField")).toThrow(/reasoning or reasoning_content/);
    expect(() => new SettingsReader({ upstream: "localhost:8000" }, {}).text("upstream")).toThrow(/http\(s\) URL/);
  });
});

describe("each default is written once, in src/core/defaults.ts", () => {
  const root = new URL("../../", import.meta.url);
  const walk = (dir: string): string[] =>
    readdirSync(new URL(dir, root), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(`${dir}/${e.name}`) : e.name.endsWith(".ts") ? [`${dir}/${e.name}`] : [],
    );
  const files = [...walk("src"), ...walk("workers")].filter((f) => f !== "src/core/defaults.ts");
  /** Code without comments. */
  const code = (f: string) =>
    readFileSync(new URL(f, root), "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/(^|[^:"'`])\/\/.*$/gm, "$1");

  it("the table reads every row's default from it", () => {
    const table = code("src/commands/settings.ts");
    const rows = [...table.matchAll(/^ {4}default: (.+),$/gm)].map((m) => m[1]!);
    expect(rows.length).toBe(SETTINGS.length);
    for (const d of rows) expect(d, d).toMatch(/^(String\()?[A-Z0-9_]+_DEFAULTS\.|^defaultWorkers\(/);
  });

  /**
   * The defaults of other things than `serve`'s settings: the renderer's
   * system message as OpenAI's reference writes it, and the settings of
   * `simulate-engine` (a program of its own).
   */
  const NOT_SETTINGS = new Set(["DEFAULT_MODEL_IDENTITY", "DEFAULT_KNOWLEDGE_CUTOFF", "SIMULATOR_DEFAULTS"]);

  it("no other file holds a table of defaults: a DEFAULT constant elsewhere names src/core/defaults.ts's", () => {
    const written: string[] = [];
    for (const f of files)
      for (const m of code(f).matchAll(/\bconst ([A-Z0-9_]*DEFAULT[A-Z0-9_]*)\b[^=]*=\s*([^;]+);/g)) {
        if (NOT_SETTINGS.has(m[1]!)) continue;
        if (!/[A-Z0-9_]+_DEFAULTS\b|defaultWorkers\(/.test(m[2]!)) written.push(`${f}: ${m[1]} = ${m[2]!.slice(0, 60)}`);
      }
    expect(written).toEqual([]);
  });

  it("an option left out falls back to src/core/defaults.ts's value, never to the value written again", () => {
    // each option's default values, by name: the settings' rows and the groups' fields
    const values = new Map<string, Set<string>>();
    const add = (k: string, v: unknown) => values.set(k, (values.get(k) ?? new Set()).add(JSON.stringify(v)));
    // (workers' default is a rule of the machine's cores, not a value)
    for (const s of SETTINGS) if (s.key !== "workers") add(s.key, s.default);
    for (const group of Object.values(defaults))
      if (typeof group === "object") for (const [k, v] of Object.entries(group)) if (typeof v !== "object") add(k, v);
    const again: string[] = [];
    for (const f of files)
      for (const m of code(f).matchAll(/\b([A-Za-z]+)\s*\?\?\s*(-?\d[\d_]*|"[^"]*"|true|false)(?![\w.])/g)) {
        const literal = /^-?\d/.test(m[2]!) ? String(Number(m[2]!.replace(/_/g, ""))) : m[2]!;
        if (values.get(m[1]!)?.has(literal)) again.push(`${f}: ${m[1]} ?? ${m[2]}`);
      }
    expect(again).toEqual([]);
  });
});
