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

  it("every default passes its own row's checks", () => {
    const r = new SettingsReader({}, {});
    for (const s of SETTINGS) {
      if (s.type === "int") expect(r.int(s.key)).toBe(s.default);
      else expect(r.text(s.key)).toBe(String(s.default));
    }
  });

  it("bounds come from the row", () => {
    expect(() => new SettingsReader({ heapGrowth: "1001" }, {}).int("heapGrowth")).toThrow(
      /heapGrowth \(HARMONY_HEAP_GROWTH\) must be at most 1000/,
    );
    expect(() => new SettingsReader({}, { HARMONY_GRPC_PORT: "-2" }).int("grpcPort")).toThrow(/≥ -1/);
    expect(() => new SettingsReader({ reasoningField: "thinking" }, {}).text("reasoningField")).toThrow(/reasoning or reasoning_content/);
    expect(() => new SettingsReader({ upstream: "localhost:8000" }, {}).text("upstream")).toThrow(/http\(s\) URL/);
  });
});
