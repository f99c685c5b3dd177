/**
 * The engine's Prometheus series, for the sidecar's `/metrics` to serve
 * ahead of its own: read from the engine's Prometheus endpoint (trtllm-serve:
 * `/prometheus/metrics`; its `/metrics` is a JSON list of iteration stats),
 * bounded, and taken only when it is Prometheus text a scrape can parse
 * whole. Anything else is left out, with the reason: one bad line would fail
 * the whole scrape, the sidecar's own `harmony_*` series with it.
 */
import { UPSTREAM_DEFAULTS } from "../core/defaults.js";
import type { Engine, UpstreamConfig } from "./engine.js";
import { ENGINE_RULES } from "./request.js";
import { getText } from "./sse.js";

/**
 * The most of the engine's metrics read: vLLM's, every histogram of one
 * model, are a couple of hundred KB; what is read past that only costs the
 * scrape (and the garbage collector) before it is refused.
 */
export const MAX_UPSTREAM_METRICS_BYTES = 1024 * 1024;

export type MetricsSkip = "unreachable" | "status" | "too_large" | "not_exposition" | "name_clash";

export type EngineMetrics = { ok: true; path: string; text: string } | { ok: false; path: string; reason: MetricsSkip; detail: string };

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** A sample's value as Prometheus reads it (Go's ParseFloat: NaN and Inf in any case). */
const VALUE = /^[+-]?(?:\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)$/i;
const TIMESTAMP = /^-?\d+$/;
const TYPES: ReadonlySet<string> = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** Where a sample line's name ends: at `{`, a space or a tab. */
function nameEnd(line: string): number {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 0x7b || c === 0x20 || c === 0x09) return i;
  }
  return line.length;
}

/** After `{` at `at`: the index just past the closing `}`, or -1 when the labels are not `name="value"` pairs. */
function labelsEnd(line: string, at: number): number {
  let i = at + 1;
  for (;;) {
    while (line[i] === " ") i++;
    if (line[i] === "}") return i + 1;
    const eq = line.indexOf("=", i);
    if (eq === -1 || !LABEL_NAME.test(line.slice(i, eq).trim())) return -1;
    i = eq + 1;
    while (line[i] === " ") i++;
    if (line[i] !== '"') return -1;
    i++;
    // the value: any character but an unescaped quote (escapes: \\, \", \n)
    for (;;) {
      const c = line[i];
      if (c === undefined) return -1;
      if (c === "\\") {
        const e = line[i + 1];
        if (e !== "\\" && e !== '"' && e !== "n") return -1;
        i += 2;
        continue;
      }
      if (c === '"') break;
      i++;
    }
    i++;
    while (line[i] === " ") i++;
    if (line[i] === ",") i++;
    else if (line[i] !== "}") return -1;
  }
}

/**
 * Whether text is Prometheus text exposition (format 0.0.4) that can be put
 * ahead of the sidecar's own, fed in slices that end at line ends: one pass
 * over the lines; no series of the sidecar's (`reserved`) may be in it.
 */
export class ExpositionCheck {
  private readonly typed = new Set<string>();
  private n = 0;
  /** Why the text is not taken, once a slice has shown it. */
  problem: { reason: MetricsSkip; detail: string } | null = null;

  constructor(
    /** Names no series may start with (the sidecar's own); null: any. */
    private readonly reserved: string | null = "harmony_",
  ) {}

  feed(text: string): void {
    let at = 0;
    while (this.problem === null && at < text.length) {
      let end = text.indexOf("\n", at);
      if (end === -1) end = text.length;
      this.problem = this.line(text.slice(at, end > at && text.charCodeAt(end - 1) === 0x0d ? end - 1 : end));
      at = end + 1;
    }
  }

  private line(line: string): { reason: MetricsSkip; detail: string } | null {
    const n = ++this.n;
    const where = (why: string) => ({
      reason: "not_exposition" as const,
      detail: `line ${n}: ${why}: ${JSON.stringify(line.slice(0, 80))}`,
    });
    const clash = (name: string) =>
      this.reserved !== null && name.startsWith(this.reserved)
        ? { reason: "name_clash" as const, detail: `line ${n}: the engine has a series named like the sidecar's: ${name}` }
        : null;
    if (line.trim() === "") return null;
    if (line[0] === "#") {
      if (line.startsWith("# EOF")) return where("an OpenMetrics end marker");
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (!m) return null; // a comment
      const name = m[2]!;
      if (!NAME.test(name)) return where("a metric name that is not one");
      const c = clash(name);
      if (c) return c;
      if (m[1] === "TYPE") {
        if (!TYPES.has((m[3] ?? "").trim())) return where("a TYPE that is not one");
        if (this.typed.has(name)) return where("a second TYPE for the same metric");
        this.typed.add(name);
      }
      return null;
    }
    const ne = nameEnd(line);
    const name = line.slice(0, ne);
    if (!NAME.test(name)) return where("a sample whose name is not a metric name");
    const c = clash(name);
    if (c) return c;
    let i = ne;
    if (line[i] === "{") {
      i = labelsEnd(line, i);
      if (i === -1) return where('labels that are not name="value" pairs');
    }
    const rest = line
      .slice(i)
      .trim()
      .split(/[ \t]+/);
    if (rest.length < 1 || rest.length > 2 || !VALUE.test(rest[0]!)) return where("a sample without a number");
    if (rest.length === 2 && !TIMESTAMP.test(rest[1]!)) return where("a timestamp that is not an integer");
    return null;
  }
}

/** {@link ExpositionCheck} of a whole text: null when it is taken, else why not. */
export function expositionProblem(text: string, reserved: string | null = "harmony_"): { reason: MetricsSkip; detail: string } | null {
  const check = new ExpositionCheck(reserved);
  check.feed(text);
  return check.problem;
}

/** Characters checked before the event loop has its turn. */
const CHECK_SLICE = 128 * 1024;

/** {@link expositionProblem} in slices, with the event loop's turn between them (a few MB of series take tens of ms). */
async function checkInTurns(text: string): Promise<{ reason: MetricsSkip; detail: string } | null> {
  const check = new ExpositionCheck();
  for (let at = 0; at < text.length && check.problem === null;) {
    let end = text.indexOf("\n", Math.min(text.length, at + CHECK_SLICE));
    end = end === -1 ? text.length : end + 1;
    check.feed(text.slice(at, end));
    at = end;
    if (at < text.length) await new Promise((r) => setImmediate(r));
  }
  return check.problem;
}

/** The engine's metrics endpoint, by kind (`auto` before its probe: the default kind's, vLLM's). */
export async function metricsPath(engine: Engine): Promise<string> {
  const kind = await engine.kind().catch(() => null);
  return ENGINE_RULES[kind ?? UPSTREAM_DEFAULTS.kind].metricsPath;
}

/** The engine's Prometheus text, ending in a newline, or why it is left out. */
export async function engineMetrics(engine: Engine, cfg: UpstreamConfig, timeoutMs: number): Promise<EngineMetrics> {
  const path = await metricsPath(engine);
  let r: { status: number; body: string };
  try {
    r = await getText(cfg.url, path, timeoutMs, {
      apiKey: cfg.apiKey,
      maxBytes: MAX_UPSTREAM_METRICS_BYTES,
      accept: "text/plain; version=0.0.4",
    });
  } catch (e) {
    const message = (e as Error).message.replace(/\s+/g, " ").slice(0, 200);
    const tooLarge = /over \d+ bytes/.test(message);
    return { ok: false, path, reason: tooLarge ? "too_large" : "unreachable", detail: message };
  }
  if (r.status !== 200) return { ok: false, path, reason: "status", detail: `answered ${r.status}` };
  const problem = await checkInTurns(r.body);
  if (problem) return { ok: false, path, ...problem };
  return { ok: true, path, text: r.body === "" || r.body.endsWith("\n") ? r.body : r.body + "\n" };
}
