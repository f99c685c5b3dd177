/** The one settings table (src/commands/settings.ts) against docs/protocol.md and `serve --help`. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { helpText, SETTINGS, SettingsReader } from "../../src/commands/settings.js";

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
