/**
 * Stored responses (src/store/responses.ts): this process's tier alone, and
 * two stores (two replicas) sharing a real redis-server on a Unix socket
 * (./redis-server.ts), no mock.
 */
import { describe, expect, it } from "vitest";
import { SharedStore, storeKey } from "../../src/store/redis.js";
import { MAX_STORED_RESPONSE_BYTES, ResponseStore, type StoredResponse } from "../../src/store/responses.js";
import { redisSuite } from "./redis-server.js";

const record = (id: string, text = "Hi"): StoredResponse => ({
  response: {
    id,
    object: "response",
    status: "completed",
    output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text }] }],
  },
  input: [{ id: `msg_${id}_in0`, type: "message", role: "user", content: "Hello" }],
});

describe("stored responses in one process", () => {
  it("keeps a response for its tenant only, and deletes it", async () => {
    const s = new ResponseStore({ maxBytes: 1 << 20, ttlMs: 60_000, timeoutMs: 100 }, null);
    expect(await s.put("alice", "resp_1", record("resp_1"))).toBe("stored");
    const got = await s.get("alice", "resp_1");
    expect(got.ok && got.record).toEqual(record("resp_1"));
    expect(await s.get("bob", "resp_1")).toEqual({ ok: false, reason: "not_found" });
    expect(await s.delete("bob", "resp_1")).toBe(false);
    expect(await s.delete("alice", "resp_1")).toBe(true);
    expect(await s.get("alice", "resp_1")).toEqual({ ok: false, reason: "not_found" });
    expect(s.stats).toEqual({ entries: 0, bytes: 0 });
  });

  it("forgets after its TTL, and the oldest first past its byte budget", async () => {
    let now = 0;
    const one = Buffer.byteLength(JSON.stringify(record("resp_a")));
    const s = new ResponseStore({ maxBytes: 2 * one + 10, ttlMs: 1000, timeoutMs: 100, now: () => now }, null);
    await s.put("t", "resp_a", record("resp_a"));
    await s.put("t", "resp_b", record("resp_b"));
    await s.put("t", "resp_c", record("resp_c"));
    expect((await s.get("t", "resp_a")).ok).toBe(false);
    expect((await s.get("t", "resp_b")).ok).toBe(true);
    expect(s.stats.bytes).toBeLessThanOrEqual(2 * one + 10);
    now = 1000;
    expect((await s.get("t", "resp_c")).ok).toBe(false);
  });

  it("refuses a record over the size bound, and stores nothing when off", async () => {
    const s = new ResponseStore({ maxBytes: 1 << 30, ttlMs: 60_000, timeoutMs: 100 }, null);
    expect(await s.put("t", "resp_big", record("resp_big", "x".repeat(MAX_STORED_RESPONSE_BYTES)))).toBe("too_large");
    expect(s.stats.entries).toBe(0);
    const off = new ResponseStore({ maxBytes: 0, ttlMs: 60_000, timeoutMs: 100 }, null);
    expect(off.enabled).toBe(false);
    expect(await off.put("t", "resp_1", record("resp_1"))).toBe("off");
    expect((await off.get("t", "resp_1")).ok).toBe(false);
  });
});

describe("stored responses shared by two replicas (redis-server)", () => {
  const suite = redisSuite();
  const { server: redis, opened } = suite;

  async function replica(failures: string[] = []): Promise<ResponseStore> {
    const shared = new SharedStore({ url: redis.url, ttlMs: 60_000, timeoutMs: 5, onFailure: (op, n) => failures.push(`${op}:${n}`) });
    opened.push(shared);
    expect(await shared.waitReady(5000)).toBe(true);
    return new ResponseStore({ maxBytes: 1 << 20, ttlMs: 60_000, timeoutMs: 1000 }, shared);
  }

  it("B reads what A stored (written before put resolves, with the TTL, under the tenant's key); a delete on B is seen by A", async () => {
    const a = await replica();
    const b = await replica();
    expect(await a.put("alice", "resp_x", record("resp_x"))).toBe("stored");
    const key = storeKey("resp", "alice:resp_x");
    expect(await suite.probe.exists(key)).toBe(1);
    const ttl = await suite.probe.pttl(key);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    const got = await b.get("alice", "resp_x");
    expect(got.ok && got.record).toEqual(record("resp_x"));
    expect(await b.get("bob", "resp_x")).toEqual({ ok: false, reason: "not_found" });
    expect(await b.delete("alice", "resp_x")).toBe(true);
    // A still holds a copy, but the shared store says it is gone
    expect(await a.get("alice", "resp_x")).toEqual({ ok: false, reason: "not_found" });
    expect(await a.delete("alice", "resp_x")).toBe(false);
  });

  it("a record in the store that is not one of ours is not found, never thrown", async () => {
    const a = await replica();
    await suite.probe.set(storeKey("resp", "alice:resp_bad"), '{"response": 1}');
    expect(await a.get("alice", "resp_bad")).toEqual({ ok: false, reason: "not_found" });
    await suite.probe.set(storeKey("resp", "alice:resp_deep"), "[".repeat(100_000));
    expect(await a.get("alice", "resp_deep")).toEqual({ ok: false, reason: "not_found" });
  });

  it("the store down: the replica that stored it reads its own copy, the other answers unavailable; back: shared again", async () => {
    const failures: string[] = [];
    const a = await replica(failures);
    const b = await replica(failures);
    expect(await a.put("t", "resp_down", record("resp_down"))).toBe("stored");
    await redis.stop();
    try {
      const mine = await a.get("t", "resp_down");
      expect(mine.ok).toBe(true);
      expect(await b.get("t", "resp_down")).toEqual({ ok: false, reason: "unavailable" });
      expect(await b.put("t", "resp_lonely", record("resp_lonely"))).toBe("local_only");
      expect(await b.delete("t", "resp_down")).toBe("unavailable");
      expect(failures.length).toBeGreaterThanOrEqual(4);
    } finally {
      await suite.restart();
    }
    expect(await a.shared!.waitReady(5000)).toBe(true);
    expect(await b.shared!.waitReady(5000)).toBe(true);
    // a fresh redis-server (no persistence): what was stored before is gone from the shared tier
    expect(await a.put("t", "resp_back", record("resp_back"))).toBe("stored");
    expect((await b.get("t", "resp_back")).ok).toBe(true);
  });
});
