/**
 * A real Service behind a tiny HTTP server that routes the inspector's paths
 * to src/transport/inspect.ts's handlers, as the HTTP edge will once
 * src/transport/http.ts routes them (then `new Server({...})` serves them
 * and this file can go).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { DEFAULT_LIMITS, Service, type Limits } from "../../src/service/service.js";
import { closeInspect, handleInspect, handleParse, inspectRoute, PARSE_PATH } from "../../src/transport/inspect.js";

export interface InspectServer {
  url: string;
  service: Service;
  close(): Promise<void>;
}

export async function startInspectServer(opts: { token?: string; limits?: Partial<Limits> } = {}): Promise<InspectServer> {
  const service = new Service({
    workers: 0,
    limits: { ...DEFAULT_LIMITS, ...opts.limits },
    drainTimeoutMs: 1000,
    token: opts.token,
    logger: pino({ level: "silent" }),
  });
  service.start();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (inspectRoute(url.pathname)) return url.pathname === PARSE_PATH ? handleParse(service, req, res) : handleInspect(req, res);
    res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    service,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeInspect();
      await service.close();
    },
  };
}
