/**
 * The ids a generation's repair log links to (src/transport/repair-log.ts):
 * each choice's ids kept in order and counted, and a choice's link given up
 * past MAX_LINK_IDS while its ids are still counted, the others unaffected.
 */
import { describe, expect, it } from "vitest";
import { GeneratedIds, MAX_LINK_IDS } from "../../src/transport/repair-log.js";

describe("GeneratedIds", () => {
  it("keeps each choice's ids in order and counts them", () => {
    const g = new GeneratedIds();
    for (const choice of [0, 2]) {
      g.add(choice, [1, 2]);
      g.add(choice, []);
      g.add(choice, [3]);
    }
    for (const choice of [0, 2]) {
      expect(g.of(choice)).toEqual([1, 2, 3]);
      expect(g.count(choice)).toBe(3);
    }
    // a choice never given any: none, counted 0
    expect(g.of(1)).toEqual([]);
    expect(g.count(1)).toBe(0);
  });

  it("gives up a choice's link past MAX_LINK_IDS and goes on counting, the other choices unaffected", () => {
    for (const choice of [0, 1]) {
      const g = new GeneratedIds();
      const other = 1 - choice;
      g.add(other, [7]);
      g.add(choice, new Array<number>(MAX_LINK_IDS).fill(5));
      expect(g.of(choice)).toHaveLength(MAX_LINK_IDS);
      g.add(choice, [6]);
      expect(g.of(choice)).toBeNull();
      g.add(choice, [6, 6]);
      expect(g.of(choice)).toBeNull();
      expect(g.count(choice)).toBe(MAX_LINK_IDS + 3);
      expect(g.of(other)).toEqual([7]);
      expect(g.count(other)).toBe(1);
    }
  });
});
