/**
 * The engines behind `--upstream-kind`: `createEngine(kind, cfg)` builds one;
 * `auto` probes the upstream on first use and then behaves as the engine it
 * found (docs/engines.md has what each supports).
 *
 * Probe order (each step only when the previous one did not decide):
 * 1. `GET /v1/models`: `data[0].owned_by` is "vllm", "sglang", "tensorrt_llm" or
 *    "llamacpp" (each engine's ModelCard default).
 * 2. `GET /props` with `default_generation_settings`: llama.cpp.
 * 3. `GET /get_model_info` (SGLang's native endpoint) answering 200: SGLang.
 * 4. Otherwise vLLM, the default.
 * A probe that cannot reach the upstream at all decides nothing and is tried
 * again on the next request.
 */
import { isObj, parseJson } from "../core/json.js";
import {
  unauthorized,
  type CompletionRequest,
  type ConcreteEngineKind,
  type Engine,
  type EventAnswer,
  type OnChunk,
  type UpstreamConfig,
} from "./engine.js";
import { LlamacppEngine } from "./llamacpp.js";
import { getText, type GetOptions } from "./sse.js";
import { SglangEngine } from "./sglang.js";
import { TrtllmEngine } from "./trtllm.js";
import { VllmEngine } from "./vllm.js";

export type { ConcreteEngineKind } from "./engine.js";
export const ENGINE_KINDS = ["vllm", "sglang", "trtllm", "llamacpp", "auto"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export function isEngineKind(v: unknown): v is EngineKind {
  return typeof v === "string" && (ENGINE_KINDS as readonly string[]).includes(v);
}

/** The engine for `kind` (`auto`: probed on first use). */
export function createEngine(kind: EngineKind, cfg: UpstreamConfig): Engine {
  switch (kind) {
    case "vllm":
      return new VllmEngine(cfg);
    case "sglang":
      return new SglangEngine(cfg);
    case "trtllm":
      return new TrtllmEngine(cfg);
    case "llamacpp":
      return new LlamacppEngine(cfg);
    case "auto":
      return new AutoEngine(cfg);
  }
}

const OWNERS: Readonly<Record<string, ConcreteEngineKind>> = {
  vllm: "vllm",
  sglang: "sglang",
  tensorrt_llm: "trtllm",
  llamacpp: "llamacpp",
};

/**
 * Which engine serves `cfg.url`; null when the upstream could not be reached
 * at all; "unauthorized" when it refused the sidecar's key (or its lack of
 * one) on every probe that could tell (an engine started with `--api-key`).
 */
export async function probeEngineKind(cfg: UpstreamConfig): Promise<ConcreteEngineKind | "unauthorized" | null> {
  const timeout = cfg.idleTimeoutMs;
  const opts: GetOptions = { apiKey: cfg.apiKey, maxBytes: 1024 * 1024 };
  let reached = false;
  let refused = false;
  const get = async (path: string): Promise<Record<string, unknown> | null> => {
    try {
      const r = await getText(cfg.url, path, timeout, opts);
      reached = true;
      if (r.status === 401 || r.status === 403) refused = true;
      if (r.status !== 200) return null;
      const parsed = parseJson(r.body);
      return parsed.ok && isObj(parsed.value) ? (parsed.value as Record<string, unknown>) : null;
    } catch {
      return null; // not reachable, or an answer past its bound: the next probes tell
    }
  };
  const models = await get("/v1/models");
  const data = models && Array.isArray(models.data) ? (models.data as unknown[]) : [];
  const owner = data.length > 0 && isObj(data[0]) ? data[0].owned_by : undefined;
  if (typeof owner === "string" && OWNERS[owner]) return OWNERS[owner];
  const props = await get("/props");
  if (props && isObj(props.default_generation_settings)) return "llamacpp";
  if (await get("/get_model_info")) return "sglang";
  // an engine with --api-key refuses the model list: which one it is cannot be told, and nothing would work anyway
  if (refused) return "unauthorized";
  if (!reached) {
    // nothing answered: maybe not up yet
    const again = await getText(cfg.url, "/", timeout, opts).then(
      () => true,
      () => false,
    );
    if (!again) return null;
  }
  return "vllm";
}

/** `--upstream-kind auto`: probes once (again while the upstream cannot be reached or refuses the key), then delegates. */
export class AutoEngine implements Engine {
  private found: Promise<Engine> | null = null;
  /** The kind the probe found, once it did. */
  private probed: ConcreteEngineKind | null = null;

  constructor(private readonly cfg: UpstreamConfig) {}

  /** The engine behind `auto`, probing when not known yet. */
  engine(): Promise<Engine> {
    this.found ??= probeEngineKind(this.cfg).then((kind) => {
      if (kind === "unauthorized") {
        this.found = null;
        throw unauthorized(401, "GET /v1/models (probing --upstream-kind auto)");
      }
      if (kind === null) {
        this.found = null;
        return new VllmEngine(this.cfg); // this once; probe again next time
      }
      this.probed = kind;
      return createEngine(kind, this.cfg);
    });
    return this.found;
  }

  async stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> {
    const engine = await this.engine();
    await engine.stream(request, signal, onChunk, onDrained);
  }

  async models(): Promise<{ status: number; body: string }> {
    return (await this.engine()).models();
  }

  async kind(): Promise<ConcreteEngineKind | null> {
    if (this.probed === null) await this.engine().catch(() => null);
    return this.probed;
  }
}
