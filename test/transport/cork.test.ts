/** The WebSocket transport's cork: answers of one tick share a write, and once they have waited MAX_CORK_MS they go before the next frame or answer. */
import { describe, expect, it } from "vitest";
import { Cork, MAX_CORK_MS } from "../../src/transport/http.js";

function rig() {
  const log: string[] = [];
  let t = 0;
  const ticks: (() => void)[] = [];
  const cork = new Cork(
    { cork: () => log.push("cork"), uncork: () => log.push("uncork") },
    () => t,
    (f) => ticks.push(f),
  );
  const write = () => {
    cork.beforeWrite();
    log.push("write");
  };
  // like process.nextTick: callbacks queued while the queue runs run too
  const endTick = () => {
    while (ticks.length > 0) ticks.shift()!();
  };
  return { log, write, endTick, cork, advance: (ms: number) => (t += ms) };
}

describe("Cork", () => {
  it("corks once per tick and lets go at its end", () => {
    const r = rig();
    r.write();
    r.write();
    r.write();
    expect(r.log).toEqual(["cork", "write", "write", "write"]);
    r.endTick();
    expect(r.log.at(-1)).toBe("uncork");
    r.write();
    expect(r.log.slice(-2)).toEqual(["cork", "write"]);
  });

  it("lets go mid-tick once answers have waited MAX_CORK_MS, then corks the rest", () => {
    const r = rig();
    r.write();
    r.advance(MAX_CORK_MS / 2);
    r.write(); // still within the bound: shares the write
    r.advance(MAX_CORK_MS); // the first answer has now waited 1.5 × the bound
    r.write();
    expect(r.log).toEqual(["cork", "write", "write", "uncork", "cork", "write"]);
    r.endTick(); // both tick-end callbacks: the second cork is let go once
    expect(r.log.filter((x) => x === "uncork")).toHaveLength(2);
    expect(r.log.at(-1)).toBe("uncork");
  });

  it("lets go before the next frame once answers have waited MAX_CORK_MS, even if no answer follows", () => {
    const r = rig();
    r.write();
    r.cork.check(); // the next frame, at once: keep holding
    expect(r.log).toEqual(["cork", "write"]);
    r.advance(MAX_CORK_MS * 2); // a frame that took long and answered nothing
    r.cork.check();
    expect(r.log).toEqual(["cork", "write", "uncork"]);
    r.endTick();
    expect(r.log).toEqual(["cork", "write", "uncork"]);
  });

  it("a write after release in the same tick corks again and is let go at the tick's end", () => {
    const r = rig();
    r.write();
    r.cork.release(); // the transport's end(): what is held goes first
    r.write();
    expect(r.log).toEqual(["cork", "write", "uncork", "cork", "write"]);
    r.endTick();
    expect(r.log.at(-1)).toBe("uncork");
    expect(r.log.filter((x) => x === "cork").length).toBe(r.log.filter((x) => x === "uncork").length);
  });

  it("release hands over what is corked, and is harmless when nothing is", () => {
    const r = rig();
    r.cork.release();
    expect(r.log).toEqual([]);
    r.write();
    r.cork.release();
    r.endTick();
    expect(r.log).toEqual(["cork", "write", "uncork"]);
  });
});
