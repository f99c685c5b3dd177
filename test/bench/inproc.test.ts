/**
 * bench/front/inproc, tiny: two streams of a short completion, one round,
 * tight and paced. Checks what its figures rest on: a row for every set-up
 * in both modes, every delta's text reached the sink in the host, path and
 * answer set-ups (the count bodyChars gives for the completion), the answer's
 * chunks and the baseline's writes reached the sockets, and each run's CPU
 * was read.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { Vocabulary } from "../../src/core/vocab.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { bodyChars, completionIds } from "../../bench/front/completion.js";

const MAIN = fileURLToPath(new URL("../../dist/bench/front/inproc.js", import.meta.url));

interface Run {
  setup: string;
  mode: string;
  usPerToken: number;
  chars: number;
  written: number;
}

describe("bench/front/inproc", () => {
  it("runs every set-up tight and paced, and each one's work reaches its sink and sockets", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "bench-inproc-"));
    const json = path.join(dir, "inproc.json");
    let stdout: string;
    let text: string;
    try {
      const args = [MAIN, "--streams", "2", "--tokens", "24", "--pace", "1", "--rounds", "1", "--json", json];
      ({ stdout } = await promisify(execFile)(process.execPath, args, { timeout: 180_000 }));
      text = readFileSync(json, "utf8");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    for (const mode of ["tight", "paced"])
      for (const s of ["write", "host", "path", "answer"]) expect(stdout).toContain(`| ${mode} | ${s} |`);
    expect(stdout).not.toContain("**no**");

    const out = JSON.parse(text) as { expectedChars: number; runs: Run[] };
    const enc = loadHarmonyEncoding();
    const vocab = new Vocabulary(enc.table);
    const ids = completionIds(24, (t) => enc.encodeOrdinary(t));
    expect(out.expectedChars).toBe(2 * bodyChars(ids, (id) => vocab.text(id)));
    expect(out.expectedChars).toBeGreaterThan(0);
    expect(out.runs).toHaveLength(8);
    for (const r of out.runs) {
      expect(r.usPerToken, `${r.mode} ${r.setup}`).toBeGreaterThan(0);
      if (r.setup === "write") expect(r.written).toBeGreaterThan(0);
      else expect(r.chars, `${r.mode} ${r.setup}`).toBe(out.expectedChars);
      if (r.setup === "answer") expect(r.written).toBeGreaterThan(out.expectedChars);
      if (r.setup === "path" || r.setup === "host") expect(r.written).toBe(0);
    }
  });
});
