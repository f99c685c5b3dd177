/**
 * Remembered chains of thought, by the tool call id the service emitted.
 * Bounded by bytes and entries (least recently used goes first) and by age.
 * Stateless clients that drop the reasoning when they send history back get
 * it restored from here when the conversation is rendered.
 *
 * Entries are kept as UTF-8 bytes and decoded when recalled: a service that
 * remembers thousands of tool calls a second would otherwise have the
 * young-generation GC copy each string once or twice before promoting it
 * (a typed array's bytes live off the JS heap).
 */
export interface CotStoreOptions {
  maxBytes: number;
  maxEntries: number;
  ttlMs: number;
  now?: () => number;
}

export interface CotStoreStats {
  entries: number;
  bytes: number;
  evictions: number;
  hits: number;
  misses: number;
}

interface Entry {
  utf8: Uint8Array;
  /** What the entry counts against maxBytes. */
  bytes: number;
  expires: number;
}

/** Counted per entry beside its text and id: the entry, its map slot and the typed array's objects. */
const ENTRY_OVERHEAD = 160;

const decoder = new TextDecoder();

export class CotStore {
  private readonly map = new Map<string, Entry>();
  private bytes = 0;
  private readonly now: () => number;
  readonly stats: CotStoreStats = { entries: 0, bytes: 0, evictions: 0, hits: 0, misses: 0 };

  constructor(readonly options: CotStoreOptions) {
    this.now = options.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.options.maxBytes > 0 && this.options.maxEntries > 0;
  }

  /** Remember `utf8` (the reasoning's UTF-8 bytes; the store keeps this array) under `id`. */
  remember(id: string, utf8: Uint8Array): void {
    if (!this.enabled || utf8.length === 0) return;
    const bytes = utf8.length + 2 * id.length + ENTRY_OVERHEAD;
    if (bytes > this.options.maxBytes) return;
    this.delete(id);
    this.map.set(id, { utf8, bytes, expires: this.now() + this.options.ttlMs });
    this.bytes += bytes;
    this.evict();
  }

  recall(id: string): string | undefined {
    const e = this.map.get(id);
    if (!e || e.expires <= this.now()) {
      if (e) this.delete(id);
      this.stats.misses++;
      this.sync();
      return undefined;
    }
    // most recently used goes to the back
    this.map.delete(id);
    this.map.set(id, e);
    this.stats.hits++;
    return decoder.decode(e.utf8);
  }

  private delete(id: string): void {
    const e = this.map.get(id);
    if (e) {
      this.map.delete(id);
      this.bytes -= e.bytes;
    }
  }

  private evict(): void {
    const now = this.now();
    for (const [id, e] of this.map) {
      const over = this.bytes > this.options.maxBytes || this.map.size > this.options.maxEntries;
      if (!over && e.expires > now) break;
      this.map.delete(id);
      this.bytes -= e.bytes;
      this.stats.evictions++;
    }
    this.sync();
  }

  private sync(): void {
    this.stats.entries = this.map.size;
    this.stats.bytes = this.bytes;
  }
}
