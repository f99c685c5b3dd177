/** docs/errors.md has the same code tables as src/core/errors.ts: each section lists exactly its table's codes. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  CLOSE_CODES,
  HTTP_ERROR_CODES,
  INPUT_ERROR_CODES,
  PARSE_ERROR_CODES,
  PROCESS_ERROR_CODES,
  RECOVERY_KINDS,
  RENDER_ERROR_CODES,
  REQUEST_ERROR_CODES,
  SERVICE_ERROR_CODES,
} from "../../src/core/errors.js";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");

/** The first column's codes of the table under the heading that starts with `section`. */
function codesIn(section: string): string[] {
  const parts = doc.split(`\n${section}`);
  expect(parts.length, `docs/errors.md has one section "${section}"`).toBe(2);
  const body = parts[1]!.split("\n## ")[0]!;
  return [...body.matchAll(/^\| `([a-z_0-9]+)` \|/gm)].map((m) => m[1]!);
}

const same = (documented: string[], code: readonly (string | number)[]) => expect([...documented].sort()).toEqual(code.map(String).sort());

describe("docs/errors.md and src/core/errors.ts list the same codes, both ways", () => {
  it("parse errors", () => same(codesIn("## Parse error codes"), Object.keys(PARSE_ERROR_CODES)));
  it("input errors", () => same(codesIn("## Input error codes"), Object.keys(INPUT_ERROR_CODES)));
  it("service errors", () => same(codesIn("## Service error codes"), Object.keys(SERVICE_ERROR_CODES)));
  it("request codes", () => same(codesIn("## Request codes"), Object.keys(REQUEST_ERROR_CODES)));
  it("render errors", () => same(codesIn("## Render error codes"), Object.keys(RENDER_ERROR_CODES)));
  it("HTTP API codes", () => same(codesIn("## HTTP API codes"), Object.keys(HTTP_ERROR_CODES)));
  it("process errors", () => same(codesIn("## Process error codes"), Object.keys(PROCESS_ERROR_CODES)));
  it("close codes, with their names", () => {
    same(codesIn("## Close codes"), Object.values(CLOSE_CODES));
    for (const [name, code] of Object.entries(CLOSE_CODES)) expect(doc).toContain(`| \`${code}\` | \`${name}\` |`);
  });
  it("recovery kinds", () => same(codesIn("## Recovery kinds"), RECOVERY_KINDS));
});
