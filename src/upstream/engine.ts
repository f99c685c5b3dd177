/**
 * What the OpenAI front needs of an inference engine, whichever it is: a
 * streaming completion driven by prompt token ids that answers with the
 * generated token ids, and its model list. One implementation per engine
 * (vLLM today: ./vllm.ts); the front sees only this interface.
 */
import type { UpstreamErrorCode } from "../core/errors.js";

/** How to reach the upstream engine (sidecar mode, `serve --upstream`). */
export interface UpstreamConfig {
  url: string;
  /** No byte from the upstream for this long ends the request. */
  idleTimeoutMs: number;
  /** Reasoning field of chat deltas unless the request says otherwise. */
  reasoningField: "reasoning" | "reasoning_content";
}

export interface UpstreamChoice {
  index: number;
  token_ids: number[];
  finish_reason: string | null;
  /** With `CompletionRequest.logprobs`: each id's log probability and the likeliest ids, by position (null: not given). */
  logprobs?: (TokenLogprob | null)[];
}

/** A sampled token's log probability and the likeliest tokens at its position. */
export interface TokenLogprob {
  logprob: number;
  top: { id: number; logprob: number }[];
}

/** The most alternatives read per token (OpenAI's `top_logprobs` goes to 20). */
export const MAX_TOP_LOGPROBS = 20;

export interface UpstreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

export interface UpstreamChunk {
  choices: UpstreamChoice[];
  usage: UpstreamUsage | null;
}

export class UpstreamError extends Error {
  constructor(
    /** HTTP status to answer the client with. */
    readonly status: number,
    /** OpenAI-style error code. */
    readonly code: UpstreamErrorCode,
    message: string,
    /** The upstream's own status, when it answered. */
    readonly upstreamStatus?: number,
  ) {
    super(message);
  }
}

/** One generation asked of the engine. */
export interface CompletionRequest {
  /** The client's request: the engine takes its model and the sampling fields it understands. */
  client: Record<string, unknown>;
  /** Harmony prompt ids. */
  prompt: number[];
  /** Choices to sample. */
  n: number;
  /** The client's token limit, when it gave one. */
  maxTokens: unknown;
  /** Ask for each sampled token's log probability and this many alternatives (0–20); vLLM only. */
  logprobs?: number;
  /** Stop ids beyond Harmony's (a forced tool call's first part stops at `<|end|>`). */
  stopIds?: readonly number[];
}

export interface Engine {
  /** Stream a completion; yields each chunk of generated ids. Throws {@link UpstreamError}; ends quietly when `signal` aborts. */
  complete(request: CompletionRequest, signal: AbortSignal): AsyncGenerator<UpstreamChunk>;
  /** The engine's model list, passed through as it answered. */
  models(): Promise<{ status: number; body: string }>;
}

/**
 * Harmony's sampling stop tokens, asked of every engine: <|return|>,
 * <|call|>, and <|endoftext|>. (vLLM adds gpt-oss's generation-config EOS ids,
 * 200002, 199999 and 200012, itself, except when started with
 * `--generation-config vllm`: asking for all three makes the stop independent
 * of that flag; the others do not add them.)
 */
export const HARMONY_STOP_IDS: readonly number[] = Object.freeze([200002, 200012, 199999]);

/** Token log probabilities are asked of vLLM only: the other engines' 400, naming the kind. */
export function logprobsRefused(kind: string): UpstreamError {
  return new UpstreamError(400, "upstream_error", `logprobs are asked of vLLM only: not supported with --upstream-kind ${kind}`);
}

/** The stop ids to ask an engine for: Harmony's and the request's own. */
export function stopIds(r: CompletionRequest): readonly number[] {
  return r.stopIds && r.stopIds.length > 0 ? [...HARMONY_STOP_IDS, ...r.stopIds] : HARMONY_STOP_IDS;
}

/** The OpenAI sampling fields the OpenAI-style engines (vLLM, SGLang, trtllm-serve) take as they are. */
export const OPENAI_SAMPLING_FIELDS: readonly string[] = Object.freeze([
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "stop",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "logit_bias",
  "user",
]);
