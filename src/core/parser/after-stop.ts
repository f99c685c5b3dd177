/** The tokens after a completion's end (S_AFTER): counted, and their text kept (capped) for the `after_stop` recovery. */
import { decodeLossy } from "../utf8.js";
import type { Vocabulary } from "../vocab.js";
import { AFTER_STOP_RAW_BYTES, appendBytes, NO_BYTES } from "./constants.js";

export class AfterStop {
  /** Tokens after the completion's end. */
  count = 0;
  /** The first one's stream position. */
  at = 0;
  /** Their bytes, [0, length), at most AFTER_STOP_RAW_BYTES. */
  bytes: Uint8Array = NO_BYTES;
  length = 0;

  constructor(
    private readonly vocab: Vocabulary,
    private readonly scratch: Int32Array,
  ) {}

  reset(): void {
    this.count = 0;
    this.at = 0;
    this.bytes = NO_BYTES;
    this.length = 0;
  }

  /** Token `id`, at position `at`; `token`: whether it is a token (only a token's bytes are kept). */
  add(id: number, at: number, token: boolean): void {
    if (this.count++ === 0) this.at = at;
    if (!token || this.length >= AFTER_STOP_RAW_BYTES) return;
    const v = this.vocab;
    this.bytes = appendBytes(this.bytes, this.length, v, id, 256);
    this.length = Math.min(this.length + v.byteEnd(id) - v.byteStart(id), AFTER_STOP_RAW_BYTES);
  }

  /** Their text (lossy), for the recovery; the count starts again. */
  take(): string {
    const raw = decodeLossy(this.bytes, 0, this.length, this.scratch);
    this.count = 0;
    this.length = 0;
    return raw;
  }
}
