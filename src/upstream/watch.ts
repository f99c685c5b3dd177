/**
 * The engine as the sidecar sees it between requests: whether its health
 * check answers (for `/readyz`, when `--upstream-readiness` makes readiness
 * follow it), which version it says it is (below a known floor: an error
 * at start-up that says what will fail), and which model it serves (not a
 * Harmony model: a warning, since every answer would be parsed as Harmony
 * and come out as garbage). Checked at start-up, again every
 * `healthIntervalMs` until the engine has answered, and from then on only
 * while readiness follows it.
 */
import { isObj, parseJson } from "../core/json.js";
import { UPSTREAM_DEFAULTS } from "../core/defaults.js";
import type { ConcreteEngineKind, Engine, UpstreamConfig } from "./engine.js";
import { ENGINE_RULES } from "./request.js";
import { getJsonObject, getText } from "./sse.js";

/** What the watch tells the rest of the server (the composition root wires it to the logger and metrics). */
export interface WatchSink {
  log(level: "info" | "warn" | "error", fields: Record<string, unknown>, message: string): void;
  up(healthy: boolean): void;
  info(labels: { kind: string; version: string; model: string; harmony: string }): void;
}

export interface EngineState {
  /** The health check got an answer (null: not checked yet). */
  reachable: boolean | null;
  /** It answered 200. */
  healthy: boolean | null;
  /** The last health answer's status, or what went wrong. */
  last: string | null;
  kind: ConcreteEngineKind | null;
  version: string | null;
  models: string[];
  /** Whether a served model is a Harmony model (gpt-oss), once known. */
  harmony: boolean | null;
  warnings: string[];
}

/** A served model's name that says gpt-oss (`openai/gpt-oss-20b`, `gpt-oss-120b-mxfp4.gguf`, `gpt_oss`). */
const HARMONY_NAME = /gpt[-_ ]?oss/i;

/** `a` < `b` as dotted version numbers (`0.10.1.dev3+g12` reads as 0.10.1); null when either has none. */
export function olderThan(a: string, b: string): boolean | null {
  const nums = (v: string) => /^v?(\d+(?:\.\d+)*)/.exec(v.trim())?.[1]?.split(".").map(Number) ?? null;
  const x = nums(a);
  const y = nums(b);
  if (x === null || y === null) return null;
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0;
  }
  return false;
}

/** The names a model list gives: each card's `id` and `root` (vLLM's model path). */
export function modelNames(body: string): string[] {
  const parsed = parseJson(body);
  const data = parsed.ok && isObj(parsed.value) && Array.isArray(parsed.value.data) ? (parsed.value.data as unknown[]) : [];
  const names: string[] = [];
  for (const m of data.slice(0, 64)) {
    if (!isObj(m)) continue;
    for (const k of ["id", "root"]) {
      const v = m[k];
      if (typeof v === "string" && v !== "" && !names.includes(v)) names.push(v.slice(0, 256));
    }
  }
  return names;
}

export class EngineWatch {
  readonly state: EngineState = {
    reachable: null,
    healthy: null,
    last: null,
    kind: null,
    version: null,
    models: [],
    harmony: null,
    warnings: [],
  };
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private described = false;

  constructor(
    private readonly engine: Engine,
    private readonly cfg: UpstreamConfig,
    private readonly sink: WatchSink,
  ) {}

  /** Whether readiness may say ready as far as the engine goes. */
  ready(): boolean {
    return !this.cfg.readiness || this.state.healthy === true;
  }

  /** What /readyz says of the engine. */
  detail(): Record<string, unknown> {
    const s = this.state;
    return {
      follows: this.cfg.readiness === true,
      reachable: s.reachable,
      healthy: s.healthy,
      ...(s.last !== null ? { last: s.last } : {}),
      kind: s.kind,
      version: s.version,
      models: s.models,
      harmony: s.harmony,
      warnings: s.warnings,
    };
  }

  start(): void {
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One check now (tests and start-up); resolves when it is done. */
  async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.check();
    } catch (e) {
      this.sink.log("warn", { err: (e as Error).message }, "the engine check failed");
    }
    if (this.stopped) return;
    if (this.cfg.readiness || !this.described) {
      this.timer = setTimeout(() => void this.tick(), this.cfg.healthIntervalMs ?? UPSTREAM_DEFAULTS.healthIntervalMs);
      this.timer.unref();
    }
  }

  private async check(): Promise<void> {
    const timeout = Math.min(this.cfg.idleTimeoutMs, 5000);
    const kind = await this.engine.kind().catch(() => null);
    // an engine not probed yet is read by the default kind's rules
    const rules = ENGINE_RULES[kind ?? UPSTREAM_DEFAULTS.kind];
    const s = this.state;
    const was = s.healthy;
    try {
      const r = await getText(this.cfg.url, rules.healthPath, timeout, { apiKey: this.cfg.apiKey, maxBytes: 64 * 1024 });
      s.reachable = true;
      s.healthy = r.status === 200;
      s.last = `${rules.healthPath} answered ${r.status}`;
    } catch (e) {
      s.reachable = false;
      s.healthy = false;
      s.last = (e as Error).message.slice(0, 200);
    }
    this.sink.up(s.healthy === true);
    if (was !== s.healthy && (was !== null || !s.healthy)) {
      this.sink.log(
        s.healthy ? "info" : "warn",
        { upstream: redacted(this.cfg.url), last: s.last },
        s.healthy ? "the engine answers" : "the engine does not answer its health check",
      );
    }
    if (s.reachable && !this.described && kind !== null) await this.describe(kind, timeout);
  }

  /** Read the engine's version and models once, and say what is wrong with them. */
  private async describe(kind: ConcreteEngineKind, timeout: number): Promise<void> {
    const rules = ENGINE_RULES[kind];
    const s = this.state;
    s.kind = kind;
    if (rules.version) {
      const v = await getJsonObject(this.cfg.url, rules.version.path, timeout, { apiKey: this.cfg.apiKey, maxBytes: 1024 * 1024 });
      const version = v?.[rules.version.field];
      if (typeof version === "string") s.version = version.slice(0, 100);
    }
    const floor = rules.floor;
    if (floor && s.version !== null && olderThan(s.version, floor.version)) {
      const message = `${rules.name} ${s.version} is older than ${floor.version}, which ${floor.needs} needs: every request will be a 502 until it is upgraded`;
      s.warnings.push(message);
      this.sink.log("error", { upstream_kind: kind, version: s.version, needs: floor.version }, message);
    }
    let names: string[] = [];
    try {
      const m = await this.engine.models();
      if (m.status === 200) names = modelNames(m.body);
    } catch {
      // unreadable (an engine key missing, say): said by the requests themselves
    }
    if (kind === "llamacpp" && names.length === 0) {
      const p = await getJsonObject(this.cfg.url, "/props", timeout, { apiKey: this.cfg.apiKey, maxBytes: 1024 * 1024 });
      for (const k of ["model_alias", "model_path"]) if (p && typeof p[k] === "string") names.push((p[k] as string).slice(0, 256));
    }
    s.models = names;
    if (names.length > 0) {
      s.harmony = names.some((n) => HARMONY_NAME.test(n));
      if (!s.harmony) {
        const message = `the engine serves ${names.join(", ")}, which is not a Harmony model (gpt-oss): its output is parsed as Harmony and will come out as headerless text`;
        s.warnings.push(message);
        this.sink.log("warn", { upstream_kind: kind, models: names }, message);
      }
    }
    this.sink.info({ kind, version: s.version ?? "", model: names[0] ?? "", harmony: String(s.harmony ?? "unknown") });
    this.described = names.length > 0 || s.version !== null;
  }
}

/** A URL without the user and password it may carry. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return "(an upstream URL)";
  }
}
