/**
 * The AI SDK's tool loop (`generateText` / `streamText` with a tool and
 * `stopWhen`) through the front: `@ai-sdk/openai`'s Responses model with
 * `store` true (reasoning and text sent back as `item_reference`s) and
 * false (reasoning sent back as summary and `encrypted_content`), its Chat
 * model, and `@ai-sdk/openai-compatible`, with the reasoning store on and
 * off (./harness.ts).
 *
 * `gpt-oss` is not a model id `@ai-sdk/openai` knows as a reasoning model,
 * so the Responses tests say `forceReasoning: true` and ask for
 * `reasoningSummary` (docs/clients.md): only then does the SDK ask for and
 * show reasoning.
 */
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, streamText, tool, type ModelMessage } from "ai";
import { describe, expect, it } from "vitest";
import { checkLoop, useRig, WEATHER_AGENT as A } from "./harness.js";

const RESULT = { temp_c: 18, sky: "sunny" };

const rig = useRig();

function weather(seen: unknown[]) {
  return tool({
    description: "The weather in a city",
    inputSchema: jsonSchema<{ city: string }>({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    }),
    execute: async (args) => {
      seen.push(args);
      return RESULT;
    },
  });
}

type Model = Parameters<typeof generateText>[0]["model"];
type ProviderOptions = NonNullable<Parameters<typeof generateText>[0]["providerOptions"]>;

/** One tool loop, then a follow-up with the conversation so far; returns the reasoning the SDK showed per step. */
async function loop(model: Model, streamed: boolean, providerOptions?: ProviderOptions): Promise<string[]> {
  const seen: unknown[] = [];
  const tools = { [A.tool]: weather(seen) };
  const messages: ModelMessage[] = [{ role: "user", content: "Weather in Paris?" }];
  const opts = { model, messages, tools, stopWhen: stepCountIs(5), ...(providerOptions ? { providerOptions } : {}) } as const;
  let text: string;
  let reasoning: string[];
  let response: { messages: ModelMessage[] };
  if (streamed) {
    const r = streamText(opts);
    text = await r.text;
    reasoning = (await r.steps).map((s) => s.reasoningText ?? "");
    response = await r.response;
  } else {
    const r = await generateText(opts);
    text = r.text;
    reasoning = r.steps.map((s) => s.reasoningText ?? "");
    response = r.response;
  }
  expect(text).toBe(A.answer);
  expect(seen).toEqual([A.args]);
  const follow = await generateText({
    model,
    tools,
    messages: [...messages, ...response.messages, { role: "user", content: "Thanks!" }],
    ...(providerOptions ? { providerOptions } : {}),
  });
  expect(follow.text).toBe(A.followUp);
  return reasoning;
}

/** The request bodies a provider sent (its `fetch` wrapped), to check what it sends back. */
function recording(): { fetch: typeof fetch; bodies: Record<string, unknown>[] } {
  const bodies: Record<string, unknown>[] = [];
  return {
    bodies,
    fetch: (input, init) => {
      if (typeof init?.body === "string") bodies.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    },
  };
}

describe.each(["on", "off"] as const)("the AI SDK (the reasoning store %s)", (store) => {
  let sent = recording();
  const openai = () => {
    sent = recording();
    return createOpenAI({ baseURL: `${rig.fronts[store]}/v1`, apiKey: "sk-local", fetch: sent.fetch });
  };

  it.each([
    [true, false],
    [true, true],
    [false, false],
    [false, true],
  ])("@ai-sdk/openai Responses, store: %s (streamed: %s)", async (storeResponses, streamed) => {
    const from = rig.mark();
    const reasoning = await loop(openai().responses("gpt-oss"), streamed, {
      openai: { store: storeResponses, forceReasoning: true, reasoningSummary: "auto" },
    });
    // the reasoning shows as the SDK's reasoning (it reads summaries)
    expect(reasoning).toEqual([A.cot, A.answerCot]);
    const turns = rig.turns(from);
    checkLoop({ turns, result: JSON.stringify(RESULT) });
    // what the SDK sent back in step 2: store true, the reasoning and the preamble by reference (resolved
    // from the response store); store false, the reasoning as summary and encrypted_content
    const step2 = (sent.bodies[1]!.input as { type?: string; encrypted_content?: string }[]).map((i) => i.type ?? "message");
    if (storeResponses) expect(step2).toEqual(["message", "item_reference", "item_reference", "function_call", "function_call_output"]);
    else {
      expect(step2).toEqual(["message", "reasoning", "message", "function_call", "function_call_output"]);
      expect(sent.bodies[1]!.include).toEqual(["reasoning.encrypted_content"]);
    }
  });

  it.each([false, true])("@ai-sdk/openai Chat (streamed: %s)", async (streamed) => {
    const from = rig.mark();
    const reasoning = await loop(openai().chat("gpt-oss"), streamed);
    // @ai-sdk/openai's Chat model (3.0.141) reads neither `reasoning` nor `reasoning_content`: no reasoning
    // to show, and none sent back (the store puts it back, or with it off it is gone)
    expect(reasoning).toEqual(["", ""]);
    expect(JSON.stringify(sent.bodies[1]!.messages)).not.toContain(A.cot);
    checkLoop({ turns: rig.turns(from), result: JSON.stringify(RESULT), reasoningKept: store === "on" });
  });

  it.each([false, true])("@ai-sdk/openai-compatible (streamed: %s)", async (streamed) => {
    const from = rig.mark();
    const provider = createOpenAICompatible({ name: "sidecar", baseURL: `${rig.fronts[store]}/v1`, apiKey: "sk-local" });
    const reasoning = await loop(provider.chatModel("gpt-oss"), streamed);
    expect(reasoning).toEqual([A.cot, A.answerCot]);
    checkLoop({ turns: rig.turns(from), result: JSON.stringify(RESULT) });
  });
});
