/**
 * What the simulator's endpoints share: the options, the tokenizer, the step
 * loop and metrics, the model's samples (a test's script, or the load
 * tester's generator, recorded), and a request's choices as a job of the
 * step loop.
 */
import type http from "node:http";
import { TextDecoder } from "node:util";
import type { Vocabulary } from "../core/vocab.js";
import type { ToolSpec } from "../loadtest/arguments.js";
import type { Encoder } from "../loadtest/generate.js";
import { SimulatorMetrics } from "./metrics.js";
import { choiceRecord, keyIndex, sample, type ChoiceRecord, type Sample } from "./model.js";
import type { Script, SimulatorOptions } from "./options.js";
import { decodeIds } from "./prompt.js";
import { Records, type RequestRecord } from "./records.js";
import { StepLoop, type Job } from "./steps.js";
import { Emitter, finishReason, type Run, type Sampled, type ServedModel } from "./vllm.js";

/** One choice of a request being answered: its run, its chunks' pacing, what was sent. */
export interface ChoiceState {
  run: Run;
  emitter: Emitter;
  decoder: TextDecoder;
  sentIds: number;
  sentText: number;
  prompted: boolean;
}

export class Engine {
  readonly records: Records;
  readonly loop: StepLoop;
  readonly metrics: SimulatorMetrics;
  /** The model as vLLM's `/v1/completions` checks requests against it. */
  readonly served: ServedModel;
  /** The scripts tests set (none: the generator). */
  scripts: Script[] = [];
  private counter = 0;

  constructor(
    readonly o: SimulatorOptions,
    readonly enc: Encoder,
    readonly vocab: Vocabulary,
  ) {
    this.records = new Records(o.records);
    this.loop = new StepLoop(o.tokensPerSecond > 0 ? (1000 * o.stepTokens) / o.tokensPerSecond : 0, o.maxNumSeqs);
    this.metrics = new SimulatorMetrics(o.servedModelName, this.loop, o.kvCacheTokens);
    this.served = { servedModelName: o.servedModelName, maxModelLen: o.maxModelLen, maxNewTokens: null, streamInterval: o.streamInterval };
  }

  readonly bytesOf = (id: number): Uint8Array =>
    this.vocab.isToken(id) ? this.vocab.bytes.subarray(this.vocab.byteStart(id), this.vocab.byteEnd(id)) : new Uint8Array(0);
  readonly nameOf = (id: number): string => decodeIds(this.vocab, [id]);

  /** The model's sample for each choice: the script's, or the generator's (recorded). */
  samples(
    count: number,
    tools: ToolSpec[] | undefined,
    key: string | null,
    stops: ReadonlySet<number>,
  ): { sampled: Sampled[]; gens: (Sample | null)[] } {
    const request = this.counter++;
    const scripts = this.scripts;
    if (scripts.length > 0) {
      const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
      const per = (i: number): number[] => {
        const t = s.tokens ?? [];
        return Array.isArray(t[0]) ? ((t as number[][])[i] ?? []) : (t as number[]);
      };
      return {
        sampled: Array.from({ length: count }, (_, i) => ({ ids: per(i), then: s.then ?? "eos" })),
        gens: Array.from({ length: count }, () => null),
      };
    }
    const { o } = this;
    const gens: Sample[] = [];
    for (let c = 0; c < count; c++) {
      const index = key !== null ? (keyIndex(key) + Math.imul(c, 0x9e3779b1)) >>> 0 : (request * 128 + c) >>> 0;
      const s = sample(index, tools, { seed: o.seed, faultRate: o.faultRate, faults: o.faults }, stops, this.enc, this.vocab);
      this.metrics.faultsInjected.inc({ kind: s.gen.fault ?? "none" });
      gens.push(s);
    }
    return { sampled: gens.map((g) => g.sampled), gens };
  }

  /** Keeps what the generator injected into a request's choices, for `GET /simulate/requests`. */
  record(
    id: string,
    key: string | null,
    endpoint: RequestRecord["endpoint"],
    tools: ToolSpec[] | undefined,
    gens: (Sample | null)[],
    runs: Run[],
  ): void {
    const choices: ChoiceRecord[] = [];
    gens.forEach((g, i) => {
      if (g) choices.push(choiceRecord(i, g, runs[i]!, finishReason(runs[i]!.end)));
    });
    if (choices.length === 0) return;
    this.records.add({ id, key, endpoint, tools: (tools ?? []).map((t) => t.name), created: Math.floor(Date.now() / 1000), choices });
  }

  /** Each run's state as it streams, `interval` ids a chunk. */
  states(runs: Run[], interval: number): ChoiceState[] {
    return runs.map((run) => ({
      run,
      emitter: new Emitter(run, interval, this.o.stepTokens),
      decoder: new TextDecoder("utf-8"),
      sentIds: 0,
      sentText: 0,
      prompted: false,
    }));
  }

  /** The step loop's job for a request's choices (its `step` set by the endpoint), closed when the client goes away. */
  job(res: http.ServerResponse, promptLen: number, states: ChoiceState[]): Job {
    const job: Job = {
      seqs: states.length,
      closed: false,
      held: () => promptLen + states.reduce((a, s) => a + s.emitter.length, 0),
      step: () => false,
    };
    res.on("close", () => {
      if (!res.writableFinished) job.closed = true;
    });
    return job;
  }

  /** The job's steps for an answer sent whole: every choice advances; once all are done, their finishes are counted and `answer` sends it. */
  whole(job: Job, states: ChoiceState[], runs: Run[], answer: () => void): void {
    job.step = () => {
      for (const st of states) st.emitter.step();
      if (!states.every((s) => s.emitter.done)) return false;
      this.metrics.countFinish(runs);
      answer();
      return true;
    };
  }
}
