/**
 * The completion every bench/front set-up streams: `total` ids, a quarter
 * reasoning (an analysis message), the rest the final answer, then
 * `<|return|>`, of plain prose (no quote, backslash or control character, so
 * its JSON is itself and a delta's length is its text's). The engine stand-in
 * (./engine.ts) streams it; the in-process bench (./inproc.ts) feeds it.
 */
import { HARMONY } from "../../src/core/preset.js";

const PROSE =
  "The sidecar reads the engine's token ids as they are generated and turns them into the events a client reads. " +
  "Each step of the engine gives every running request one more token, and the front writes it on as soon as it can. " +
  "A plain relay costs little per token because it only copies bytes; the front also parses, checks and renders. ";

/** A completion of exactly `total` ids: a quarter reasoning, the rest the final answer, then `<|return|>`. */
export function completionIds(total: number, encode: (t: string) => number[]): number[] {
  const T = HARMONY.tokens;
  const text = (s: string) => encode(s);
  const prose: number[] = [];
  while (prose.length < total) for (const id of text(PROSE)) prose.push(id);
  const analysisHead = [T.channel, ...text("analysis"), T.message];
  const finalHead = [T.end, T.start, ...text("assistant"), T.channel, ...text("final"), T.message];
  const body = Math.max(0, total - analysisHead.length - finalHead.length - 1);
  const reasoning = Math.floor(body / 4);
  const ids = [...analysisHead, ...prose.slice(0, reasoning), ...finalHead, ...prose.slice(reasoning, body), T.return];
  return ids.slice(0, total);
}

/** The text the fronts stream as deltas: every ordinary id of a message body (the headers' words are not deltas). */
export function bodyChars(ids: readonly number[], text: (id: number) => string): number {
  let n = 0;
  let inBody = false;
  for (const id of ids) {
    if (id === HARMONY.tokens.message) inBody = true;
    else if (id >= HARMONY.firstSpecial) inBody = false;
    else if (inBody) n += text(id).length;
  }
  return n;
}
