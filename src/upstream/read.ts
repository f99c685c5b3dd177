/**
 * The engine's answers as untrusted input: every id an integer inside the
 * vocabulary, every choice index one that was asked for, `usage` counts that
 * are counts, and each choice cut at the token limit the request asked (an
 * engine that ignores it is answered for as if it had not: `length`, and the
 * request to it ends). Anything else is a 502 `upstream_bad_response`, never
 * an id dropped without a word.
 */
import { isObj } from "../core/json.js";
import { HARMONY } from "../core/preset.js";
import { UpstreamError, type UpstreamChoice, type UpstreamConfig, type UpstreamUsage } from "./engine.js";

/** How many ids there are: the configured vocabulary's, else o200k_harmony's. */
export function vocabSize(cfg: UpstreamConfig): number {
  return cfg.vocab?.table.size ?? HARMONY.vocabLimit;
}

function bad(message: string): UpstreamError {
  return new UpstreamError(502, "upstream_bad_response", message);
}

/** A short, bounded description of a JSON value for a message. */
function shown(v: unknown): string {
  if (v === undefined) return "nothing";
  let s: string;
  try {
    s = JSON.stringify(v) ?? String(v);
  } catch {
    s = String(v);
  }
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

/** `v` as token ids, each an integer in [0, size); anything else is a 502 naming the first bad one. */
export function checkIds(v: unknown, size: number): number[] {
  if (!Array.isArray(v)) throw bad(`the upstream sent token ids that are not an array: ${shown(v)}`);
  for (let i = 0; i < v.length; i++) {
    const id: unknown = v[i];
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= size) {
      throw bad(`the upstream sent a token id that is not an integer in the vocabulary (0 to ${size - 1}): ${shown(id)} at ${i}`);
    }
  }
  return v as number[];
}

/** A choice index the request asked for (0 to n - 1). */
export function checkIndex(v: unknown, n: number): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v >= n) {
    throw bad(`the upstream sent choice ${shown(v)} of a request for ${n}`);
  }
  return v;
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/**
 * An engine's `usage`: null when absent (or when its counts are: trtllm-serve's
 * and SGLang's `UsageInfo.completion_tokens` is `Optional[int]`; the sidecar
 * then counts the ids itself), else its counts (prompt and completion
 * tokens, the total, the cached prompt tokens), each a non-negative integer;
 * anything else is a 502. Other fields are not passed on.
 */
export function checkUsage(v: unknown): UpstreamUsage | null {
  if (v === undefined || v === null) return null;
  if (!isObj(v)) throw bad(`the upstream sent a usage that is not an object: ${shown(v)}`);
  const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = v;
  const absent = (x: unknown) => x === undefined || x === null;
  if ((absent(p) || absent(c)) && [p, c, t].every((x) => absent(x) || isCount(x))) return null;
  if (!isCount(p) || !isCount(c) || (!absent(t) && !isCount(t))) {
    throw bad(`the upstream sent usage counts that are not non-negative integers: ${shown(v)}`);
  }
  const usage: UpstreamUsage & { prompt_tokens_details?: { cached_tokens: number } } = { prompt_tokens: p, completion_tokens: c };
  if (isCount(t)) usage.total_tokens = t;
  const details = v.prompt_tokens_details;
  if (isObj(details) && isCount(details.cached_tokens)) usage.prompt_tokens_details = { cached_tokens: details.cached_tokens };
  return usage;
}

/**
 * Each choice's ids counted against the limit the request asked: past it
 * the choice is cut there with `length`, and once every choice has ended the
 * request is over (the caller stops reading, which aborts it).
 */
export class ChoiceLimits {
  private readonly counts: number[];
  private readonly ended: boolean[];
  private open: number;
  private cutHere = false;

  constructor(
    readonly n: number,
    /** Ids each choice may have (null: no limit was sent). */
    readonly limit: number | null,
  ) {
    this.counts = new Array<number>(n).fill(0);
    this.ended = new Array<boolean>(n).fill(false);
    this.open = n;
  }

  /**
   * Every choice has ended and at least one was cut here, not by the
   * engine: nothing more is worth reading (an engine past its limit may
   * never stop), and the request to it is ended.
   */
  get overrun(): boolean {
    return this.open === 0 && this.cutHere;
  }

  /** Ids of `choice` counted so far. */
  count(choice: number): number {
    return this.counts[choice]!;
  }

  /**
   * A choice as read: its ids, cut to what the limit leaves (then its finish
   * is `length`), and `c` itself when nothing is cut; null once the choice
   * has ended (an engine that sends more for it, or sends its finish again,
   * is not heard).
   */
  take(c: UpstreamChoice, stands: number = c.token_ids.length): UpstreamChoice | null {
    const i = c.index;
    if (this.ended[i]) return null;
    let ids = c.token_ids;
    let finish = c.finish_reason;
    let counted = stands;
    const left = this.limit === null ? Infinity : this.limit - this.counts[i]!;
    if (counted >= left) {
      if (counted > left) {
        // ids re-made from text (stands ≠ length) are not cut inside: the whole piece goes
        ids = stands === ids.length ? ids.slice(0, left) : [];
        counted = stands === c.token_ids.length ? ids.length : 0;
      }
      // exactly at the limit with no finish: the engine should end it now, and is not waited for
      if (finish === null || counted < stands) {
        finish = "length";
        this.cutHere = true;
      }
    }
    this.counts[i] = this.counts[i]! + counted;
    if (finish !== null) {
      this.ended[i] = true;
      this.open--;
    }
    // nothing cut (a step's choice, nearly always): the choice as read, not a copy
    if (ids === c.token_ids && finish === c.finish_reason && (c.logprobs === undefined || c.logprobs.length <= ids.length)) return c;
    const out: UpstreamChoice = { index: i, token_ids: ids, finish_reason: finish };
    if (c.logprobs !== undefined) out.logprobs = c.logprobs.slice(0, ids.length);
    return out;
  }
}
