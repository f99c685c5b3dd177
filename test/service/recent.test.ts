/** The bounded set of recently closed names and handles, against a plain model of it. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RecentSet } from "../../src/service/recent.js";

/** The model: the last `capacity` adds, in a ring, minus those deleted since. */
class Model<K> {
  private readonly ring: (K | undefined)[];
  private head = 0;
  constructor(capacity: number) {
    this.ring = new Array<K | undefined>(capacity).fill(undefined);
  }
  has(k: K): boolean {
    return this.ring.includes(k);
  }
  add(k: K): void {
    if (this.has(k)) return;
    this.ring[this.head] = k;
    this.head = (this.head + 1) % this.ring.length;
  }
  delete(k: K): void {
    const i = this.ring.indexOf(k);
    if (i >= 0) this.ring[i] = undefined;
  }
}

function check<K extends string | number>(key: fc.Arbitrary<K>) {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 40 }),
      fc.array(fc.tuple(fc.constantFrom("add", "add", "delete", "has"), key), { maxLength: 400 }),
      (capacity, ops) => {
        const got = new RecentSet<K>(capacity);
        const want = new Model<K>(capacity);
        for (const [op, k] of ops) {
          if (op === "add") {
            got.add(k);
            want.add(k);
          } else if (op === "delete") {
            got.delete(k);
            want.delete(k);
          }
          expect(got.has(k)).toBe(want.has(k));
        }
        // every key ever named, at the end
        for (const [, k] of ops) expect(got.has(k), String(k)).toBe(want.has(k));
      },
    ),
    { numRuns: 300 },
  );
}

describe("RecentSet", () => {
  it("remembers what the model does: numbers from a small range (long probe runs)", () => check(fc.integer({ min: 0, max: 60 })));
  it("remembers what the model does: any uint32", () => check(fc.oneof(fc.integer({ min: 0, max: 20 }), fc.nat({ max: 0xffffffff }))));
  it("remembers what the model does: strings", () =>
    check(fc.oneof(fc.constantFrom("a", "b", "lane-1", "lane-2", "请求"), fc.string({ maxLength: 6 }))));

  it("keeps the last 1024 of many closes, and nothing before them", () => {
    const r = new RecentSet<number>(1024);
    for (let h = 1; h <= 100_000; h++) r.add(h);
    expect(r.has(100_000 - 1023)).toBe(true);
    expect(r.has(100_000 - 1024)).toBe(false);
    expect(r.has(1)).toBe(false);
    expect(new RecentSet<string>(0).has("x")).toBe(false);
    const one = new RecentSet<string>(0);
    one.add("x");
    one.add("y");
    expect([one.has("x"), one.has("y")]).toEqual([false, true]);
  });
});
