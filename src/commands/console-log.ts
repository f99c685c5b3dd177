/**
 * `serve`'s log lines for a person at a terminal: the line that says where
 * the server listens becomes a banner (the URLs of every edge, the
 * inspector, how to stop), every other line one short line (time, level,
 * message, fields). Anywhere else (a pipe, a file, a container's log) the
 * lines stay pino's JSON, unchanged.
 */
import { SERVER_DEFAULTS } from "../core/defaults.js";
import { SERVING_MESSAGE } from "../server.js";

/** pino's numeric levels, by name. */
const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };

/** Fields every line has, left out of the short form. */
const COMMON = new Set(["level", "time", "pid", "hostname", "msg", "service"]);

/** A host as a URL's authority holds it: a wildcard bind is reached on the loopback address, an IPv6 literal in brackets. */
export function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "[::1]";
  return host.includes(":") ? `[${host}]` : host;
}

/** The banner for the serving line's fields (port, grpcPort, host, workers, upstream, …). */
export function banner(rec: Record<string, unknown>, version: string): string {
  const host = String(rec.host ?? SERVER_DEFAULTS.host);
  const h = urlHost(host);
  const http = `http://${h}:${String(rec.port)}`;
  const rows: [string, string][] = [["WebSocket", `ws://${h}:${String(rec.port)}/v1/stream`]];
  if (typeof rec.grpcPort === "number") rows.push(["gRPC", `${h}:${rec.grpcPort}  (harmony.v1.Harmony/Stream)`]);
  if (typeof rec.upstream === "string")
    rows.push(["OpenAI API", `${http}/v1  (in front of ${String(rec.upstream_kind)} at ${rec.upstream})`]);
  rows.push(["Inspector", `${http}/inspect`]);
  rows.push(["Metrics", `${http}/metrics`]);
  rows.push(["Health", `${http}/healthz, ${http}/readyz`]);
  const width = Math.max(...rows.map(([k]) => k.length));
  const workers = Number(rec.workers ?? 0);
  const lines = [
    `harmony-sidecar ${version} is serving (started in ${String(rec.startup_ms)} ms; ${workers === 0 ? "parsing on the main thread" : `${workers} worker thread${workers === 1 ? "" : "s"}`}${rec.auth ? "; bearer token required" : ""})`,
    ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`),
  ];
  if (host === "0.0.0.0" || host === "::") lines.push(`  (listening on every interface of this machine)`);
  lines.push("Press Ctrl+C to stop.");
  return lines.join("\n") + "\n";
}

/** One record in the short form: `12:34:56 WARN  message  key=value …`. */
export function shortLine(rec: Record<string, unknown>): string {
  const t = typeof rec.time === "number" ? new Date(rec.time) : new Date();
  const time = t.toTimeString().slice(0, 8);
  const level = (LEVELS[Number(rec.level)] ?? String(rec.level)).padEnd(5);
  const fields = Object.entries(rec)
    .filter(([k]) => !COMMON.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  return `${time} ${level} ${String(rec.msg ?? "")}${fields.length > 0 ? "  " + fields.join(" ") : ""}\n`;
}

/** A pino destination writing the short form (and the banner) to `out`. */
export function consoleDestination(out: { write(s: string): unknown }, version: string): { write(line: string): void } {
  return {
    write(line: string): void {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      out.write(rec.msg === SERVING_MESSAGE ? banner(rec, version) : shortLine(rec));
    },
  };
}
