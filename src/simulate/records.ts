/**
 * What the simulator injected, per request: kept for the last `capacity`
 * requests (the oldest dropped first), found by the request's id (the
 * answer's `id`, also in its `x-simulator-request-id` header) or by the
 * load tester's key (`RUN/N`, read from the prompt), and listed by run.
 */
import type { ChoiceRecord } from "./model.js";

export interface RequestRecord {
  /** The answer's id: `cmpl-…`, `chatcmpl-…` or `resp_…`. */
  id: string;
  /** The load tester's key (`RUN/N`), or null. */
  key: string | null;
  endpoint: "completions" | "chat" | "responses";
  /** The declared function tools the generation could call. */
  tools: string[];
  /** Unix seconds. */
  created: number;
  /** Per choice; empty for a scripted answer (tests). */
  choices: ChoiceRecord[];
}

export class Records {
  private readonly byId = new Map<string, RequestRecord>();
  private readonly byKey = new Map<string, RequestRecord>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.byId.size;
  }

  add(r: RequestRecord): void {
    if (this.capacity <= 0) return;
    this.byId.set(r.id, r);
    if (r.key !== null) {
      this.byKey.delete(r.key); // a key seen again is the newest
      this.byKey.set(r.key, r);
    }
    while (this.byId.size > this.capacity) {
      const [oldId, old] = this.byId.entries().next().value as [string, RequestRecord];
      this.byId.delete(oldId);
      if (old.key !== null && this.byKey.get(old.key) === old) this.byKey.delete(old.key);
    }
  }

  get(id: string): RequestRecord | undefined {
    return this.byId.get(id);
  }

  byRequestKey(key: string): RequestRecord | undefined {
    return this.byKey.get(key);
  }

  /** The records whose key belongs to run `run` (keys `run/N`), oldest first. */
  run(run: string): RequestRecord[] {
    const prefix = `${run}/`;
    const out: RequestRecord[] = [];
    for (const [k, r] of this.byKey) if (k.startsWith(prefix)) out.push(r);
    return out;
  }
}
