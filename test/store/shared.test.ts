/**
 * The shared reasoning store (src/store/redis.ts) and the tiered store in
 * front of it (src/store/tiered.ts), against a real redis-server on a Unix
 * socket (./redis-server.ts): no mock.
 */
import { describe, expect, it } from "vitest";
import { CotStore } from "../../src/store/memory.js";
import { connectionOptions, isStoreUrl, KEY_PREFIX, redactUrl, SharedStore, type SharedStoreOptions } from "../../src/store/redis.js";
import { TieredStore } from "../../src/store/tiered.js";
import { memoScope } from "../../src/store/store.js";
import { missingReasoning, restoreReasoning } from "../../src/openai/render.js";
import { redisSuite } from "./redis-server.js";

const suite = redisSuite();
const { server: redis, opened } = suite;

type Line = { level: "warn" | "info"; obj: Record<string, unknown>; msg: string };

function logger(lines: Line[]) {
  return {
    warn: (obj: object, msg: string) => lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
    info: (obj: object, msg: string) => lines.push({ level: "info", obj: obj as Record<string, unknown>, msg }),
  };
}

async function open(extra: Partial<SharedStoreOptions> = {}): Promise<SharedStore> {
  const s = new SharedStore({ url: redis.url, ttlMs: 60_000, timeoutMs: 50, ...extra });
  opened.push(s);
  expect(await s.waitReady(5000)).toBe(true);
  return s;
}

const utf8 = (t: string) => new TextEncoder().encode(t);
const local = () => new CotStore({ maxBytes: 1 << 20, maxEntries: 1000, ttlMs: 60_000 });

/** Until `f` holds (writes are sent on the next turn of the event loop). */
async function until(f: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("store URLs", () => {
  it("takes redis://, rediss:// and unix:// URLs, and nothing else", () => {
    expect(connectionOptions("redis://default:s%40cret@cache.svc:6380/2")).toMatchObject({
      host: "cache.svc",
      port: 6380,
      username: "default",
      password: "s@cret",
      db: 2,
    });
    expect(connectionOptions("redis://cache")).toMatchObject({ host: "cache", port: 6379 });
    expect(connectionOptions("rediss://cache:6379")).toMatchObject({ host: "cache", tls: { servername: "cache" } });
    expect(connectionOptions("unix:///run/redis/redis.sock?db=3&password=pw")).toEqual({
      path: "/run/redis/redis.sock",
      db: 3,
      password: "pw",
    });
    expect(() => connectionOptions("unix://relative.sock")).toThrow(/absolute/);
    expect(() => connectionOptions("http://cache:6379")).toThrow(/redis:\/\//);
    expect(["redis://x", "rediss://x", "unix:///x", "memory", "http://x", "valkey://x"].map(isStoreUrl)).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it("never logs a password", () => {
    expect(redactUrl("rediss://default:hunter2@cache:6379/0")).toBe("rediss://default:***@cache:6379/0");
    expect(redactUrl("redis://hunter2@cache")).toBe("redis://***@cache");
    expect(redactUrl("unix:///run/redis.sock")).toBe("unix:///run/redis.sock");
  });
});

describe("the shared store", () => {
  it("writes in one pipeline with the TTL, under hs:v1:<tenant>:<id>", async () => {
    const s = await open({ ttlMs: 45_000 });
    s.write(`${memoScope("t1")}call_a`, Buffer.from("reasoning a"));
    s.write(`${memoScope("t1")}call_b`, Buffer.from("reasoning b — ü"));
    await until(() => s.stats.written === 2);
    expect(await suite.probe.get(`${KEY_PREFIX}t1:call_a`)).toBe("reasoning a");
    expect(await suite.probe.get(`${KEY_PREFIX}t1:call_b`)).toBe("reasoning b — ü");
    const ttl = await suite.probe.pttl(`${KEY_PREFIX}t1:call_a`);
    expect(ttl).toBeGreaterThan(40_000);
    expect(ttl).toBeLessThanOrEqual(45_000);
  });

  it("fetches many keys in one round trip, in order, null where absent", async () => {
    const s = await open();
    await suite.probe.set(`${KEY_PREFIX}t:x`, "X");
    await suite.probe.set(`${KEY_PREFIX}t:z`, "Z");
    const before = (await suite.probe.info("commandstats")).match(/cmdstat_mget:calls=(\d+)/)?.[1] ?? "0";
    const got = await s.fetch(["t:x", "t:y", "t:z"]);
    expect(got?.map((b) => b?.toString() ?? null)).toEqual(["X", null, "Z"]);
    const after = (await suite.probe.info("commandstats")).match(/cmdstat_mget:calls=(\d+)/)?.[1];
    expect(Number(after) - Number(before)).toBe(1);
    expect(s.stats).toMatchObject({ fetches: 1, found: 2, readFailures: 0 });
    expect(await s.fetch([])).toEqual([]);
  });

  it("a store that does not answer in time: the fetch gives up within its budget, counted, one warning", async () => {
    const lines: Line[] = [];
    const failures: string[] = [];
    const s = await open({ timeoutMs: 20, logger: logger(lines), onFailure: (op, n) => failures.push(`${op}:${n}`) });
    redis.pause();
    try {
      const t0 = performance.now();
      const results = await Promise.all([s.fetch(["t:a"]), s.fetch(["t:b"]), s.fetch(["t:c"])]);
      const took = performance.now() - t0;
      expect(results).toEqual([null, null, null]);
      // a fetch that waited for the paused store would never end: any bound far above the budget tells the two apart
      expect(took).toBeLessThan(5000);
      expect(failures).toEqual(["read:1", "read:1", "read:1"]);
      expect(lines.filter((l) => l.level === "warn")).toHaveLength(1);
      expect(lines[0]!.obj).toMatchObject({ op: "read", failures: 1, error: "no answer within 20 ms" });
    } finally {
      redis.resume();
    }
    // the late answers are dropped; the store answers again
    await until(async () => (await s.fetch(["t:a"])) !== null);
  });

  it("a store that is down: writes dropped and reads refused at once, counted; one warning per interval; back: it works again", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    let now = 0;
    const s = await open({ logger: logger(lines), onFailure: (op, n) => (failures[op] += n), warnIntervalMs: 1000, now: () => now });
    await redis.stop();
    await until(() => !s.ready);
    for (let i = 0; i < 5; i++) {
      s.write(`t:down${i}`, Buffer.from("lost"));
      const t0 = performance.now();
      expect(await s.fetch([`t:down${i}`])).toBeNull();
      // not queued until the store is back (ioredis's offline queue would hold it for ever): a generous bound tells them apart
      expect(performance.now() - t0).toBeLessThan(2000);
    }
    await until(() => failures.write === 5);
    expect(failures.read).toBe(5);
    const warned = lines.filter((l) => l.level === "warn");
    expect(warned).toHaveLength(1);
    // after the interval, one more with the count since the last
    now += 1000;
    expect(await s.fetch(["t:x"])).toBeNull();
    const again = lines.filter((l) => l.level === "warn");
    expect(again).toHaveLength(2);
    expect(Number(again[1]!.obj.failures)).toBeGreaterThanOrEqual(10);

    await suite.restart();
    expect(await s.waitReady(5000)).toBe(true);
    expect(lines.some((l) => l.level === "info" && /reachable again/.test(l.msg))).toBe(true);
    s.write("t:back", Buffer.from("back"));
    await until(async () => (await suite.probe.get(`${KEY_PREFIX}t:back`)) === "back");
    expect((await s.fetch(["t:back"]))?.[0]?.toString()).toBe("back");
  });

  it("bounds what waits to be written: past maxPendingBytes new writes are dropped and counted", async () => {
    const failures: number[] = [];
    const s = await open({ maxPendingBytes: 100, onFailure: (_op, n) => failures.push(n) });
    s.write("t:w1", Buffer.alloc(60, 97));
    s.write("t:w2", Buffer.alloc(60, 98));
    expect(failures).toEqual([1]);
    await until(() => s.stats.written === 1);
    expect(await suite.probe.exists(`${KEY_PREFIX}t:w1`, `${KEY_PREFIX}t:w2`)).toBe(1);
  });
});

describe("the tiered store", () => {
  it("replica B recalls what replica A remembered, in one fetch, then from its own cache", async () => {
    const a = new TieredStore(local(), await open());
    const b = new TieredStore(local(), await open());
    const scope = memoScope("tenant1");
    // a worker's memo (remember) and a main-thread memo (rememberRange: bytes valid only during the call)
    a.remember(`${scope}call_1`, utf8("first reasoning"));
    const scratch = utf8("xx second reasoning yy");
    a.rememberRange(`${scope}call_2`, scratch, 3, scratch.length - 3);
    scratch.fill(0);
    await until(() => a.shared!.stats.written === 2);
    expect(a.recall(`${scope}call_1`)).toBe("first reasoning");
    expect(b.recall(`${scope}call_1`)).toBeUndefined();

    const got = await b.recallMany([`${scope}call_1`, `${scope}call_2`, `${scope}call_3`, `${scope}call_1`]);
    expect([...got]).toEqual([
      [`${scope}call_1`, "first reasoning"],
      [`${scope}call_2`, "second reasoning"],
    ]);
    expect(b.shared!.stats.fetches).toBe(1);
    // kept locally: the next turn needs no fetch for them
    expect(b.recall(`${scope}call_2`)).toBe("second reasoning");
    const again = await b.recallMany([`${scope}call_1`, `${scope}call_2`]);
    expect(again.size).toBe(2);
    expect(b.shared!.stats.fetches).toBe(1);
    // another tenant's scope holds nothing of it
    expect((await b.recallMany([`${memoScope("tenant2")}call_1`])).size).toBe(0);
  });

  it("with no shared store it is the in-process store, synchronous", async () => {
    const t = new TieredStore(local(), null);
    t.remember("local:c", utf8("kept"));
    expect(t.recall("local:c")).toBe("kept");
    expect([...(await t.recallMany(["local:c", "local:d"]))]).toEqual([["local:c", "kept"]]);
  });

  it("a store switched off (0 bytes) remembers nothing in either tier", async () => {
    const s = await open();
    const t = new TieredStore(new CotStore({ maxBytes: 0, maxEntries: 0, ttlMs: 1000 }), s);
    t.remember("local:off", utf8("nothing"));
    await new Promise((r) => setImmediate(r));
    expect(s.stats.written).toBe(0);
    expect((await t.recallMany(["local:off"])).size).toBe(0);
  });
});

describe("restoration with a batch fetch", () => {
  const request = (withReasoning: boolean) => ({
    messages: [
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        ...(withReasoning ? { reasoning: "kept" } : {}),
        tool_calls: [
          { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
          { id: "c2", type: "function", function: { name: "f", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "1" },
      { role: "assistant", content: null, tool_calls: [{ id: "c3", type: "function", function: { name: "f", arguments: "{}" } }] },
    ],
  });

  it("missingReasoning names exactly the ids restoreReasoning would look up", () => {
    expect(missingReasoning(request(false))).toEqual(["c1", "c2", "c3"]);
    expect(missingReasoning(request(true))).toEqual(["c3"]);
    expect(missingReasoning({ ...request(false), harmony: { restore_reasoning: false } })).toEqual([]);
    expect(missingReasoning("nope")).toEqual([]);
    const looked: string[] = [];
    restoreReasoning(request(false), (id) => void looked.push(id));
    expect(looked).toEqual(["c1", "c2", "c3"]);
  });

  it("a prefetched map restores as the store's recall would", () => {
    const found = new Map([
      ["c2", "second"],
      ["c3", "third"],
    ]);
    const { restored } = restoreReasoning(request(false), (id) => found.get(id));
    expect(restored).toEqual([
      { tool_call_id: "c2", message_index: 1, chars: 6 },
      { tool_call_id: "c3", message_index: 3, chars: 5 },
    ]);
  });
});
