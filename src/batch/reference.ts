/**
 * Whole-input parsing in the shape of the reference's
 * `parse_messages_from_completion_tokens` (used by `parse --batch`,
 * `--output messages` and the conformance tests).
 */
import type { HarmonyEvent, RecoveryKind, ReferenceMessage } from "../core/events.js";
import { HarmonyParser, type ParserOptions } from "../core/parser.js";
import type { Vocabulary } from "../core/vocab.js";

export interface FirstError {
  message: string;
  index: number;
  token: number | null;
}

export interface CaseResult {
  messages: ReferenceMessage[];
  first_error: FirstError | null;
  recoveries: { kind: RecoveryKind; at: number }[];
}

/**
 * Parse one whole token list. In strict mode, as the reference does, stop at
 * the first error and report the messages completed before it.
 */
export function parseCase(vocab: Vocabulary, tokens: ArrayLike<number>, options: ParserOptions): CaseResult {
  const parser = new HarmonyParser(vocab, { ...options, wholeMessages: true });
  const messages: ReferenceMessage[] = [];
  const recoveries: { kind: RecoveryKind; at: number }[] = [];
  let firstError: FirstError | null = null;
  const take = (events: HarmonyEvent[]): boolean => {
    for (const ev of events) {
      if (ev.type === "message_end" && ev.message) messages.push(ev.message);
      else if (ev.type === "recovery") recoveries.push({ kind: ev.kind, at: ev.at });
      else if (ev.type === "error" && firstError === null) {
        firstError = { message: ev.message, index: ev.at, token: ev.token };
        return false;
      }
    }
    return true;
  };
  const strict = options.mode === "strict";
  if (!strict) {
    take(parser.write(tokens));
    take(parser.end());
  } else {
    // token by token so that messages after the first error are not counted
    let ok = true;
    const one = [0];
    for (let i = 0; i < tokens.length && ok; i++) {
      one[0] = tokens[i]!;
      ok = take(parser.write(one));
    }
    if (ok) take(parser.end());
  }
  return { messages, first_error: firstError, recoveries };
}
