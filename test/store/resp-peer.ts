/**
 * A fake store peer for tests: a small server on a Unix socket that speaks
 * enough RESP2 (https://redis.io/docs/latest/develop/reference/protocol-spec/)
 * for ioredis to connect (PING, INFO, CLIENT SETNAME, SELECT, QUIT) and
 * answers every data command (GET, MGET, SET, DEL) with the bytes a test
 * scripts: a reply of the wrong type, a wrong count, an error, bytes that
 * are not RESP at all. A store is a network peer; this is one that answers
 * anything. The real redis-server (./redis-server.ts) covers the rest.
 */
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

/** What the peer answers to one data command: the raw bytes of the reply, or null to stay silent. */
export type Answer = (command: string, args: string[]) => string | Buffer | null;

export interface RespPeer {
  /** The store URL the service takes (`unix:///…`). */
  url: string;
  /** Every command received (upper-case name and arguments), in order. */
  commands: string[][];
  /** Change what data commands are answered with. */
  answer(a: Answer): void;
  close(): Promise<void>;
}

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

/**
 * Read the RESP arrays of bulk strings (what a client sends) at the front of
 * `buf`: the commands, and how many bytes they took. A command that is not
 * complete yet is left for the next read.
 */
function readCommands(buf: Buffer): { commands: string[][]; used: number } {
  const commands: string[][] = [];
  let at = 0;
  for (;;) {
    const start = at;
    const line = (): string | null => {
      const end = buf.indexOf("\r\n", at);
      if (end === -1) return null;
      const l = buf.subarray(at, end).toString("latin1");
      at = end + 2;
      return l;
    };
    const head = line();
    if (head === null || !head.startsWith("*")) return { commands, used: start };
    const n = Number(head.slice(1));
    const parts: string[] = [];
    let complete = true;
    for (let i = 0; i < n; i++) {
      const len = line();
      if (len === null || !len.startsWith("$")) {
        complete = false;
        break;
      }
      const size = Number(len.slice(1));
      if (buf.length < at + size + 2) {
        complete = false;
        break;
      }
      parts.push(buf.subarray(at, at + size).toString("utf8"));
      at += size + 2;
    }
    if (!complete) return { commands, used: start };
    commands.push([parts[0]!.toUpperCase(), ...parts.slice(1)]);
  }
}

/** Start a peer whose data commands are answered by `initial`. */
export async function startRespPeer(initial: Answer): Promise<RespPeer> {
  const dir = mkdtempSync(path.join(tmpdir(), "hs-resp-"));
  const socketPath = path.join(dir, "peer.sock");
  let answer = initial;
  const commands: string[][] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const { commands: got, used } = readCommands(pending);
      pending = pending.subarray(used);
      for (const [name, ...args] of got) {
        commands.push([name!, ...args]);
        switch (name) {
          case "PING":
            socket.write("+PONG\r\n");
            break;
          case "INFO":
            // what ioredis's ready check reads: the server is not loading
            socket.write(bulk("# Server\r\nredis_version:7.2.0\r\n# Persistence\r\nloading:0\r\n"));
            break;
          case "CLIENT":
          case "SELECT":
          case "AUTH":
            socket.write("+OK\r\n");
            break;
          case "QUIT":
            socket.end("+OK\r\n");
            break;
          default: {
            const reply = answer(name!, args);
            if (reply !== null) socket.write(reply);
          }
        }
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    url: `unix://${socketPath}`,
    commands,
    answer(a) {
      answer = a;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
