/**
 * Readings of the servers from outside: CPU time and RSS from /proc, and the
 * service's own Prometheus metrics (its frame latency histogram).
 */
import { readFileSync } from "node:fs";
import http from "node:http";

const CLK_TCK = 100;

/** CPU seconds of a process (all threads) and of its main thread. */
export function procCpu(pid: number): { total: number; main: number } {
  const read = (file: string) => {
    const f = readFileSync(file, "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(rest[11]) + Number(rest[12])) / CLK_TCK; // utime + stime
  };
  try {
    return { total: read(`/proc/${pid}/stat`), main: read(`/proc/${pid}/task/${pid}/stat`) };
  } catch {
    return { total: NaN, main: NaN };
  }
}

export function vmRssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : NaN;
}

export async function fetchMetrics(port: number): Promise<Record<string, number>> {
  const text = await new Promise<string>((resolve, reject) => {
    http
      .get(`http://127.0.0.1:${port}/metrics`, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve(body));
      })
      .on("error", reject);
  });
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.startsWith("harmony_") || line.startsWith("harmony_process_")) continue;
    const i = line.lastIndexOf(" ");
    const key = line.slice(0, i);
    if (key.includes("_bucket") && !key.startsWith("harmony_frame_latency")) continue;
    out[key] = Number(line.slice(i + 1));
  }
  return out;
}

/**
 * The service's own time per frame (harmony_frame_latency_seconds: a frame
 * read to its answer handed to the socket) between two readings of its
 * metrics: the share of frames within each bucket's bound.
 */
export function frameTimeShares(
  before: Record<string, number>,
  after: Record<string, number>,
): { frames: number; within: { ms: number; pct: number }[] } {
  const cum = new Map<number, number>();
  for (const [key, v] of Object.entries(after)) {
    const le = /^harmony_frame_latency_seconds_bucket\{.*le="([^"]+)"/.exec(key)?.[1];
    if (le === undefined) continue;
    const bound = le === "+Inf" ? Infinity : Number(le) * 1000;
    cum.set(bound, (cum.get(bound) ?? 0) + v - (before[key] ?? 0));
  }
  const frames = cum.get(Infinity) ?? 0;
  const within = [...cum.entries()]
    .filter(([b]) => b !== Infinity && b <= 10)
    .sort((x, y) => x[0] - y[0])
    .map(([ms, n]) => ({ ms, pct: frames === 0 ? 0 : (100 * n) / frames }));
  return { frames, within };
}

/** Mean of the service's frame latency histogram (read to answer handed to the socket), µs. */
export function frameServiceUs(mt: Record<string, number>): string {
  const sum = Object.entries(mt).find(([k]) => k.startsWith("harmony_frame_latency_seconds_sum"))?.[1];
  const count = Object.entries(mt).find(([k]) => k.startsWith("harmony_frame_latency_seconds_count"))?.[1];
  return sum !== undefined && count ? ((sum / count) * 1e6).toFixed(1) : "n/a";
}
