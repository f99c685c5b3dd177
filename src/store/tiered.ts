/**
 * The reasoning store the service uses: the in-process store (./memory.ts)
 * as a bounded local cache, in front of an optional shared store
 * (./redis.ts). Remembering writes both (the shared one off the hot path);
 * a render first looks locally, then fetches every miss in one round trip
 * and keeps what it found locally.
 *
 * Without a shared store this is the in-process store and nothing more:
 * `recall` is synchronous.
 */
import type { CotStore } from "./memory.js";
import type { SharedStore } from "./redis.js";
import type { ReasoningStore } from "./store.js";

const decoder = new TextDecoder();

/** The most keys one render fetches from the shared store (a hostile request can name many tool calls). */
export const MAX_FETCH_KEYS = 1024;

export class TieredStore implements ReasoningStore {
  constructor(
    readonly local: CotStore,
    readonly shared: SharedStore | null,
  ) {}

  get enabled(): boolean {
    return this.local.enabled;
  }

  /** `utf8` is the caller's to give away (a worker's memo): the shared write keeps it until sent. */
  remember(id: string, utf8: Uint8Array): void {
    if (!this.local.enabled) return;
    this.local.remember(id, utf8);
    if (this.shared !== null && utf8.length > 0) this.shared.write(id, Buffer.from(utf8.buffer, utf8.byteOffset, utf8.byteLength));
  }

  /** `src` is valid only during the call: the shared write gets a copy. */
  rememberRange(id: string, src: Uint8Array, start: number, end: number): void {
    if (!this.local.enabled) return;
    this.local.rememberRange(id, src, start, end);
    if (this.shared !== null && end > start) this.shared.write(id, Buffer.from(src.subarray(start, end)));
  }

  /** The local cache only (synchronous). */
  recall(id: string): string | undefined {
    return this.local.recall(id);
  }

  /**
   * The reasoning of each of `ids` (scoped keys) that either tier holds:
   * local hits first, then the misses in one fetch from the shared store
   * (within its budget; nothing from it when it fails). What the shared
   * store had is kept locally for the next turn.
   */
  async recallMany(ids: readonly string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const seen = new Set<string>();
    const missing: string[] = [];
    for (const id of ids) {
      if (seen.has(id)) continue;
      seen.add(id);
      const text = this.local.recall(id);
      if (text !== undefined) found.set(id, text);
      else if (missing.length < MAX_FETCH_KEYS) missing.push(id);
    }
    if (missing.length === 0 || this.shared === null || !this.local.enabled) return found;
    const values = await this.shared.fetch(missing);
    if (values === null) return found;
    for (let i = 0; i < missing.length; i++) {
      const v = values[i];
      // (the shared store checks its reply's shape: a value is bytes or nil)
      if (!Buffer.isBuffer(v) || v.length === 0) continue;
      found.set(missing[i]!, decoder.decode(v));
      this.local.remember(missing[i]!, v);
    }
    return found;
  }

  async close(): Promise<void> {
    await this.shared?.close();
  }
}
