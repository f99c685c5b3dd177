/** docs/errors.md is the one table of codes: keep it and the code in step. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { INPUT_ERROR_CODES, PARSE_ERROR_CODES, SERVICE_ERROR_CODES } from "../src/core/errors.js";
import { RECOVERY_KINDS } from "../src/core/events.js";

const doc = readFileSync(new URL("../docs/errors.md", import.meta.url), "utf8");
const codesIn = (section: string) =>
  [
    ...doc
      .split(section)[1]!
      .split("\n## ")[0]!
      .matchAll(/^\| `([a-z_]+)` \|/gm),
  ].map((m) => m[1]);

describe("docs/errors.md", () => {
  it("documents every parser error code", () => {
    const documented = codesIn("## Error codes");
    for (const code of Object.keys(PARSE_ERROR_CODES)) expect(documented).toContain(code);
    for (const code of Object.keys(INPUT_ERROR_CODES)) expect(documented).toContain(code);
    for (const code of Object.keys(SERVICE_ERROR_CODES)) expect(documented).toContain(code);
  });
  it("documents exactly the recovery kinds", () => {
    expect(codesIn("## Recovery kinds").sort()).toEqual([...RECOVERY_KINDS].sort());
  });
});
