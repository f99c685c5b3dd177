/** A streamed answer's writes: one at once for a client that keeps up, what is ready coalesced into one write for a client behind. */
import type http from "node:http";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { ClientFlow } from "../../src/transport/client-flow.js";

/** A client socket that takes one write and holds it until `release()`: past its high-water mark at once. */
function client() {
  const writes: string[] = [];
  const pending: (() => void)[] = [];
  const sock = new Writable({
    highWaterMark: 1,
    decodeStrings: false,
    write(chunk: string, _enc, cb) {
      writes.push(String(chunk));
      pending.push(cb);
    },
  });
  const release = () => {
    while (pending.length > 0) pending.shift()!();
  };
  return { sock: sock as unknown as http.ServerResponse, writes, release };
}

describe("ClientFlow", () => {
  it("writes a single chunk at once when the client is not behind", () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("data: a\n\n");
    expect(c.writes).toEqual(["data: a\n\n"]);
  });

  it("coalesces what is ready while the client is behind into one write at its drain", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("data: a\n\n"); // over the mark: the client is behind
    const behind = flow.wait();
    expect(behind).not.toBeNull();
    flow.write("data: b\n\n");
    flow.write("data: c\n\n");
    expect(c.writes).toEqual(["data: a\n\n"]);
    c.release();
    await behind;
    expect(c.writes).toEqual(["data: a\n\n", "data: b\n\ndata: c\n\n"]);
    c.release();
    expect(flow.wait()).toBeNull();
    flow.write("data: d\n\n");
    expect(c.writes.at(-1)).toBe("data: d\n\n");
    c.release();
  });

  it("flush writes what is held, in order, before the answer's last writes", () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("1");
    flow.write("2");
    flow.write("3");
    flow.flush();
    c.release();
    expect(c.writes.join("")).toBe("123");
    expect(c.writes.length).toBe(2);
    c.release(); // the second write taken: the drain ends the wait
  });
});
