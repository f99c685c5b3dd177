/**
 * A streamed answer's writes: what a turn of the event loop writes goes in one
 * write at the turn's end (after the first write, at the next turn's end; at
 * once past a socket buffer's worth) for a client that keeps up; what is ready
 * while it is behind, in one write at its drain.
 */
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { chunkOf, ClientFlow, directSocket } from "../../src/transport/client-flow.js";

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

/** The rest of this turn of the event loop (what is due at its end has gone). */
const turn = () => new Promise((r) => setImmediate(r));

describe("ClientFlow", () => {
  it("writes what a turn wrote in one write at the turn's end when the client is not behind", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("data: a\n\n");
    flow.write("data: b\n\n");
    expect(c.writes).toEqual([]);
    expect(flow.wait()).toBeNull();
    await turn();
    expect(c.writes).toEqual(["data: a\n\ndata: b\n\n"]);
    c.release();
  });

  it("writes at once what passes a socket buffer's worth in one turn, and hears the client's backpressure then", () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    const big = `data: ${"x".repeat(16 * 1024)}\n\n`;
    flow.write("data: a\n\n");
    flow.write(big);
    expect(c.writes).toEqual([`data: a\n\n${big}`]);
    expect(flow.wait()).not.toBeNull();
    c.release();
  });

  it("coalesces what is ready while the client is behind into one write at its drain", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("data: a\n\n");
    await turn(); // written, and over the mark: the client is behind
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
    await turn();
    await turn(); // (not the first write: it waits one turn more)
    expect(c.writes.at(-1)).toBe("data: d\n\n");
    c.release();
  });

  it("after the first write, a due write waits one turn more: what that turn writes goes with it, and nothing waits longer", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("data: a\n\n");
    await turn();
    // the first (a stream's first token) at the first turn's end
    expect(c.writes).toEqual(["data: a\n\n"]);
    c.release();
    flow.write("data: b\n\n");
    await turn();
    expect(c.writes).toEqual(["data: a\n\n"]);
    // what the next turn reads joins it, in the write at that turn's end
    flow.write("data: c\n\n");
    await turn();
    expect(c.writes).toEqual(["data: a\n\n", "data: b\n\ndata: c\n\n"]);
    c.release();
    // a turn that reads nothing more: the write goes at its end all the same
    flow.write("data: d\n\n");
    await turn();
    expect(c.writes).toHaveLength(2);
    await turn();
    expect(c.writes.at(-1)).toBe("data: d\n\n");
    c.release();
    // a socket buffer's worth does not wait
    const big = `data: ${"x".repeat(16 * 1024)}\n\n`;
    flow.write(big);
    expect(c.writes.at(-1)).toBe(big);
    c.release();
  });

  it("flush writes what this turn wrote and what is held, in order, before the answer's last writes", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("1");
    flow.write("2");
    flow.flush();
    expect(c.writes).toEqual(["12"]);
    await turn(); // nothing left for the turn's end
    expect(c.writes).toEqual(["12"]);
    c.release();
    flow.write("3");
    await turn(); // over the mark: the next writes are held
    flow.write("4");
    flow.write("5");
    flow.flush();
    c.release(); // "3" taken: the socket takes the next
    expect(c.writes).toEqual(["12", "3", "45"]);
    c.release(); // the last write taken: the drain ends the wait
  });

  it("rest takes what this turn wrote and what is held, in order, for the answer's end to write: nothing of it is sent after", async () => {
    const c = client();
    const flow = new ClientFlow(c.sock, 60_000, () => undefined);
    flow.write("1");
    flow.write("2");
    expect(flow.rest()).toBe("12");
    await turn(); // the turn's end finds nothing
    expect(c.writes).toEqual([]);
    flow.write("3");
    await turn(); // over the mark: the next writes are held
    expect(c.writes).toEqual(["3"]);
    flow.write("4");
    flow.write("5");
    expect(flow.rest()).toBe("45");
    c.release(); // the drain ends the wait, with nothing held to write
    await flow.wait();
    expect(c.writes).toEqual(["3"]);
    expect(flow.rest()).toBe("");
  });
});

describe("ClientFlow on a real socket", () => {
  const servers: http.Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  /** A node:http server whose handler gets each request; its port once it listens (127.0.0.1, port 0). */
  async function serve(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<number> {
    const server = http.createServer(handler);
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return (server.address() as AddressInfo).port;
  }

  /** `request` (raw bytes) sent on a fresh connection; everything the server sent, once it closes or `until` holds. */
  function raw(port: number, request: string, until: (got: string) => boolean): Promise<string> {
    return new Promise((resolve, reject) => {
      let got = "";
      const sock = net.connect(port, "127.0.0.1", () => sock.write(request));
      sock.setEncoding("latin1");
      sock.on("data", (d: string) => {
        got += d;
        if (until(got)) {
          sock.destroy();
          resolve(got);
        }
      });
      sock.on("end", () => resolve(got));
      sock.on("error", reject);
    });
  }

  const sse = (res: http.ServerResponse) => res.writeHead(200, { "content-type": "text/event-stream" });
  // multi-byte text: a chunk's size line counts bytes, not characters
  const CHUNKS = ["data: a\n\n", 'data: {"t":"é"}\n\n', "data: 🦀 \u00e9t\u00e9\n\n", "data: b\n\n"];
  const utf8 = (s: string) => Buffer.from(s).toString("latin1");

  /** A server that answers each request with CHUNKS through a ClientFlow and then `res.end(last)`; `seen.direct`: what directSocket said of the last one. */
  async function serveChunks(last?: string): Promise<{ port: number; seen: { direct: unknown } }> {
    const seen: { direct: unknown } = { direct: "unset" };
    const port = await serve((_req, res) => {
      sse(res);
      seen.direct = directSocket(res);
      const flow = new ClientFlow(res, 60_000, () => undefined);
      void (async () => {
        // each chunk two turns apart (after the first, a write waits one turn more), so in a write of its own
        for (const c of CHUNKS) {
          flow.write(c);
          flow.write(""); // nothing: an empty chunk would end the body
          await turn();
          await turn();
        }
        flow.flush(); // as the answers do before their last writes
        res.end(last);
      })();
    });
    return { port, seen };
  }

  it("writes each chunk to the socket as one HTTP/1.1 chunk, byte for byte what node frames, and node's own end after them", async () => {
    const { port, seen } = await serveChunks("data: [DONE]\n\n");
    const got = await raw(port, "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n", (g) => g.endsWith("\r\n0\r\n\r\n"));
    expect(seen.direct).not.toBeNull();
    const body = got.slice(got.indexOf("\r\n\r\n") + 4);
    expect(got).toMatch(/transfer-encoding: chunked/i);
    expect(body).toBe(utf8(CHUNKS.map(chunkOf).join("") + chunkOf("data: [DONE]\n\n") + "0\r\n\r\n"));
    expect(chunkOf("é")).toBe("2\r\né\r\n");
    // and a real HTTP client reads the same text
    const text = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, method: "POST", agent: false }, (res) => {
        res.setEncoding("utf8");
        let all = "";
        res.on("data", (d: string) => (all += d));
        res.on("end", () => resolve(all));
      });
      req.on("error", reject);
      req.end();
    });
    expect(text).toBe(CHUNKS.join("") + "data: [DONE]\n\n");
  });

  it("an HTTP/1.0 client (no chunks) gets the plain body through res.write", async () => {
    const { port, seen } = await serveChunks();
    const got = await raw(port, "POST / HTTP/1.0\r\ncontent-length: 0\r\n\r\n", () => false);
    expect(seen.direct).toBeNull();
    expect(got.slice(got.indexOf("\r\n\r\n") + 4)).toBe(utf8(CHUNKS.join("")));
  });

  it("a pipelined response waits for the one before it: its chunks are not written ahead of it", async () => {
    let release!: () => void;
    const firstMayEnd = new Promise<void>((r) => (release = r));
    let second: unknown = "unset";
    const port = await serve((req, res) => {
      sse(res);
      const flow = new ClientFlow(res, 60_000, () => undefined);
      if (req.url === "/1") {
        flow.write("data: first\n\n");
        void firstMayEnd.then(() => {
          flow.flush();
          res.end("data: first end\n\n");
        });
        return;
      }
      // the second request's response has no socket yet: its writes are held by node, in order
      second = directSocket(res);
      flow.write("data: second\n\n");
      flow.flush();
      res.end();
      release();
    });
    const req = (path: string) => `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n`;
    const got = await raw(port, req("/1") + req("/2"), (g) => (g.match(/\r\n0\r\n\r\n/g) ?? []).length === 2);
    expect(second).toBeNull();
    // the first answer whole (its end chunk included), then the second's head, then its chunk
    const order = [
      got.indexOf("first\n"),
      got.indexOf("first end"),
      got.indexOf("0\r\n\r\n"),
      got.indexOf("HTTP/1.1 200", 1),
      got.indexOf("second\n"),
    ];
    expect(order.every((at) => at > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("a client that stops reading holds the engine back on the socket's own drain, and gets every chunk in order once it reads", async () => {
    const big = "x".repeat(64 * 1024);
    let waited = 0;
    let wrote = 0;
    const port = await serve((_req, res) => {
      sse(res);
      const flow = new ClientFlow(res, 60_000, () => undefined);
      void (async () => {
        // as the generation does: the next chunk only once wait() lets it (the socket over its mark holds it)
        for (let i = 0; i < 64; i++) {
          flow.write(`data: ${i} ${big}\n\n`);
          wrote++;
          const w = flow.wait();
          if (w !== null) {
            waited++;
            await w;
          }
        }
        res.end("data: [DONE]\n\n");
      })();
    });
    const got = await raw(port, "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n", (g) => g.endsWith("\r\n0\r\n\r\n"));
    expect(wrote).toBe(64);
    expect(waited).toBeGreaterThan(0);
    const body = got.slice(got.indexOf("\r\n\r\n") + 4);
    const texts = Array.from({ length: 64 }, (_, i) => `data: ${i} ${big}\n\n`);
    expect(body).toBe(texts.map(chunkOf).join("") + chunkOf("data: [DONE]\n\n") + "0\r\n\r\n");
  });
});
