/**
 * The plain pass-through the fronts are measured against: a node:http
 * server that sends each request on to the engine as it came (method, path,
 * headers, body) and pipes the engine's answer back chunk by chunk, with
 * node's own backpressure and nothing parsed. What any Node proxy in front of
 * an SSE stream costs at least.
 *
 * Run by ./main.ts as a child process: `node relay.js --upstream URL`; prints
 * `{"ready":true,"port":…}` when it listens.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Command } from "commander";

const opts = new Command()
  .requiredOption("--upstream <url>", "the engine")
  .option("--port <n>", "port (0: any free port)", (v) => Number(v), 0)
  .parse()
  .opts<{ upstream: string; port: number }>();

const up = new URL(opts.upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

const server = http.createServer((req, res) => {
  const out = http.request(
    { host: up.hostname, port: up.port, method: req.method, path: req.url, headers: { ...req.headers, host: up.host }, agent },
    (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    },
  );
  out.on("error", () => res.destroy());
  res.on("close", () => {
    if (!res.writableFinished) out.destroy();
  });
  req.pipe(out);
});
server.keepAliveTimeout = 60_000;
server.listen(opts.port, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
