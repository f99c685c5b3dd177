/**
 * The baselines: a plain `ws` echo server, and a busy echo that spins CPU
 * time per frame before echoing it. Each runs as a child process of the
 * bench's own entry file (`main.js --child echo`).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { WebSocketServer } from "ws";
import { spawnChild, type Child } from "./children.js";
import { opts } from "./flags.js";

/** The bench's entry file, which runs the echo server when given `--child echo`. */
const ENTRY = fileURLToPath(new URL("./main.js", import.meta.url));

/** The echo server; with `workUs`, it spins that long per frame before echoing it (a server as busy as the service, minus the parsing). */
export function startEcho(workUs = 0): Promise<Child> {
  return spawnChild([ENTRY, "--child", "echo", "--echo-work-us", String(workUs)], [], "echo serving");
}

/** The echo child (`--child echo`): echoes every message, after spinning `--echo-work-us` of CPU time when that is set. */
export function runEchoChild(): void {
  // the same transport set-up as src/transport/http.ts, minus the service
  const server = http.createServer((_req, res) => {
    res.writeHead(404);
    res.end();
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 * 1024, perMessageDeflate: false });
  server.on("upgrade", (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const work = opts.echoWorkUs;
      // CPU time, not wall time: a pause of the process (descheduled, GC)
      // delays the frame as it would delay the service's parsing
      const cpu = () => {
        const u = process.cpuUsage();
        return u.user + u.system;
      };
      ws.on("message", (data, isBinary) => {
        if (work > 0) {
          const until = cpu() + work;
          while (cpu() < until);
        }
        ws.send(data as Buffer, { binary: isBinary });
      });
    });
  });
  server.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ msg: "echo serving", port: (server.address() as AddressInfo).port }));
  });
  process.on("SIGTERM", () => process.exit(0));
}
