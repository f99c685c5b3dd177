/**
 * Each connection's id base (src/service/connection.ts): drawn from a pool of
 * random bytes refilled every 256 connections (the OpenAI front opens one a
 * request), so that no draw of the generator is paid per request; the bases
 * stay random and never repeat across a refill.
 */
import { describe, expect, it } from "vitest";
import { randomHex12 } from "../../src/service/connection.js";

describe("connection id bases", () => {
  it("are 12 random bytes each, distinct across pool refills", () => {
    const bases = Array.from({ length: 1000 }, () => randomHex12());
    for (const b of bases) expect(b).toMatch(/^[0-9a-f]{24}$/);
    expect(new Set(bases).size).toBe(bases.length);
  });
});
