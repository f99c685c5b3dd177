/**
 * The vocabulary table as one binary file, so a process or thread starts by
 * reading it instead of rebuilding it from tiktoken (which takes a second or
 * more). `npm run build` writes it beside the built module
 * (dist/src/vocab/o200k_harmony.bin); a process that finds it missing or
 * stale builds the table and writes it there (./encoding.ts).
 *
 * Layout, little-endian, every array 4-byte aligned:
 *
 *   0   magic "HSVT", format (u32), size, ordinary limit, byte count,
 *       slot count, longest token's bytes (u32 each), 4 bytes zero
 *   32  checksum (32 bytes): what the table was built from (tiktoken.ts)
 *   64  offsets: (size + 1) × u32
 *       slots: slot count × i32 (the BPE lookup, bpe.ts)
 *       flags: size × u8
 *       bytes: byte count × u8
 *
 * Read into one buffer (a SharedArrayBuffer for worker threads) and viewed
 * in place: nothing is copied or computed per id.
 */
import { closeSync, fstatSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { VocabTable } from "../core/vocab.js";
import { slotCount, type RankSlots } from "./bpe.js";

export const TABLE_FILE_NAME = "o200k_harmony.bin";

/** "HSVT" read as a little-endian u32. */
const MAGIC = 0x54565348;
/** Bumped whenever the layout above or what it holds changes. */
export const TABLE_FORMAT = 1;
const HEADER_BYTES = 64;
const CHECKSUM_AT = 32;
const CHECKSUM_BYTES = 32;
/** Far above o200k_harmony's ~1.4 MB of token bytes, so a corrupt header cannot ask for much. */
const MAX_BYTES = 1 << 26;

/** What a table file must hold to be used: built from `checksum`, for these many ids and ranks. */
export interface TableExpected {
  readonly checksum: Uint8Array;
  readonly size: number;
  readonly ordinaryLimit: number;
}

export interface TableData {
  readonly table: VocabTable;
  readonly ranks: RankSlots;
  /** The ids the BPE lookup covers: [0, ordinaryLimit). */
  readonly ordinaryLimit: number;
}

interface Layout {
  offsets: number;
  slots: number;
  flags: number;
  bytes: number;
  total: number;
}

function layout(size: number, slots: number, bytes: number): Layout {
  const offsets = HEADER_BYTES;
  const slotsAt = offsets + (size + 1) * 4;
  const flags = slotsAt + slots * 4;
  const bytesAt = flags + size;
  return { offsets, slots: slotsAt, flags, bytes: bytesAt, total: bytesAt + bytes };
}

/** The file's bytes for `data`, marked with `checksum`. */
export function encodeTableFile(data: TableData, checksum: Uint8Array): Uint8Array {
  const { table, ranks } = data;
  const at = layout(table.size, ranks.slots.length, table.bytes.length);
  const out = new Uint8Array(at.total);
  const head = new DataView(out.buffer);
  const fields = [MAGIC, TABLE_FORMAT, table.size, data.ordinaryLimit, table.bytes.length, ranks.slots.length, ranks.maxTokenBytes, 0];
  fields.forEach((v, i) => head.setUint32(i * 4, v, true));
  out.set(checksum.subarray(0, CHECKSUM_BYTES), CHECKSUM_AT);
  out.set(new Uint8Array(table.offsets.buffer, table.offsets.byteOffset, table.offsets.byteLength), at.offsets);
  out.set(new Uint8Array(ranks.slots.buffer, ranks.slots.byteOffset, ranks.slots.byteLength), at.slots);
  out.set(table.flags, at.flags);
  out.set(table.bytes, at.bytes);
  return out;
}

/**
 * The table held by a file's bytes, viewed in place; or why they are not
 * the table expected. The header is checked whole; the body is trusted as
 * written (whole, by writeTableFile), except that its offsets must end at
 * its byte count.
 */
export function decodeTableFile(buffer: ArrayBuffer | SharedArrayBuffer, expected: TableExpected): TableData | string {
  if (buffer.byteLength < HEADER_BYTES) return `the file is ${buffer.byteLength} bytes, shorter than its header`;
  const head = new DataView(buffer, 0, HEADER_BYTES);
  const u32 = (i: number) => head.getUint32(i * 4, true);
  if (u32(0) !== MAGIC) return "the file is not a vocabulary table";
  if (u32(1) !== TABLE_FORMAT) return `the file's format is ${u32(1)}, this build reads ${TABLE_FORMAT}`;
  const theirs = new Uint8Array(buffer, CHECKSUM_AT, CHECKSUM_BYTES);
  for (let i = 0; i < CHECKSUM_BYTES; i++)
    if (theirs[i] !== expected.checksum[i]) return "the file was built from other ranks or specials than tiktoken's now";
  const size = u32(2);
  const ordinaryLimit = u32(3);
  const byteCount = u32(4);
  const slots = u32(5);
  const maxTokenBytes = u32(6);
  if (
    size !== expected.size ||
    ordinaryLimit !== expected.ordinaryLimit ||
    slots !== slotCount(ordinaryLimit) ||
    byteCount > MAX_BYTES ||
    u32(7) !== 0
  ) {
    return "the file's header is corrupt";
  }
  const at = layout(size, slots, byteCount);
  if (at.total !== buffer.byteLength) return `the file is ${buffer.byteLength} bytes, its header says ${at.total}`;
  const offsets = new Uint32Array(buffer, at.offsets, size + 1);
  if (offsets[size] !== byteCount) return "the file's offsets do not end at its byte count";
  let longest = 0;
  for (let id = 0; id < ordinaryLimit; id++) longest = Math.max(longest, offsets[id + 1]! - offsets[id]!);
  if (longest !== maxTokenBytes) return "the file's header is corrupt";
  const table: VocabTable = {
    size,
    offsets,
    bytes: new Uint8Array(buffer, at.bytes, byteCount),
    flags: new Uint8Array(buffer, at.flags, size),
  };
  return { table, ranks: { slots: new Int32Array(buffer, at.slots, slots), maxTokenBytes }, ordinaryLimit };
}

/** Read `file` whole into one buffer (shared between threads when asked) and decode it; or why it cannot be used. */
export function readTableFile(file: string, expected: TableExpected, shared: boolean): TableData | string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT"
      ? "there is no table file yet"
      : `the file cannot be read: ${(e as Error).message}`;
  }
  try {
    const length = fstatSync(fd).size;
    if (length > MAX_BYTES * 2) return `the file is ${length} bytes, too large to be a vocabulary table`;
    const buffer = shared ? new SharedArrayBuffer(length) : new ArrayBuffer(length);
    const view = new Uint8Array(buffer);
    for (let at = 0; at < length;) {
      const n = readSync(fd, view, at, length - at, at);
      if (n === 0) return "the file ended while it was read";
      at += n;
    }
    return decodeTableFile(buffer, expected);
  } catch (e) {
    return `the file cannot be read: ${(e as Error).message}`;
  } finally {
    closeSync(fd);
  }
}

/** Write the file whole or not at all: to a temporary name beside it, then renamed over it. */
export function writeTableFile(file: string, bytes: Uint8Array): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}
