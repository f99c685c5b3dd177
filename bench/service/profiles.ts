/** --cpu-prof: self and inclusive time per function in the service child's CPU profiles. */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

interface ProfNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** Functions whose inclusive time the profile summary lists. */
const INCLUSIVE = [
  "onFrame",
  "readBinaryFrame",
  "postTask",
  "sendFrame",
  "writev",
  "recordCounts",
  "handle",
  "write",
  "toWire",
  "encodeServerFrame",
  "(garbage collector)",
];

/**
 * Self and inclusive time per function of each thread's profile, counted
 * from the thread's first frame-handling sample (start-up excluded); idle
 * time (event loop idle, piscina's Atomics.wait) is left out of the busy total.
 */
export function summariseProfiles(dir: string, top: number) {
  const out: {
    file: string;
    thread: string;
    sampled_ms: number;
    idle_pct: number;
    top_self: { fn: string; pct: number }[];
    inclusive: { fn: string; pct: number }[];
  }[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
    const p = JSON.parse(readFileSync(path.join(dir, file), "utf8")) as { nodes: ProfNode[]; samples: number[]; timeDeltas: number[] };
    const byId = new Map<number, ProfNode>(p.nodes.map((nd) => [nd.id, nd]));
    const parent = new Map<number, number>();
    for (const nd of p.nodes) for (const c of nd.children ?? []) parent.set(c, nd.id);
    const label = (nd: ProfNode) => {
      const cf = nd.callFrame;
      const where = cf.url ? ` ${cf.url.replace(/^.*\/(node_modules\/|dist\/)/, "$1")}:${cf.lineNumber + 1}` : "";
      return `${cf.functionName || "(anonymous)"}${where}`;
    };
    const self = new Map<string, number>();
    const incl = new Map<string, number>();
    let total = 0;
    let idle = 0;
    let started = false;
    for (let i = 0; i < p.samples.length; i++) {
      const nd = byId.get(p.samples[i]!);
      if (!nd) continue;
      const names = new Set<string>();
      for (let id: number | undefined = nd.id; id !== undefined; id = parent.get(id)) names.add(byId.get(id)!.callFrame.functionName);
      if (!started) {
        if (!names.has("onFrame") && !names.has("handle")) continue;
        started = true;
      }
      const dt = Math.max(0, p.timeDeltas[i] ?? 0);
      total += dt;
      const fn = nd.callFrame.functionName;
      if (fn === "(idle)" || fn === "atomicsWaitLoop") {
        idle += dt;
        continue;
      }
      const key = label(nd);
      self.set(key, (self.get(key) ?? 0) + dt);
      for (const n of names) if (INCLUSIVE.includes(n)) incl.set(n, (incl.get(n) ?? 0) + dt);
    }
    const busy = Math.max(1, total - idle);
    const parts = file.split(".");
    out.push({
      file,
      thread: parts[4] === "0" ? "main thread" : `worker thread ${parts[4]}`,
      sampled_ms: total / 1000,
      idle_pct: (100 * idle) / Math.max(1, total),
      top_self: [...self.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([fn, us]) => ({ fn, pct: (100 * us) / busy })),
      inclusive: [...incl.entries()].sort((a, b) => b[1] - a[1]).map(([fn, us]) => ({ fn, pct: (100 * us) / busy })),
    });
  }
  return out;
}
