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
import type { CompletionRequest, Engine, UpstreamChunk, UpstreamConfig } from "./engine.js";
import { LlamacppEngine } from "./llamacpp.js";
import { getJsonObject, getText } from "./sse.js";
import { SglangEngine } from "./sglang.js";
import { TrtllmEngine } from "./trtllm.js";
import { VllmEngine } from "./vllm.js";

export const ENGINE_KINDS = ["vllm", "sglang", "trtllm", "llamacpp", "auto"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];
export type ConcreteEngineKind = Exclude<EngineKind, "auto">;

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

/** Which engine serves `cfg.url`; null when the upstream could not be reached at all. */
export async function probeEngineKind(cfg: UpstreamConfig): Promise<ConcreteEngineKind | null> {
  const timeout = cfg.idleTimeoutMs;
  let reached = false;
  try {
    const r = await getText(cfg.url, "/v1/models", timeout);
    reached = true;
    if (r.status === 200) {
      const parsed = parseJson(r.body);
      const data = parsed.ok && isObj(parsed.value) && Array.isArray(parsed.value.data) ? (parsed.value.data as unknown[]) : [];
      const owner = data.length > 0 && isObj(data[0]) ? data[0].owned_by : undefined;
      if (typeof owner === "string" && OWNERS[owner]) return OWNERS[owner];
    }
  } catch {
    // not reachable, or an answer past its bound: the next probes tell
  }
  const props = await getJsonObject(cfg.url, "/props", timeout);
  if (props && isObj(props.default_generation_settings)) return "llamacpp";
  if (await getJsonObject(cfg.url, "/get_model_info", timeout)) return "sglang";
  if (!reached && props === null) {
    // nothing answered: maybe not up yet
    const again = await getText(cfg.url, "/", timeout).then(
      () => true,
      () => false,
    );
    if (!again) return null;
  }
  return "vllm";
}

/** `--upstream-kind auto`: probes once (again while the upstream cannot be reached), then delegates. */
export class AutoEngine implements Engine {
  private found: Promise<Engine> | null = null;
  /** The kind the probe found, once it did. */
  kind: ConcreteEngineKind | null = null;

  constructor(private readonly cfg: UpstreamConfig) {}

  /** The engine behind `auto`, probing when not known yet. */
  engine(): Promise<Engine> {
    this.found ??= probeEngineKind(this.cfg).then((kind) => {
      if (kind === null) {
        this.found = null;
        return new VllmEngine(this.cfg); // this once; probe again next time
      }
      this.kind = kind;
      return createEngine(kind, this.cfg);
    });
    return this.found;
  }

  async *complete(request: CompletionRequest, signal: AbortSignal): AsyncGenerator<UpstreamChunk> {
    const engine = await this.engine();
    yield* engine.complete(request, signal);
  }

  async models(): Promise<{ status: number; body: string }> {
    return (await this.engine()).models();
  }
}
