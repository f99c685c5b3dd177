/**
 * The hostile bench's probe thread (bench/hostile/main.ts starts it as a
 * worker): GET /healthz every PROBE_MS on a fixed schedule and read the
 * service's RSS as often, so that building and reading the attacks on the
 * main thread does not delay either. Between "begin" and "end" the probes
 * are counted for the attack's window; "report" posts the window's figures
 * once its last probe has answered.
 */
import http from "node:http";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { PROBE_MS, rssOf, type ProbeReport } from "./common.js";

function probeThread(port: number, pid: number): void {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  let window: { lat: number[]; failed: number; pending: number; open: boolean; rssPeak: number; reportWhenDone: boolean } | null = null;
  let exited = false;
  let stopped = false;
  const t0 = performance.now();
  let k = 0;

  const maybeReport = () => {
    const w = window;
    if (!w || !w.reportWhenDone || w.pending > 0) return;
    const s = [...w.lat].sort((a, b) => a - b);
    const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]! : NaN);
    const report: ProbeReport = {
      probes: s.length + w.failed,
      failed: w.failed,
      p50: q(0.5),
      p99: q(0.99),
      max: s.length ? s[s.length - 1]! : NaN,
      rssPeak: w.rssPeak,
      rssEnd: rssOf(pid),
      exited,
    };
    window = null;
    parentPort!.postMessage(report);
  };

  const probe = (due0: number) => {
    // timers may fire a little early: time a probe from when it was due or sent, whichever came first
    const due = Math.min(due0, performance.now());
    const w = window?.open ? window : null;
    if (w) w.pending++;
    const done = (ok: boolean) => {
      if (!w) return;
      w.pending--;
      if (ok) w.lat.push(performance.now() - due);
      else w.failed++;
      maybeReport();
    };
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent, timeout: 60_000 }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode === 200));
      res.on("error", () => done(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(false));
  };

  const tick = () => {
    if (stopped) return;
    const due = t0 + k * PROBE_MS;
    probe(due);
    const rss = rssOf(pid);
    if (rss === null) exited = true;
    else if (window && rss > window.rssPeak) window.rssPeak = rss;
    // the next due time; a late tick skips none (each probe is timed from when it was due)
    k++;
    setTimeout(tick, Math.max(0, t0 + k * PROBE_MS - performance.now()));
  };
  tick();

  parentPort!.on("message", (m: string) => {
    if (m === "begin") window = { lat: [], failed: 0, pending: 0, open: true, rssPeak: rssOf(pid) ?? 0, reportWhenDone: false };
    else if (m === "end" && window) window.open = false;
    else if (m === "report" && window) {
      window.reportWhenDone = true;
      maybeReport();
    } else if (m === "stop") {
      stopped = true;
      agent.destroy();
      parentPort!.close();
    }
  });
}

if (!isMainThread) {
  const d = workerData as { port: number; pid: number };
  probeThread(d.port, d.pid);
}
