/**
 * Stored responses: the Responses API's `store` (on by default, as in
 * OpenAI's API), `previous_response_id`, and `GET`/`DELETE
 * /v1/responses/{id}`. A record is the response as answered and every input
 * item of the conversation up to it, so that a continuation needs one read,
 * on any replica.
 *
 * Two tiers, as for reasoning (./tiered.ts):
 * - this process's map, bounded by bytes (least recently stored goes first)
 *   and by age;
 * - with a shared store (./redis.ts), Redis/Valkey too. Writes are awaited
 *   (within a budget) before the response is answered, so the client's next
 *   request finds it on any replica; reads and deletes go to the shared
 *   store first, because another replica may have deleted the record. When
 *   the shared store fails or is slow, this process's copy is used (a record
 *   deleted elsewhere meanwhile may then still be read here, until its TTL).
 *
 * Keys are scoped by tenant (src/store/store.ts `memoScope`): another
 * tenant's id is not found.
 */
import { isObj, parseJson, type JsonObject as Obj } from "../core/json.js";
import type { SharedStore } from "./redis.js";
import { memoScope } from "./store.js";

/** One stored response. */
export interface StoredResponse {
  /** The response object, as it was answered. */
  response: Obj;
  /**
   * Every input item of the conversation up to this response, oldest first:
   * the previous response's input and output items, then this request's
   * input, each with an `id`.
   */
  input: Obj[];
}

export interface ResponseStoreOptions {
  /** This process's budget, in bytes of stored JSON (0: storing is off, `store` is ignored). */
  maxBytes: number;
  /** How long a response is kept (both tiers). */
  ttlMs: number;
  /** How long a request waits for the shared store (one read, write or delete). */
  timeoutMs: number;
  now?: () => number;
}

/** The largest record stored (a conversation's whole history): past it the response is answered but not stored. */
export const MAX_STORED_RESPONSE_BYTES = 16 * 1024 * 1024;

/** The longest response id looked up (ours are 32 characters). */
export const MAX_RESPONSE_ID = 128;

export type Lookup = { ok: true; record: StoredResponse } | { ok: false; reason: "not_found" | "unavailable" };

export type StoreOutcome = "stored" | "local_only" | "too_large" | "off";

interface Entry {
  value: Buffer;
  expires: number;
}

/** Whether `v` has the shape this module stores (the shared store is not trusted further than that). */
function asRecord(v: unknown): StoredResponse | null {
  if (!isObj(v) || !isObj(v.response) || !Array.isArray(v.input)) return null;
  for (const item of v.input) if (!isObj(item)) return null;
  return v as unknown as StoredResponse;
}

export class ResponseStore {
  private readonly local = new Map<string, Entry>();
  private bytes = 0;
  private readonly now: () => number;

  constructor(
    readonly options: ResponseStoreOptions,
    readonly shared: SharedStore | null,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** False when storing is off: `store: true` is then ignored (as vLLM does without its store) and nothing is found. */
  get enabled(): boolean {
    return this.options.maxBytes > 0;
  }

  /** Records and bytes held in this process. */
  get stats(): { entries: number; bytes: number } {
    return { entries: this.local.size, bytes: this.bytes };
  }

  /** The key in either tier (the shared store adds its prefix and the kind, `resp:`, which no reasoning key has). */
  private key(tenant: string, id: string): string {
    return `${memoScope(tenant)}${id}`;
  }

  /** Store `record` under `id` for `tenant`; resolves once both tiers have it (or the shared one failed). */
  async put(tenant: string, id: string, record: StoredResponse): Promise<StoreOutcome> {
    if (!this.enabled) return "off";
    const value = Buffer.from(JSON.stringify(record));
    if (value.length > MAX_STORED_RESPONSE_BYTES || value.length > this.options.maxBytes) return "too_large";
    const key = this.key(tenant, id);
    this.setLocal(key, value);
    if (this.shared === null) return "stored";
    return (await this.shared.put("resp", key, value, this.options.ttlMs, this.options.timeoutMs)) ? "stored" : "local_only";
  }

  /** The record stored under `id` for `tenant`. */
  async get(tenant: string, id: string): Promise<Lookup> {
    if (!this.enabled || id.length > MAX_RESPONSE_ID) return { ok: false, reason: "not_found" };
    const key = this.key(tenant, id);
    if (this.shared !== null) {
      const v = await this.shared.get("resp", key, this.options.timeoutMs);
      if (v === null) {
        this.deleteLocal(key); // gone from the shared store: deleted by another replica, or expired
        return { ok: false, reason: "not_found" };
      }
      if (v !== undefined) {
        const record = this.decode(v);
        if (record !== null) {
          if (!this.local.has(key)) this.setLocal(key, v);
          return { ok: true, record };
        }
        return { ok: false, reason: "not_found" };
      }
      // the shared store failed: this process's copy, if it has one
      const mine = this.getLocal(key);
      if (mine === null) return { ok: false, reason: "unavailable" };
      return { ok: true, record: mine };
    }
    const mine = this.getLocal(key);
    return mine === null ? { ok: false, reason: "not_found" } : { ok: true, record: mine };
  }

  /** Delete `id` for `tenant`: whether it was there (either tier), or "unavailable" when the shared store could not be asked. */
  async delete(tenant: string, id: string): Promise<boolean | "unavailable"> {
    if (!this.enabled || id.length > MAX_RESPONSE_ID) return false;
    const key = this.key(tenant, id);
    const here = this.deleteLocal(key);
    if (this.shared === null) return here;
    const there = await this.shared.remove("resp", key, this.options.timeoutMs);
    if (there === undefined) return "unavailable";
    return there || here;
  }

  private decode(v: Buffer): StoredResponse | null {
    const parsed = parseJson(v.toString("utf8"));
    return parsed.ok ? asRecord(parsed.value) : null;
  }

  private getLocal(key: string): StoredResponse | null {
    const e = this.local.get(key);
    if (e === undefined) return null;
    if (e.expires <= this.now()) {
      this.deleteLocal(key);
      return null;
    }
    return this.decode(e.value);
  }

  private setLocal(key: string, value: Buffer): void {
    this.deleteLocal(key);
    const now = this.now();
    // expired first, then the oldest, until the new record fits
    for (const [k, e] of this.local) {
      if (this.bytes + value.length <= this.options.maxBytes && e.expires > now) break;
      this.deleteLocal(k);
    }
    this.local.set(key, { value, expires: now + this.options.ttlMs });
    this.bytes += value.length;
  }

  private deleteLocal(key: string): boolean {
    const e = this.local.get(key);
    if (e === undefined) return false;
    this.local.delete(key);
    this.bytes -= e.value.length;
    return true;
  }
}
