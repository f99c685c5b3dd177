/**
 * Remembered chains of thought, by the tool call id the service emitted.
 * Bounded by bytes and entries (least recently used goes first) and by age.
 * Stateless clients that drop the reasoning when they send history back get
 * it restored from here when the conversation is rendered.
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
  text: string;
  bytes: number;
  expires: number;
}

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

  remember(id: string, text: string): void {
    if (!this.enabled || text === "") return;
    const bytes = 2 * (text.length + id.length) + 64;
    if (bytes > this.options.maxBytes) return;
    this.delete(id);
    this.map.set(id, { text, bytes, expires: this.now() + this.options.ttlMs });
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
    return e.text;
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
