/**
 * Chat Completions `logprobs` for the answer's tokens only. The engine
 * reports a log probability for every id it sampled, reasoning and tool
 * calls included; a Chat client asked for those of `content`. So each
 * choice's ids also go, one at a time, through a parser of their own here,
 * which says where each message's body starts and ends: an id is content
 * when it is in the body of an assistant message with no recipient and not
 * on the analysis channel (the final answer, and preambles, which Chat
 * sends as content too), and not a special token.
 *
 * Text with no header (docs/resilience.md, rule 13) is reasoning until the
 * completion shows otherwise: its tokens' logprobs are held, and given as
 * content only when the parser gives the text again as the answer (at the
 * completion's closing stop, which vLLM keeps in the ids); otherwise they
 * are dropped with the message.
 *
 * The parser is the resilient one, as the sessions': a repaired header
 * bounds its message the same way. It costs the sidecar's parse again on
 * this thread, only for requests that ask for logprobs.
 */
import type { HarmonyEvent } from "../core/events.js";
import { HarmonyParser } from "../core/parser.js";
import { decodeLossy } from "../core/utf8.js";
import { FLAG_SPECIAL, FLAG_WHOLE, type Vocabulary } from "../core/vocab.js";

/** One token of `choices[].logprobs.content` (OpenAI's ChatCompletionTokenLogprob). */
export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** A sampled id's log probability and the likeliest ids at its position (the engine's). */
export interface IdLogprob {
  logprob: number;
  top: { id: number; logprob: number }[];
}

export class ContentLogprobs {
  private readonly parser: HarmonyParser;
  private inBody = false;
  /** The tokens of a message with no channel yet (rule 13), until it is known to be the answer; null otherwise. */
  private held: ChatTokenLogprob[] | null = null;
  /** Every content token so far. */
  readonly content: ChatTokenLogprob[] = [];

  constructor(
    private readonly vocab: Vocabulary,
    /** How many alternatives to keep per token (`top_logprobs`). */
    private readonly topN: number,
  ) {
    this.parser = new HarmonyParser(vocab);
  }

  /** Read `ids` (with their log probabilities, null where none); the content tokens among them, in order. */
  push(ids: readonly number[], logprobs: readonly (IdLogprob | null)[] | null): ChatTokenLogprob[] {
    const out: ChatTokenLogprob[] = [];
    const one = [0];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const wasIn = this.inBody;
      one[0] = id;
      const wasHeld = this.held;
      let ended = false;
      for (const ev of this.parser.write(one)) ended = this.follow(ev, out) || ended;
      // text with no header starts its message with its own first token, which is part of it
      const startedHeld = !wasIn && this.held !== null && this.held !== wasHeld;
      const lp = logprobs?.[i] ?? null;
      if ((!wasIn && !startedHeld) || ended || lp === null || !this.vocab.isToken(id) || (this.vocab.flags[id]! & FLAG_SPECIAL) !== 0)
        continue;
      const t: ChatTokenLogprob = {
        token: this.textOf(id),
        logprob: lp.logprob,
        bytes: this.bytesOf(id),
        top_logprobs: lp.top.slice(0, this.topN).map((a) => ({ token: this.textOf(a.id), logprob: a.logprob, bytes: this.bytesOf(a.id) })),
      };
      if (this.held !== null && (startedHeld || this.held === wasHeld)) {
        this.held.push(t);
        continue;
      }
      out.push(t);
      this.content.push(t);
    }
    return out;
  }

  /** Track message bodies (a held one's tokens given to `out` once it is the answer); true when the event ends one. */
  private follow(ev: HarmonyEvent, out: ChatTokenLogprob[]): boolean {
    if (ev.type === "message_start") {
      this.inBody = ev.role === "assistant" && ev.recipient === null && ev.channel !== "analysis";
      this.held = this.inBody && ev.channel === null ? [] : null;
      return false;
    }
    if (ev.type === "delta" && ev.kind === "content" && this.held !== null) {
      // the text with no channel is the answer after all
      for (const t of this.held) {
        out.push(t);
        this.content.push(t);
      }
      this.held = null;
      return false;
    }
    if (ev.type === "message_end" || ev.type === "done") {
      this.inBody = false;
      this.held = null;
      return true;
    }
    return false;
  }

  private bytesOf(id: number): number[] {
    const v = this.vocab;
    if (!v.isToken(id)) return [];
    return Array.from(v.bytes.subarray(v.byteStart(id), v.byteEnd(id)));
  }

  /** A token's text: a part of a character reads as U+FFFD (its `bytes` are exact). */
  private textOf(id: number): string {
    const v = this.vocab;
    if (!v.isToken(id)) return "";
    if ((v.flags[id]! & FLAG_WHOLE) !== 0) return v.text(id);
    return decodeLossy(v.bytes, v.byteStart(id), v.byteEnd(id), v.scratch);
  }
}
