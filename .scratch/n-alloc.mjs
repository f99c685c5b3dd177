import { Session } from "node:inspector/promises";
import { pino } from "pino";
import { Server } from "/work/main/dist/src/server.js";
import { DEFAULT_LIMITS } from "/work/main/dist/src/service/service.js";
import { ATTACKS_32 } from "/work/main/dist/bench/hostile/attacks-32.js";
const svc = new Server({ host: "127.0.0.1", port: 0, grpcPort: 0, workers: 1, drainTimeoutMs: 5000, logger: pino({ level: "silent" }), limits: { ...DEFAULT_LIMITS, maxConnectionBytes: 16 << 20 } });
const started = svc.start(); await started;
const { grpcPort } = await started;
console.log("grpc", grpcPort);
const run = ATTACKS_32.find((x) => x.key === "n").prepare({ grpc: `127.0.0.1:${grpcPort}` });
await run();
const s = new Session(); s.connect();
await s.post("HeapProfiler.enable");
await s.post("HeapProfiler.startSampling", { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
const t0 = Date.now(); let n = 0;
while (Date.now() - t0 < 1000) { await run(); n++; }
const { profile } = await s.post("HeapProfiler.stopSampling");
const self = new Map();
const walk = (node, stack) => {
  const f = node.callFrame; const k = `${f.functionName || "(anon)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber}`;
  const st = [...stack, k];
  if (node.selfSize > 0) { const key = st.slice(-3).join(" < "); self.set(key, (self.get(key) ?? 0) + node.selfSize); }
  for (const c of node.children) walk(c, st);
};
walk(profile.head, []);
console.log("reps", n);
console.log([...self].sort((a, b) => b[1] - a[1]).slice(0, 30).map(([k, v]) => `${(v / 1048576).toFixed(1).padStart(7)} MB  ${k.split(" < ").reverse().join(" < ")}`).join("\n"));
await svc.stop();
process.exit(0);
