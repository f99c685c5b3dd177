/**
 * The sampling fields of an OpenAI request, checked before an engine sees
 * them (types and ranges as OpenAI's API reference gives them, and vLLM's
 * for its extras): a bad value is the client's mistake, a 400 with the field
 * named, never a request the engine fails on or, worse, reads some other way.
 * `null` counts as absent.
 */
import { describeValue, isObj } from "../core/json.js";

export interface SamplingProblem {
  param: string;
  message: string;
}

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

type Check = (v: unknown) => string | null;

const range =
  (min: number, max: number, minOpen = false): Check =>
  (v) =>
    isNumber(v) && (minOpen ? v > min : v >= min) && v <= max ? null : `must be a number ${minOpen ? ">" : "≥"} ${min} and ≤ ${max}`;

const integer =
  (min: number, max: number = Number.MAX_SAFE_INTEGER): Check =>
  (v) =>
    isNumber(v) && Number.isInteger(v) && v >= min && v <= max ? null : `must be an integer from ${min} to ${max}`;

const CHECKS: Record<string, Check> = {
  temperature: range(0, 2),
  top_p: range(0, 1, true),
  top_k: integer(-1),
  min_p: range(0, 1),
  seed: integer(Number.MIN_SAFE_INTEGER),
  presence_penalty: range(-2, 2),
  frequency_penalty: range(-2, 2),
  repetition_penalty: range(0, 2, true),
  max_tokens: integer(1),
  max_completion_tokens: integer(1),
  max_output_tokens: integer(1),
  user: (v) => (typeof v === "string" && v.length <= 256 ? null : "must be a string of at most 256 characters"),
  stop: (v) => {
    if (typeof v === "string") return v.length <= 1024 ? null : "must be at most 1024 characters";
    if (!Array.isArray(v) || v.length > 16) return "must be a string or an array of at most 16 strings";
    return v.every((s) => typeof s === "string" && s.length <= 1024) ? null : "must hold strings of at most 1024 characters";
  },
  logit_bias: (v) => {
    if (!isObj(v)) return "must be an object of token id to bias";
    const entries = Object.entries(v);
    if (entries.length > 1024) return "must hold at most 1024 entries";
    for (const [k, b] of entries) {
      if (!/^\d{1,7}$/.test(k) || !isNumber(b) || b < -100 || b > 100) return "maps token ids to numbers from -100 to 100";
    }
    return null;
  },
};

/** The first sampling field of `request` that is out of shape, or null. */
export function checkSampling(request: Record<string, unknown>): SamplingProblem | null {
  for (const [param, check] of Object.entries(CHECKS)) {
    const v = request[param];
    if (v === undefined || v === null) continue;
    const why = check(v);
    if (why !== null) return { param, message: `${param} ${why}, got ${describeValue(v)}` };
  }
  return null;
}
