/**
 * What the text-step suites (./chat-text.test.ts, ./responses-text.test.ts)
 * share: a service with no workers, a drain that keeps each connection's
 * bytes, answers written on fresh sockets to it, and a written response
 * normalized so that two answers fed the same completion compare as text.
 */
import type http from "node:http";
import net from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll } from "vitest";
import { DEFAULT_LIMITS, DEFAULTS, Service } from "../../src/service/service.js";
import { responseOn } from "../../bench/front/response-on.js";

/** Starts the service and the drain before the file's tests and closes them after; `svc()` is the service. */
export function answerDrain(): {
  svc: () => Service;
  response: () => Promise<{ res: http.ServerResponse; body: () => Promise<string> }>;
} {
  let svc: Service;
  let drain: net.Server;
  const bodies = new Map<number, Buffer[]>();
  beforeAll(async () => {
    svc = new Service({ ...DEFAULTS, workers: 0, limits: DEFAULT_LIMITS, logger: pino({ level: "silent" }) });
    svc.start();
    // the answers' sockets end here: each connection's bytes, by its client port
    drain = net.createServer((c) => {
      const parts: Buffer[] = [];
      bodies.set(c.remotePort!, parts);
      c.on("data", (b: Buffer) => parts.push(b));
    });
    await new Promise<void>((r) => drain.listen(0, "127.0.0.1", r));
  });
  afterAll(async () => {
    await new Promise((r) => drain.close(r));
    await svc.close();
  });
  /** A streamed response to an HTTP/1.1 POST on a fresh socket to the drain, and a promise of all its bytes once it ends. */
  const response = async () => {
    const sock = net.connect((drain.address() as net.AddressInfo).port, "127.0.0.1");
    await new Promise((r) => sock.once("connect", r));
    const res = responseOn(sock);
    const port = sock.localPort!;
    const body = async () => {
      await new Promise((r) => (res.writableFinished ? r(null) : res.once("finish", r)));
      sock.end();
      await new Promise((r) => sock.once("close", r));
      // the drain has read what was written once the socket closed
      return Buffer.concat(bodies.get(port) ?? []).toString("utf8");
    };
    return { res, body };
  };
  return { svc: () => svc, response };
}

/**
 * A response as its head and its HTTP/1.1 chunks (their sizes and the Date
 * and content-length headers set aside): the same writes give the same text.
 */
export function normalized(raw: string): string {
  const at = raw.indexOf("\r\n\r\n");
  const head = raw.slice(0, at).replace(/\r\n(Date|content-length): [^\r]*/gi, "");
  const bytes = Buffer.from(raw.slice(at + 4), "utf8");
  const chunks: string[] = [];
  if (!/transfer-encoding: chunked/i.test(head)) chunks.push(bytes.toString("utf8"));
  else
    for (let i = 0; i < bytes.length;) {
      const eol = bytes.indexOf("\r\n", i);
      const size = parseInt(bytes.subarray(i, eol).toString("latin1"), 16);
      chunks.push(bytes.subarray(eol + 2, eol + 2 + size).toString("utf8"));
      i = eol + 2 + size + 2;
      if (size === 0) break;
    }
  return [head, ...chunks].join("\n---\n");
}
