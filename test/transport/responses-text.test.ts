/**
 * A Responses answer's text steps (src/pool/host.ts sends a step whose one
 * event is a text delta as that event's JSON, made by the adapter's
 * plainDelta; ResponsesAnswer.text writes it): the client gets the same bytes,
 * and the response the same output, as when every step is an event through
 * ResponsesAnswer.event. Two answers are fed the same completion (reasoning, a
 * preamble, a function call, the final answer), one as the host feeds it now
 * (the event's JSON where the adapter's plainType says so, events
 * otherwise), the other event by event. Cases: streamed, not streamed,
 * reasoning summaries asked, and Codex's request (summaries, reasoning carried
 * in encrypted_content, a namespace tool) with a call: ResponsesOutput at work,
 * rewriting the JSON itself.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/json.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { HARMONY } from "../../src/core/preset.js";
import { planResponses, type FrontPlan } from "../../src/openai/plan.js";
import { responsesToChat, responsesToolChoice } from "../../src/openai/responses-input.js";
import { ResponsesStreamAdapter } from "../../src/openai/responses.js";
import type { Service } from "../../src/service/service.js";
import { ResponsesAnswer } from "../../src/transport/front/responses-answer.js";
import { answerDrain, normalized } from "./answer-drain.js";

const drain = answerDrain();
const response = drain.response;
let svc: Service;
beforeAll(() => {
  svc = drain.svc();
});

/**
 * A completion: reasoning, then either a preamble on commentary and a call of
 * get_weather (a call ends the completion), or an answer with quotes, a
 * backslash, a newline and non-ASCII text.
 */
function completion(call: boolean): number[] {
  const T = HARMONY.tokens;
  const text = (s: string) => svc.encoding.encodeOrdinary(s);
  const reasoning = [T.channel, ...text("analysis"), T.message, ...text("The user wants the weather; call the tool."), T.end];
  const next = (channel: string) => [T.start, ...text("assistant"), T.channel, ...text(channel)];
  if (call)
    return [
      ...reasoning,
      ...next("commentary"),
      T.message,
      ...text('Looking it up "now".'),
      T.end,
      ...next("commentary to=functions.get_weather "),
      T.constrain,
      ...text("json"),
      T.message,
      ...text('{"city":"Paris"}'),
      T.call,
    ];
  return [...reasoning, ...next("final"), T.message, ...text('Sunny "today" \\ in Paris,\nlow water: été 🦀 done.'), T.return];
}

/** Feed `ids` one by one to an answer: as the host does (`fast`), or every step as events. How many steps went as JSON. */
function feed(answer: ResponsesAnswer, ids: readonly number[], fast: boolean): number {
  const vocab = svc.vocabulary();
  const parser = new HarmonyParser(vocab, { role: "assistant", callIdPrefix: "call_t_" });
  const adapter = new ResponsesStreamAdapter({ id: "resp_x", model: "m", created: 1 });
  let texts = 0;
  const step = Uint32Array.of(0);
  for (const id of ids) {
    step[0] = id;
    const type = fast ? adapter.plainType(parser.messageIndex, parser.textKind) : null;
    if (type !== null && parser.takeText(step, 0, 1)) {
      answer.text(0, type, adapter.plainDelta(vocab.text(id)));
      texts++;
      continue;
    }
    for (const ev of parser.write(step, 0, 1)) for (const obj of adapter.push(ev)) answer.event(0, obj as unknown as JsonObject, null);
  }
  for (const ev of parser.end("eos")) for (const obj of adapter.push(ev)) answer.event(0, obj as unknown as JsonObject, null);
  return texts;
}

/**
 * A response as its head and its HTTP/1.1 chunks (their sizes, the Date and
 * content-length headers, and the ids' and clock's varying digits set aside):
 * the same writes give the same text.
 */
function normalizedAnswer(raw: string): string {
  return normalized(raw).replace(/"created_at":\d+/g, '"created_at":0');
}

const TOOLS = [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }];

/** The body written for `request`, fed both ways. */
async function both(extra: JsonObject, call = false) {
  const request: JsonObject = { model: "m", input: "Weather in Paris?", tools: TOOLS, store: false, ...extra };
  const conv = responsesToChat(request);
  if (!conv.ok) throw new Error(conv.message);
  const plan = planResponses(request, conv.chat, responsesToolChoice(request.tool_choice)) as FrontPlan;
  const ids = completion(call);
  const out: string[] = [];
  let texts = 0;
  for (const fast of [true, false]) {
    const { res, body } = await response();
    const answer = new ResponsesAnswer(svc, res, plan, request, "", conv.routes, []);
    const n = feed(answer, ids, fast);
    if (fast) texts = n;
    await answer.finish({ usage: null, error: null });
    out.push(normalizedAnswer(await body()));
  }
  return { fast: out[0]!, events: out[1]!, texts };
}

describe("a Responses answer's text steps", () => {
  it("streamed: each text step's event is the bytes its event object gives", async () => {
    const r = await both({ stream: true });
    expect(r.texts).toBeGreaterThan(18);
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain("event: response.reasoning_text.delta");
    expect(r.fast).toMatch(
      /"type":"response.output_text.delta","content_index":0,"logprobs":\[\],"item_id":"msg_x_\d","output_index":\d,"sequence_number":\d+,"delta":"[^"]*\\n/,
    );
    expect(r.fast).toContain("event: response.completed");
    // the whole texts in the items done and the response
    expect(r.fast).toContain("low water: été 🦀 done.");
  });

  it("streamed, a preamble and a call: the preamble's steps as JSON, the arguments as events", async () => {
    const r = await both({ stream: true }, true);
    expect(r.texts).toBeGreaterThan(12);
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain('"phase":"commentary"');
    expect(r.fast).toContain("response.function_call_arguments.delta");
    expect(r.fast).toContain('"arguments":"{\\"city\\":\\"Paris\\"}"');
  });

  it("not streamed: the same response", async () => {
    const r = await both({});
    expect(r.texts).toBeGreaterThan(18);
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain('"output_text":"Sunny');
  });

  it("with reasoning summaries asked: ResponsesOutput renumbers the JSON and adds the summary deltas, with the same result", async () => {
    const r = await both({ stream: true, reasoning: { summary: "auto" } });
    expect(r.texts).toBeGreaterThan(18);
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain("event: response.reasoning_summary_text.delta");
  });

  // Codex CLI's request, as the real client sends it (test/e2e/clients/codex.test.ts): `include:
  // ["reasoning.encrypted_content"]`, `reasoning.summary: "auto"`, a `namespace` tool; a custom tool beside them
  it("as Codex asks (summaries, carried reasoning, a namespace tool, a custom one), a call: the same result", async () => {
    const r = await both(
      {
        stream: true,
        reasoning: { effort: "medium", summary: "auto" },
        include: ["reasoning.encrypted_content"],
        tools: [
          ...TOOLS,
          { type: "namespace", name: "multi_agent_v1", tools: [{ type: "function", name: "spawn", parameters: { type: "object" } }] },
          { type: "custom", name: "apply_patch", description: "Edit files." },
        ],
      },
      true,
    );
    expect(r.texts).toBeGreaterThan(12);
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain('"encrypted_content":');
    expect(r.fast).toContain("event: response.reasoning_summary_text.delta");
  });

  it("with carried reasoning only, not streamed: the same response", async () => {
    const r = await both({ include: ["reasoning.encrypted_content"] });
    expect(r.fast).toBe(r.events);
    expect(r.fast).toContain('"encrypted_content":');
  });
});
