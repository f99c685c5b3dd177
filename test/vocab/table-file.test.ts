/**
 * The vocabulary table file (src/vocab/table-file.ts): what a process reads
 * at start is byte for byte the table tiktoken builds, and a file that is
 * stale, cut short or not a table at all is refused with a reason (then
 * rebuilt), never read as a table and never a crash.
 */
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { Tiktoken } from "tiktoken/lite";
import { afterAll, describe, expect, it } from "vitest";
import { HARMONY } from "../../src/core/preset.js";
import { loadHarmonyEncoding, tableFilePath } from "../../src/vocab/index.js";
import { decodeTableFile, encodeTableFile, TABLE_FILE_NAME } from "../../src/vocab/table-file.js";
import { buildFromTiktoken, ranksChecksum, specialsMap } from "../../src/vocab/tiktoken.js";
import { fcParams as params } from "../helpers.js";

const o200k = createRequire(import.meta.url)("tiktoken/encoders/o200k_base.json") as { bpe_ranks: string; pat_str: string };
const dir = mkdtempSync(path.join(tmpdir(), "vocab-table-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fromTiktoken = buildFromTiktoken(HARMONY, false);
const checksum = ranksChecksum(HARMONY);
const expected = { checksum, size: HARMONY.vocabLimit, ordinaryLimit: HARMONY.firstSpecial };

function bytesOf(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

describe("the table file", () => {
  it("the build's file holds exactly the table and lookup built from tiktoken", () => {
    const read = loadHarmonyEncoding();
    expect(read.source).toBe("file");
    expect(read.note).toBe("");
    const t = read.table;
    const want = fromTiktoken.table;
    expect(t.size).toBe(want.size);
    expect(bytesOf(t.offsets).equals(bytesOf(want.offsets))).toBe(true);
    expect(bytesOf(t.bytes).equals(bytesOf(want.bytes))).toBe(true);
    expect(bytesOf(t.flags).equals(bytesOf(want.flags))).toBe(true);
    const file = readFileSync(tableFilePath());
    expect(file.equals(Buffer.from(encodeTableFile(fromTiktoken, checksum)))).toBe(true);
  });

  it("is read onto one SharedArrayBuffer when the table is to be shared with worker threads", () => {
    const shared = loadHarmonyEncoding({ shared: true });
    expect(shared.source).toBe("file");
    for (const a of [shared.table.offsets, shared.table.bytes, shared.table.flags]) expect(a.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(shared.table.bytes.buffer).toBe(shared.table.offsets.buffer);
    const text = "<|start|>assistant<|channel|>final<|message|>Hi ☀️ 喵";
    const ref = new Tiktoken(o200k.bpe_ranks, specialsMap(HARMONY), o200k.pat_str);
    expect(shared.encode(text)).toEqual(Array.from(ref.encode(text, "all")));
    ref.free();
  });

  it("a missing file is built and written; the next load reads it", () => {
    const file = path.join(dir, "fresh", TABLE_FILE_NAME);
    const first = loadHarmonyEncoding({ file });
    expect(first.source).toBe("tiktoken");
    expect(first.note).toMatch(/there is no table file yet; built from tiktoken and written/);
    const second = loadHarmonyEncoding({ file });
    expect(second.source).toBe("file");
    expect(readFileSync(file).equals(Buffer.from(encodeTableFile(fromTiktoken, checksum)))).toBe(true);
  });

  it("a file built from other ranks (another checksum) is rebuilt", () => {
    const file = path.join(dir, "stale.bin");
    const other = Uint8Array.from(checksum);
    other[0]! ^= 1;
    writeFileSync(file, encodeTableFile(fromTiktoken, other));
    const enc = loadHarmonyEncoding({ file });
    expect(enc.source).toBe("tiktoken");
    expect(enc.note).toMatch(/built from other ranks or specials/);
    expect(loadHarmonyEncoding({ file }).source).toBe("file");
  });

  it("a place that cannot be written costs the cache, not the table", () => {
    const enc = loadHarmonyEncoding({ file: "/dev/null/o200k_harmony.bin" });
    expect(enc.source).toBe("tiktoken");
    expect(enc.note).toMatch(/not written/);
    expect(enc.encodeOrdinary("hello world")).toEqual(loadHarmonyEncoding().encodeOrdinary("hello world"));
  });

  it("bytes that are not a whole table of this build are refused with a reason, never read and never thrown on", () => {
    const good = encodeTableFile(fromTiktoken, checksum);
    const cases: [Uint8Array, RegExp][] = [
      [good.subarray(0, 10), /shorter than its header/],
      [good.subarray(0, good.length - 1), /its header says/],
      [Uint8Array.from([...good.subarray(0, 64), ...good.subarray(64, 200)]), /its header says/],
      [new Uint8Array(good.length), /not a vocabulary table/],
    ];
    for (const [bytes, why] of cases) expect(decodeTableFile(Uint8Array.from(bytes).buffer, expected)).toMatch(why);
    const format = Uint8Array.from(good);
    format[4] = 99;
    expect(decodeTableFile(format.buffer, expected)).toMatch(/format is 99/);
    // any header fields, on the real body: the table, or a reason
    const header = good.subarray(0, 64);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 63 }), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
        (edits) => {
          const bytes = Uint8Array.from(good);
          for (const [at, v] of edits) bytes[at] = v;
          const out = decodeTableFile(bytes.buffer, expected);
          // judged on the header as left, not edit by edit: a later edit may put a byte back
          const same = bytes.subarray(0, 64).every((b, i) => b === header[i]);
          if (same) expect(typeof out).toBe("object");
          else expect(typeof out).toBe("string");
        },
      ),
      // the kind of case CI failed on: byte 8 changed, then put back (the old oracle wanted a refusal)
      params(300, [
        [
          [
            [8, 1],
            [8, header[8]!],
          ],
        ],
      ]),
    );
  });
});
