/**
 * UTF-8 with the exact semantics of Rust's `str::from_utf8` / `Utf8Error`
 * (valid_up_to, error_len) and `String::from_utf8_lossy`, which the reference
 * parser relies on. Pure functions over byte ranges; no allocation beyond the
 * strings they return.
 */

export const REPLACEMENT = "\uFFFD";

/**
 * Scan bytes[start, end). Returns the length of the valid prefix in `res[0]`
 * and, when the scan stopped early, the length of the invalid sequence in
 * `res[1]` (1..3), or 0 when the input simply ended inside a sequence that
 * could still be completed. `res[1]` is -1 when the whole range is valid.
 */
export function scanUtf8(bytes: Uint8Array, start: number, end: number, res: Int32Array): void {
  let i = start;
  while (i < end) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else {
      res[0] = i - start;
      res[1] = 1;
      return;
    }
    // second byte has the narrowed range, the rest 0x80..0xbf
    for (let k = 1; k <= need; k++) {
      if (i + k >= end) {
        res[0] = i - start;
        res[1] = 0;
        return;
      }
      const c = bytes[i + k]!;
      const l = k === 1 ? lo : 0x80;
      const h = k === 1 ? hi : 0xbf;
      if (c < l || c > h) {
        res[0] = i - start;
        res[1] = k;
        return;
      }
    }
    i += need + 1;
  }
  res[0] = end - start;
  res[1] = -1;
}

/** Decode bytes[start, end), which must be valid UTF-8, to a string. */
export function decodeValidUtf8(bytes: Uint8Array, start: number, end: number): string {
  let out = "";
  let chunk: number[] = [];
  let i = start;
  while (i < end) {
    const b = bytes[i]!;
    let cp: number;
    if (b < 0x80) {
      cp = b;
      i += 1;
    } else if (b < 0xe0) {
      cp = ((b & 0x1f) << 6) | (bytes[i + 1]! & 0x3f);
      i += 2;
    } else if (b < 0xf0) {
      cp = ((b & 0x0f) << 12) | ((bytes[i + 1]! & 0x3f) << 6) | (bytes[i + 2]! & 0x3f);
      i += 3;
    } else {
      cp = ((b & 0x07) << 18) | ((bytes[i + 1]! & 0x3f) << 12) | ((bytes[i + 2]! & 0x3f) << 6) | (bytes[i + 3]! & 0x3f);
      i += 4;
    }
    if (cp > 0xffff) {
      cp -= 0x10000;
      chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else chunk.push(cp);
    if (chunk.length >= 4096) {
      out += String.fromCharCode.apply(null, chunk);
      chunk = [];
    }
  }
  if (chunk.length > 0) out += String.fromCharCode.apply(null, chunk);
  return out;
}

/**
 * `String::from_utf8_lossy` over bytes[start, end). With `keepTail`, an
 * incomplete character at the very end is not replaced but left undecoded;
 * `scratch[0]` then holds the index where decoding stopped.
 */
export function decodeLossy(bytes: Uint8Array, start: number, end: number, scratch: Int32Array, keepTail = false): string {
  let out = "";
  let i = start;
  while (i < end) {
    scanUtf8(bytes, i, end, scratch);
    const valid = scratch[0]!;
    const err = scratch[1]!;
    if (valid > 0) out += decodeValidUtf8(bytes, i, i + valid);
    if (err < 0) {
      i = end;
      break;
    }
    if (err === 0) {
      i += valid;
      if (keepTail) break;
      out += REPLACEMENT;
      i = end;
      break;
    }
    out += REPLACEMENT;
    i += valid + err;
  }
  scratch[0] = i;
  return out;
}
