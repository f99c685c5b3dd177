/**
 * A Chat answer's text steps (src/pool/host.ts sends a plain text step as its
 * text alone; ChatAnswer.text writes its line): the client gets the same bytes
 * as when every step is a chunk through ChatAnswer.event. Two answers are fed
 * the same completion, one as the host feeds it now (text alone where the
 * adapter's plainField says so, events otherwise), the other chunk by chunk;
 * their bodies must match once their random ids are set aside. Cases: plain
 * streaming (the line written from its head), `reasoning_content`, stop
 * strings, include_reasoning false, a non-streamed answer, and an empty model
 * (the adapter's chunks then name another model than the plan: event's way).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/json.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { HARMONY } from "../../src/core/preset.js";
import { ChatCompletionChunkAdapter } from "../../src/openai/chat.js";
import { planChat, type ChatPlan } from "../../src/openai/plan.js";
import type { Service } from "../../src/service/service.js";
import { ChatAnswer } from "../../src/transport/front/chat-answer.js";
import { answerDrain, normalized } from "./answer-drain.js";

const drain = answerDrain();
const response = drain.response;
let svc: Service;
beforeAll(() => {
  svc = drain.svc();
});

/** A completion: reasoning, then an answer with quotes, a backslash, a newline and non-ASCII text, then <|return|>. */
function completion(): number[] {
  const T = HARMONY.tokens;
  const enc = svc.encoding;
  const text = (s: string) => enc.encodeOrdinary(s);
  return [
    T.channel,
    ...text("analysis"),
    T.message,
    ...text("The user wants a greeting; keep it short."),
    T.end,
    T.start,
    ...text("assistant"),
    T.channel,
    ...text("final"),
    T.message,
    ...text('Hello "world" \\ here,\nlow water: été 🦀 done.'),
    T.return,
  ];
}

/**
 * Feed `ids` one by one to an answer: as the host does (`fast`), or every
 * step as chunks; with `choices` > 1, each id to each choice in turn (as an
 * engine interleaves a request's `n` choices). How many steps went as text.
 */
function feed(answer: ChatAnswer, plan: ChatPlan, ids: readonly number[], fast: boolean, choices = 1): number {
  const vocab = svc.vocabulary();
  // the model the sessions' chunks name: the plan's, or the connection's own default for none
  const model = plan.model || "gpt-oss";
  const each = Array.from({ length: choices }, () => ({
    parser: new HarmonyParser(vocab, { role: "assistant", callIdPrefix: "call_t_" }),
    adapter: new ChatCompletionChunkAdapter({ id: "chatcmpl-x", model, created: 1, reasoningField: plan.reasoningField }),
  }));
  let texts = 0;
  const step = Uint32Array.of(0);
  for (const id of ids) {
    step[0] = id;
    each.forEach(({ parser, adapter }, choice) => {
      const field = fast ? adapter.plainField(parser.messageIndex, parser.textKind) : null;
      if (field !== null && parser.takeText(step, 0, 1)) {
        answer.text(choice, field, vocab.text(id));
        texts++;
        return;
      }
      for (const ev of parser.write(step, 0, 1)) for (const chunk of adapter.push(ev)) answer.event(choice, chunk as unknown as JsonObject);
    });
  }
  each.forEach(({ parser, adapter }, choice) => {
    for (const ev of parser.end("eos")) for (const chunk of adapter.push(ev)) answer.event(choice, chunk as unknown as JsonObject);
  });
  return texts;
}

/**
 * A response as its head and its HTTP/1.1 chunks (their sizes, the Date and
 * content-length headers, and the ids' and clock's varying digits set aside):
 * the same writes give the same text.
 */
function normalizedAnswer(raw: string): string {
  return normalized(raw)
    .replace(/chatcmpl-[0-9a-z]+/g, "chatcmpl-ID")
    .replace(/"created":\d+/g, '"created":0');
}

/** The body written for `request`, fed both ways; the random ids and the clock's seconds set aside. */
async function both(request: JsonObject, field: "reasoning" | "reasoning_content" = "reasoning", choices = 1) {
  const plan = planChat(request, field) as ChatPlan;
  const ids = completion();
  const out: string[] = [];
  let texts = 0;
  for (const fast of [true, false]) {
    const { res, body } = await response();
    const answer = new ChatAnswer(svc, res, plan);
    const n = feed(answer, plan, ids, fast, choices);
    if (fast) texts = n;
    await answer.finish({ usage: null, error: null });
    out.push(normalizedAnswer(await body()));
  }
  return { fast: out[0]!, chunks: out[1]!, texts };
}

const MESSAGES = [{ role: "user", content: "Say hello." }];

describe("a Chat answer's text steps", () => {
  it("streamed: each text step's line is the one its chunk gives, written from its head", async () => {
    const r = await both({ model: "m", messages: MESSAGES, stream: true });
    expect(r.texts).toBeGreaterThan(10);
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).toMatch(/"delta":\{"content":"[^"]*\\n/);
    expect(r.fast).toContain('"delta":{"reasoning":');
    expect(r.fast).toContain("data: [DONE]");
  });

  it("two choices, their steps interleaved: each line names its own choice (a head for each choice and field)", async () => {
    const r = await both({ model: "m", messages: MESSAGES, stream: true, n: 2 }, "reasoning", 2);
    expect(r.texts).toBeGreaterThan(20);
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).toContain('"choices":[{"index":1,"delta":{"content":');
    expect(r.fast).toContain('"choices":[{"index":0,"delta":{"reasoning":');
  });

  it("reasoning in reasoning_content", async () => {
    const r = await both({ model: "m", messages: MESSAGES, stream: true }, "reasoning_content");
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).toContain('"delta":{"reasoning_content":');
  });

  it("with stop strings: the text held and cut as the chunks are", async () => {
    const r = await both({ model: "m", messages: MESSAGES, stream: true, stop: ["water"] });
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).not.toContain("water");
    expect(r.fast).toContain('"finish_reason":"stop"');
  });

  it("with include_reasoning false: no reasoning either way", async () => {
    const r = await both({ model: "m", messages: MESSAGES, stream: true, include_reasoning: false });
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).not.toContain('"reasoning"');
    expect(r.fast).toContain("Hello");
  });

  it("not streamed: the same completion", async () => {
    const r = await both({ model: "m", messages: MESSAGES });
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).toContain('"object":"chat.completion"');
  });

  it("an empty model: the chunks name the sessions' model, as event() writes them", async () => {
    const r = await both({ model: "", messages: MESSAGES, stream: true });
    expect(r.texts).toBeGreaterThan(10);
    expect(r.fast).toBe(r.chunks);
    expect(r.fast).toContain('"model":"gpt-oss"');
  });
});
