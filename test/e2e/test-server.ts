/** A real server for end-to-end tests: loopback, port 0, silent, closed by the caller. */
import { pino } from "pino";
import { Server, type ServerOptions } from "../../src/server.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";

export interface TestServer {
  server: Server;
  /** http://127.0.0.1:PORT */
  http: string;
  /** ws://127.0.0.1:PORT/v1/stream */
  ws: string;
  /** 127.0.0.1:PORT of the gRPC edge (grpcPort -1: none). */
  grpc: string;
}

/** Start a server with test defaults (workers 0, gRPC on a free port), any of them overridden. */
export async function startTestServer(opts: Partial<ServerOptions> = {}): Promise<TestServer> {
  const server = new Server({
    host: "127.0.0.1",
    port: 0,
    grpcPort: 0,
    workers: 0,
    drainTimeoutMs: 2000,
    limits: DEFAULT_LIMITS,
    logger: pino({ level: "silent" }),
    ...opts,
  });
  const { port, grpcPort } = await server.start();
  return { server, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}/v1/stream`, grpc: `127.0.0.1:${grpcPort}` };
}
