/**
 * The simulator's options (the `simulate-engine` flags), their defaults, and
 * the scripts tests give it in place of the generator.
 */
import { ENGINE_FAULT_KINDS, type FaultKind } from "../loadtest/generate.js";
import type { Sampled } from "./vllm.js";

export interface SimulatorOptions {
  host: string;
  port: number;
  /** `--served-model-name`: the `model` of every answer; another name in a request is vLLM's 404. */
  servedModelName: string;
  /** `--max-model-len`. */
  maxModelLen: number;
  /** `--stream-interval`: ids gathered per chunk (a request's `stream_interval` can raise it). */
  streamInterval: number;
  /** Ids per second per sequence (0: unpaced). */
  tokensPerSecond: number;
  /** Ids per engine step per sequence after the first (speculative decoding samples several). */
  stepTokens: number;
  /** `--max-num-seqs`: sequences generating at once; later requests wait. */
  maxNumSeqs: number;
  seed: number;
  faultRate: number;
  faults: readonly FaultKind[];
  /** Requests whose injections are kept for `GET /simulate/requests`. */
  records: number;
  /** `/v1/chat/completions` and `/v1/responses`: the raw output as text, or not served (404, as vLLM's completions-only use). */
  chat: "raw" | "off";
  /** Largest request body. */
  maxBodyBytes: number;
  /** The sum of tokens held by running sequences that reads as a full KV cache on `/metrics`. */
  kvCacheTokens: number;
}

export const SIMULATOR_DEFAULTS: SimulatorOptions = Object.freeze({
  host: "127.0.0.1",
  port: 8000,
  servedModelName: "openai/gpt-oss-20b",
  maxModelLen: 131072,
  streamInterval: 1,
  tokensPerSecond: 100,
  stepTokens: 1,
  maxNumSeqs: 256,
  seed: 1,
  faultRate: 0.1,
  faults: ENGINE_FAULT_KINDS,
  records: 100_000,
  chat: "raw" as const,
  maxBodyBytes: 32 << 20,
  kvCacheTokens: 1_000_000,
});

/** What the model samples for one request in tests (instead of the generator): per choice, or one list for all. */
export interface Script {
  tokens?: number[] | number[][];
  /** When a choice's ids run out: the tokenizer EOS (default), a `length` finish, or an engine abort. */
  then?: Sampled["then"];
}
