/**
 * The simulator's "model": what it samples for one choice of one request,
 * from the load tester's generator (reasoning, preambles, calls to the
 * request's declared tools with arguments for their parameters, answers),
 * with a fault at the chosen rate, and what that generation meant (its
 * intent), which the simulator reports so a load tester can tell exactly
 * which calls a front lost.
 */
import type { Vocabulary } from "../core/vocab.js";
import type { ToolSpec } from "../loadtest/arguments.js";
import { generateStream, streamSeed, type Encoder, type FaultKind, type GeneratedStream } from "../loadtest/generate.js";
import { intentOf, type Intent } from "../loadtest/intent.js";
import type { Run, Sampled } from "./vllm.js";

export interface ModelOptions {
  seed: number;
  faultRate: number;
  faults: readonly FaultKind[];
}

export interface Sample {
  sampled: Sampled;
  gen: GeneratedStream;
}

/** FNV-1a of a key: the generator's stream index for a keyed request, so a replay samples the same. */
export function keyIndex(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** Draws tried before a fault-free generation is taken. */
const DRAWS = 8;

/**
 * The sample for stream `index`. A fault whose tokens the engine's stop
 * checks would cut before the meant end (a `<|return|>` or `<|call|>`
 * injected between messages: vLLM stops there) is drawn again, up to
 * {@link DRAWS} times, then the completion is taken without a fault.
 */
export function sample(
  index: number,
  tools: readonly ToolSpec[] | undefined,
  opts: ModelOptions,
  stops: ReadonlySet<number>,
  enc: Encoder,
  vocab: Vocabulary,
): Sample {
  const toolOpt = tools !== undefined ? { tools } : { tools: [] as ToolSpec[] };
  for (let draw = 0; draw <= DRAWS; draw++) {
    const faultRate = draw === DRAWS ? 0 : opts.faultRate;
    const at = draw === 0 ? index : streamSeed(index, draw);
    const gen = generateStream(at, { seed: opts.seed, faultRate, faults: opts.faults, ...toolOpt }, enc, vocab);
    const meantEnd = gen.end ?? gen.tokens.length;
    const firstStop = gen.tokens.findIndex((id) => stops.has(id));
    if (firstStop >= 0 && firstStop + 1 !== meantEnd) continue;
    // a completion that does not end at a stop ran into a limit there (the truncation faults)
    const ended = firstStop >= 0;
    return { sampled: { ids: gen.tokens, then: ended ? "eos" : "length" }, gen: { ...gen, index } };
  }
  throw new Error("bug: the last draw has no fault");
}

/** What the simulator reports for one choice it generated. */
export interface ChoiceRecord {
  index: number;
  /** The completion's shape: answer, function_call, parallel_calls. */
  shape: string;
  /** The fault injected, or null. */
  fault: FaultKind | null;
  /** What the model meant (the reasoning, the answer, the complete calls, the finish). */
  intent: Intent;
  /**
   * False when the engine cut the output before the meant end (max_tokens,
   * the context, repetition detection, an abort): then `intent` describes the
   * generation, not what was sent.
   */
  exact: boolean;
  finish_reason: string;
  /** Ids the choice streamed. */
  tokens: number;
}

export function choiceRecord(choice: number, s: Sample, run: Run, finish: string): ChoiceRecord {
  const meantEnd = s.gen.end ?? s.gen.tokens.length;
  const ended = run.end.kind === "finish" && run.end.stopToken;
  return {
    index: choice,
    shape: s.gen.shape,
    fault: s.gen.fault,
    intent: intentOf(s.gen.intended, ended, s.gen.lastPartial === true),
    exact: run.ids.length >= meantEnd && run.end.kind !== "abort",
    finish_reason: finish,
    tokens: run.ids.length,
  };
}
