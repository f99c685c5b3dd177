/** `harmony-sidecar simulate-engine`: a vLLM-compatible gpt-oss engine simulator (src/simulate/). */
import { Vocabulary } from "../core/vocab.js";
import { ALL_FAULT_KINDS, ENGINE_FAULT_KINDS, type FaultKind } from "../loadtest/generate.js";
import { SIMULATOR_DEFAULTS, startSimulator, type SimulatorOptions } from "../simulate/server.js";
import { loadHarmonyEncoding } from "../vocab/index.js";
import { commaList } from "./lists.js";
import { listenProblem, USAGE_EXIT, UsageError } from "./usage.js";

export interface SimulateFlags {
  host: string;
  port: string;
  servedModelName: string;
  maxModelLen: string;
  tokensPerSecond: string;
  stepTokens: string;
  streamInterval: string;
  maxNumSeqs: string;
  seed: string;
  faultRate: string;
  faults: string;
  records: string;
  chat: "raw" | "off";
}

function int(name: string, raw: string, min: number, max: number): number {
  const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`--${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  return n;
}

function num(name: string, raw: string, min: number, max: number): number {
  const n = raw.trim() === "" ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < min || n > max)
    throw new UsageError(`--${name} must be a number in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  return n;
}

/** Faults named on the command line: `engine` (what an engine can emit), `all`, `none`, or a comma-separated list of kinds. */
export function faultList(raw: string): FaultKind[] {
  if (raw === "engine") return [...ENGINE_FAULT_KINDS];
  if (raw === "all") return [...ALL_FAULT_KINDS];
  if (raw === "none" || raw === "") return [];
  const kinds = commaList(raw);
  for (const k of kinds)
    if (!(ALL_FAULT_KINDS as readonly string[]).includes(k))
      throw new UsageError(`unknown fault kind ${JSON.stringify(k)}; known: ${ALL_FAULT_KINDS.join(", ")}`);
  return kinds as FaultKind[];
}

export function simulateOptions(f: SimulateFlags): SimulatorOptions {
  return {
    ...SIMULATOR_DEFAULTS,
    host: f.host,
    port: int("port", f.port, 0, 65535),
    servedModelName: f.servedModelName,
    maxModelLen: int("max-model-len", f.maxModelLen, 16, 1 << 24),
    tokensPerSecond: num("tokens-per-second", f.tokensPerSecond, 0, 1e6),
    stepTokens: int("step-tokens", f.stepTokens, 1, 64),
    streamInterval: int("stream-interval", f.streamInterval, 1, 1 << 20),
    maxNumSeqs: int("max-num-seqs", f.maxNumSeqs, 1, 1 << 16),
    seed: int("seed", f.seed, 0, 2 ** 32 - 1),
    faultRate: num("fault-rate", f.faultRate, 0, 1),
    faults: faultList(f.faults),
    records: int("records", f.records, 0, 10_000_000),
    chat: f.chat,
  };
}

/** Start the simulator and serve until SIGINT or SIGTERM; exit 2 with one line on a usage error. */
export async function runSimulateCommand(flags: SimulateFlags): Promise<number> {
  let opts: SimulatorOptions;
  try {
    opts = simulateOptions(flags);
  } catch (e) {
    process.stderr.write(`simulate-engine: ${(e as Error).message}\n`);
    return 2;
  }
  const enc = loadHarmonyEncoding();
  const vocab = new Vocabulary(enc.table);
  let sim;
  try {
    sim = await startSimulator(opts, enc, vocab);
  } catch (e) {
    process.stderr.write(
      `simulate-engine: ${listenProblem(e, { host: opts.host, port: opts.port, flag: "--port", what: "the simulator's" })}\n`,
    );
    return USAGE_EXIT;
  }
  process.stdout.write(
    `${JSON.stringify({
      msg: "harmony-sidecar simulate-engine serving",
      url: sim.url,
      model: opts.servedModelName,
      max_model_len: opts.maxModelLen,
      tokens_per_second: opts.tokensPerSecond,
      step_tokens: opts.stepTokens,
      seed: opts.seed,
      fault_rate: opts.faultRate,
      faults: opts.faults.length,
      chat: opts.chat,
    })}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await sim.close();
  return 0;
}
