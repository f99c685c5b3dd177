/**
 * The shared store is a network peer (issue #32): a proxy, a wrong database
 * number, a Valkey version difference or a hostile neighbour can answer
 * anything. Every reply is checked for its command's shape; one that is not
 * is a failed read or write (counted, one warning per interval), never an
 * exception. Against a fake RESP peer that scripts the bad replies
 * (./resp-peer.ts), and a real redis-server (./redis-server.ts) for the key
 * layout.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CotStore } from "../../src/store/memory.js";
import { SharedStore, storeKey, type StoreOp } from "../../src/store/redis.js";
import { ResponseStore } from "../../src/store/responses.js";
import { memoScope } from "../../src/store/store.js";
import { TieredStore } from "../../src/store/tiered.js";
import { redisSuite } from "./redis-server.js";
import { startRespPeer, type RespPeer } from "./resp-peer.js";

type Line = { level: string; obj: Record<string, unknown>; msg: string };

/** Until `f` holds. */
async function until(f: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("a store that answers with the wrong shapes (a fake RESP peer)", () => {
  let peer: RespPeer;
  const stores: SharedStore[] = [];
  beforeAll(async () => {
    peer = await startRespPeer(() => "-ERR not scripted\r\n");
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await peer.close();
  });

  async function open(lines: Line[], failures: Record<StoreOp, number>): Promise<SharedStore> {
    const s = new SharedStore({
      url: peer.url,
      ttlMs: 60_000,
      // generous: a slow machine must still get the peer's answer in time
      timeoutMs: 2000,
      onFailure: (op, n) => (failures[op] += n),
      logger: {
        warn: (obj, msg) => lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
        info: (obj, msg) => lines.push({ level: "info", obj: obj as Record<string, unknown>, msg }),
      },
    });
    stores.push(s);
    expect(await s.waitReady(10_000)).toBe(true);
    return s;
  }

  it("MGET answered with an integer, an array of integers, a wrong count, a status, an error, nil: a failed read each, one warning", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    const s = await open(lines, failures);
    const replies = [
      ":1\r\n",
      "*1\r\n:5\r\n",
      "*2\r\n$1\r\nA\r\n:7\r\n",
      "*1\r\n$1\r\nA\r\n",
      "*3\r\n$1\r\nA\r\n$-1\r\n$1\r\nB\r\n",
      "+OK\r\n",
      "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
      "*-1\r\n",
      "$3\r\nabc\r\n",
      "*2\r\n*1\r\n$1\r\nA\r\n$-1\r\n",
    ];
    for (const reply of replies) {
      peer.answer((cmd) => (cmd === "MGET" ? reply : "-ERR\r\n"));
      await expect(s.fetch(["t:a", "t:b"]), reply).resolves.toBeNull();
    }
    expect(failures.read).toBe(replies.length);
    expect(s.stats.readFailures).toBe(replies.length);
    const warned = lines.filter((l) => l.level === "warn");
    expect(warned).toHaveLength(1);
    expect(String(warned[0]!.obj.error)).toMatch(/MGET with a reply of the wrong shape \(number\)/);
    // a reply of the right shape is used as it is
    peer.answer((cmd) => (cmd === "MGET" ? "*2\r\n$1\r\nA\r\n$-1\r\n" : "-ERR\r\n"));
    expect((await s.fetch(["t:a", "t:b"]))?.map((b) => b?.toString() ?? null)).toEqual(["A", null]);
    // the keys asked are the reasoning's
    expect(peer.commands.filter((c) => c[0] === "MGET").at(-1)).toEqual(["MGET", storeKey("cot", "t:a"), storeKey("cot", "t:b")]);
  });

  it("bytes that are not RESP at all: a failed read, and the store is used again once it answers properly", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    const s = await open(lines, failures);
    peer.answer((cmd) => (cmd === "MGET" ? "hello, I am not a store\r\n" : "-ERR\r\n"));
    await expect(s.fetch(["t:a"])).resolves.toBeNull();
    expect(failures.read).toBe(1);
    peer.answer((cmd) => (cmd === "MGET" ? "*1\r\n$2\r\nok\r\n" : "-ERR\r\n"));
    await until(async () => (await s.fetch(["t:a"]))?.[0]?.toString() === "ok");
  });

  it("GET, SET and DEL answered out of shape: not found is never claimed, nothing throws", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    const s = await open(lines, failures);
    peer.answer((cmd) => ({ GET: ":1\r\n", SET: ":1\r\n", DEL: "+OK\r\n" })[cmd] ?? "-ERR\r\n");
    expect(await s.get("resp", "t:r", 2000)).toBeUndefined();
    expect(await s.put("resp", "t:r", Buffer.from("{}"), 1000, 2000)).toBe(false);
    expect(await s.remove("resp", "t:r", 2000)).toBeUndefined();
    peer.answer((cmd) => ({ GET: "*1\r\n:5\r\n", SET: "$3\r\nBAD\r\n", DEL: ":-1\r\n" })[cmd] ?? "-ERR\r\n");
    expect(await s.get("resp", "t:r", 2000)).toBeUndefined();
    expect(await s.put("resp", "t:r", Buffer.from("{}"), 1000, 2000)).toBe(false);
    expect(await s.remove("resp", "t:r", 2000)).toBeUndefined();
    expect(failures).toEqual({ read: 2, write: 4 });
    // a stored response's read that failed is "unavailable", not "not found"
    peer.answer((cmd) => (cmd === "GET" ? "*1\r\n:5\r\n" : "-ERR\r\n"));
    const responses = new ResponseStore({ maxBytes: 1 << 20, ttlMs: 60_000, timeoutMs: 2000 }, s);
    expect(await responses.get("t", "resp_1")).toEqual({ ok: false, reason: "unavailable" });
  });

  it("pipelined writes answered with anything but OK are failed writes", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    const s = await open(lines, failures);
    let n = 0;
    peer.answer((cmd) => (cmd === "SET" ? (++n % 2 === 0 ? "+OK\r\n" : ":1\r\n") : "-ERR\r\n"));
    s.write("t:w1", Buffer.from("a"));
    s.write("t:w2", Buffer.from("b"));
    s.write("t:w3", Buffer.from("c"));
    await until(() => s.stats.written + failures.write === 3);
    expect(s.stats.written).toBe(1);
    expect(failures.write).toBe(2);
  });

  it("a render's batch fetch of a store that answers `:1` restores only what this process has", async () => {
    const lines: Line[] = [];
    const failures = { read: 0, write: 0 };
    const s = await open(lines, failures);
    const local = new CotStore({ maxBytes: 1 << 20, maxEntries: 100, ttlMs: 60_000 });
    const tiered = new TieredStore(local, s);
    local.remember("t:here", new TextEncoder().encode("kept here"));
    peer.answer((cmd) => (cmd === "MGET" ? ":1\r\n" : "-ERR\r\n"));
    expect([...(await tiered.recallMany(["t:here", "t:elsewhere", "t:other"]))]).toEqual([["t:here", "kept here"]]);
    peer.answer((cmd) => (cmd === "MGET" ? "*1\r\n:5\r\n" : "-ERR\r\n"));
    expect([...(await tiered.recallMany(["t:elsewhere"]))]).toEqual([]);
    expect(failures.read).toBe(2);
  });
});

describe("keys by kind (a real redis-server)", () => {
  const suite = redisSuite();

  it("a stored response and remembered reasoning never share a key: no call id reads a response", async () => {
    const shared = new SharedStore({ url: suite.server.url, ttlMs: 60_000, timeoutMs: 2000 });
    suite.opened.push(shared);
    expect(await shared.waitReady(10_000)).toBe(true);
    const responses = new ResponseStore({ maxBytes: 1 << 20, ttlMs: 60_000, timeoutMs: 2000 }, shared);
    const record = { response: { id: "resp_1", object: "response", status: "completed" }, input: [] };
    expect(await responses.put("alice", "resp_1", record)).toBe("stored");
    expect(await suite.probe.exists(storeKey("resp", `${memoScope("alice")}resp_1`))).toBe(1);
    // reasoning is read under cot:, whatever the tool call id says
    const tiered = new TieredStore(new CotStore({ maxBytes: 1 << 20, maxEntries: 100, ttlMs: 60_000 }), shared);
    const scope = memoScope("alice");
    const ids = [`${scope}resp_1`, `${scope}response:resp_1`, `${scope}../resp:alice:resp_1`, `${scope}resp:alice:resp_1`];
    expect((await tiered.recallMany(ids)).size).toBe(0);
    tiered.remember(`${scope}call_1`, new TextEncoder().encode("thought"));
    await until(() => shared.stats.written === 1);
    expect(await suite.probe.get(storeKey("cot", `${scope}call_1`))).toBe("thought");
    expect((await responses.get("alice", "call_1")).ok).toBe(false);
    expect(await suite.probe.keys("hs:v1:*")).toEqual([]);
  });
});
