/**
 * What the OpenAI front needs of an inference engine, whichever it is: a
 * streaming completion driven by prompt token ids that answers with the
 * generated token ids, and its model list. One implementation per engine
 * (./vllm.ts, ./sglang.ts, ./trtllm.ts, ./llamacpp.ts); the front sees only
 * this interface.
 */
import { CodedError, type UpstreamErrorCode } from "../core/errors.js";
import { HARMONY } from "../core/preset.js";
import type { VocabTable } from "../core/vocab.js";

/** The engines the sidecar speaks to. */
export type ConcreteEngineKind = "vllm" | "sglang" | "trtllm" | "llamacpp";

/** How to reach the upstream engine (sidecar mode, `serve --upstream`). */
export interface UpstreamConfig {
  url: string;
  /** No event (SSE comments do not count) from the upstream for this long ends the request. */
  idleTimeoutMs: number;
  /** Reasoning field of chat deltas unless the request says otherwise. */
  reasoningField: "reasoning" | "reasoning_content";
  /** The engine's `--api-key`, sent as `Authorization: Bearer …` on every request to it (`--upstream-api-key`). */
  apiKey?: string;
  /** One request to the engine ends after this long, whatever it sends (default UPSTREAM_DEFAULTS.deadlineMs, src/core/defaults.ts). */
  deadlineMs?: number;
  /** /readyz also needs the engine's health check to answer 200 (`--upstream-readiness`); gRPC health does not. */
  readiness?: boolean;
  /** How often the engine's health is checked while readiness follows it (default UPSTREAM_DEFAULTS.healthIntervalMs). */
  healthIntervalMs?: number;
  /**
   * The vocabulary the ids are checked against, and (llama-server) the text
   * of held ids re-encoded with; without it ids are checked against
   * o200k_harmony's size and no text is re-encoded.
   */
  vocab?: EngineVocabulary;
}

/** What the engines need of the vocabulary: its table, and text (specials written out as themselves) to ids. */
export interface EngineVocabulary {
  table: VocabTable;
  /** Ids at and above this are specials. */
  firstSpecial: number;
  /** The named specials, by literal text. */
  specials: Readonly<Record<string, number>>;
  encode(text: string): number[];
  encodeOrdinary(text: string): number[];
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

export { MAX_TOP_LOGPROBS } from "../core/defaults.js";

export interface UpstreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

export interface UpstreamChunk {
  choices: UpstreamChoice[];
  usage: UpstreamUsage | null;
}

export class UpstreamError extends CodedError {
  constructor(
    /** HTTP status to answer the client with. */
    readonly status: number,
    /** The code the OpenAI front answers with. */
    override readonly code: UpstreamErrorCode,
    message: string,
    /** The upstream's own status, when it answered. */
    readonly upstreamStatus?: number,
  ) {
    super(code, message);
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

/** A consumer's answer that ends a stream there, quietly (see {@link EventAnswer}). */
export const STOP = "stop";

/**
 * What a pushed stream's consumer answers for each item: nothing (go on), a
 * promise (nothing more is read until it settles: backpressure, and no
 * silence of the engine's is timed meanwhile; it may settle with
 * {@link STOP}), or {@link STOP} (the consumer has what it needs).
 */
export type EventAnswer = Promise<void | typeof STOP> | typeof STOP | undefined | void;

/** Where a streamed completion's chunks go (see {@link Engine.stream}). */
export type OnChunk = (chunk: UpstreamChunk) => EventAnswer;

export interface Engine {
  /**
   * Stream a completion: each chunk of generated ids (each id checked, each
   * choice cut at the token limit asked, then `length`) goes to `onChunk` as
   * it is read, in the socket read's turn. Rejects with
   * {@link UpstreamError} (or what `onChunk` threw); resolves at the end, or
   * quietly when `signal` aborts. `onDrained`, when given, is called once the
   * chunks read together have all been given (before the reader waits for
   * more or gives the event loop a turn): what arrived together can go on
   * together, and nothing ready is held back past it.
   */
  stream(request: CompletionRequest, signal: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void>;
  /** The engine's model list, passed through as it answered. */
  models(): Promise<{ status: number; body: string }>;
  /** Which engine this is (`auto`: probed on first use; null while nothing answers). */
  kind(): Promise<ConcreteEngineKind | null>;
}

/**
 * Harmony's sampling stop tokens, asked of every engine: <|return|>,
 * <|call|>, and <|endoftext|>. (vLLM adds gpt-oss's generation-config EOS ids,
 * the same three, itself, except when started with
 * `--generation-config vllm`: asking for all three makes the stop independent
 * of that flag; the others do not add them.)
 */
export const HARMONY_STOP_IDS: readonly number[] = Object.freeze([
  HARMONY.tokens.return,
  HARMONY.tokens.call,
  HARMONY.specials["<|endoftext|>"]!,
]);

/** Token log probabilities are asked of vLLM only: the other engines' 400, naming the kind. */
export function logprobsRefused(kind: string): UpstreamError {
  return new UpstreamError(400, "upstream_error", `logprobs are asked of vLLM only: not supported with --upstream-kind ${kind}`);
}

/** The stop ids to ask an engine for: Harmony's and the request's own. */
export function stopIds(r: CompletionRequest): readonly number[] {
  return r.stopIds && r.stopIds.length > 0 ? [...HARMONY_STOP_IDS, ...r.stopIds] : HARMONY_STOP_IDS;
}

/** An engine's 401 or 403: the sidecar's key is missing or wrong, whatever the client sent. */
export function unauthorized(status: number, where: string): UpstreamError {
  return new UpstreamError(
    502,
    "upstream_unauthorized",
    `the upstream answered ${status} to ${where}: start the sidecar with --upstream-api-key (HARMONY_UPSTREAM_API_KEY) set to the engine's --api-key`,
    status,
  );
}
