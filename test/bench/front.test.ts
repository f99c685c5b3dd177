/**
 * bench/front end to end, tiny: two streams of a short completion flat out,
 * one round, every set-up (the floor too), two sidecars by label. Checks what the figures
 * rest on: every set-up's row is reported, every token the engine sent
 * arrived through each of them (the same count everywhere), the fronts'
 * deltas add up to the text of the engine's message bodies, and each
 * process's CPU was read.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const MAIN = fileURLToPath(new URL("../../dist/bench/front/main.js", import.meta.url));
const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), "bench-front-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  setup: string;
  streams: number;
  tokens: number;
  expectedTokens: number;
  chars: number;
  expectedChars: number | null;
  errors: string[];
  tokensPerS: number;
  ttftP99Ms: number;
  engineUsPerToken: number;
  frontUsPerToken: number | null;
}

describe("bench/front", () => {
  it("delivers every token through every set-up and reports a row for each", async () => {
    const json = path.join(dir, "front.json");
    const args = [MAIN, "--streams", "2", "--tokens", "24", "--rate", "0", "--rounds", "1", "--warmup", "0", "--json", json];
    args.push("--sidecar", `a=${CLI}`, "--sidecar", `b=${CLI}`);
    const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 180_000 });
    const setups = ["engine", "relay", "floor", "in-place", "chat a", "responses a", "ws a", "chat b", "responses b", "ws b"];
    for (const s of setups) expect(stdout).toContain(`| 2 | ${s} |`);
    expect(stdout).not.toContain("**no**");
    // the second sidecar against the first, set-up by set-up
    expect(stdout).toContain("### against the sidecar a");
    for (const s of ["chat b", "responses b", "ws b"]) expect(stdout).toContain(`| flat out | 2 | ${s} |`);

    const out = JSON.parse(readFileSync(json, "utf8")) as { idsPerCompletion: number; charsPerCompletion: number; runs: Run[] };
    expect(out.idsPerCompletion).toBe(24);
    expect(out.charsPerCompletion).toBeGreaterThan(0);
    expect(out.runs.map((r) => r.setup).sort()).toEqual([...setups].sort());
    for (const r of out.runs) {
      expect(r.errors, r.setup).toEqual([]);
      expect(r.tokens, r.setup).toBe(2 * 24);
      expect(r.expectedTokens).toBe(2 * 24);
      if (r.setup === "engine" || r.setup === "relay") expect(r.expectedChars).toBeNull();
      else expect(r.chars, r.setup).toBe(2 * out.charsPerCompletion);
      expect(r.tokensPerS).toBeGreaterThan(0);
      expect(r.ttftP99Ms).toBeGreaterThan(0);
      expect(Number.isFinite(r.engineUsPerToken)).toBe(true);
      if (r.setup === "engine") expect(r.frontUsPerToken).toBeNull();
      else expect(Number.isFinite(r.frontUsPerToken)).toBe(true);
    }
  });
});
