/**
 * The OpenAI Agents SDK's own agent loop (`Runner.run`, streamed) through
 * the front: its Responses model (the history sent back whole, and
 * continued by `previousResponseId`) and its Chat Completions model, with
 * the reasoning store on and off (./harness.ts).
 */
import { Agent, OpenAIProvider, Runner, tool, user, type AgentInputItem } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { checkLoop, startRig, WEATHER_AGENT as A, type Rig } from "./harness.js";

const RESULT = '{"temp_c":18,"sky":"sunny"}';

let rig: Rig;
beforeAll(async () => {
  rig = await startRig();
});
afterAll(async () => {
  await rig.close();
});

function agent(seen: unknown[]): Agent {
  const getWeather = tool({
    name: A.tool,
    description: "The weather in a city",
    parameters: z.object({ city: z.string() }),
    execute: async (args) => {
      seen.push(args);
      return RESULT;
    },
  });
  return new Agent({
    name: "weather",
    instructions: "Answer weather questions with the tool.",
    model: "gpt-oss",
    modelSettings: { reasoning: { summary: "auto" } },
    tools: [getWeather],
  });
}

/** The reasoning the run's items show (a reasoning item's content, else its summary). */
function reasoningOf(items: { type: string; rawItem?: unknown }[]): string[] {
  return items
    .filter((i) => i.type === "reasoning_item")
    .map((i) => {
      const raw = i.rawItem as { content?: { text: string }[]; rawContent?: { text: string }[] };
      return (raw.rawContent ?? raw.content ?? []).map((c) => c.text).join("");
    });
}

describe.each(["on", "off"] as const)("the Agents SDK (the reasoning store %s)", (store) => {
  const runner = (useResponses: boolean) =>
    new Runner({
      modelProvider: new OpenAIProvider({ baseURL: `${rig.fronts[store]}/v1`, apiKey: "sk-local", useResponses }),
      tracingDisabled: true,
    });

  it.each([
    ["Responses", true, false],
    ["Responses, continued by previousResponseId", true, true],
    ["Chat Completions", false, false],
  ] as const)("%s model, streamed: the loop, then a follow-up", async (_name, useResponses, byPrevious) => {
    const from = rig.mark();
    const seen: unknown[] = [];
    const a = agent(seen);
    const r = runner(useResponses);
    const result = await r.run(a, "Weather in Paris?", { stream: true });
    let text = "";
    for await (const ev of result.toTextStream()) text += ev;
    await result.completed;
    expect(result.finalOutput).toBe(A.answer);
    expect(text).toContain(A.answer);
    expect(seen).toEqual([A.args]);
    // both models show the reasoning as reasoning items (the Chat model reads `reasoning` and sends it back)
    expect(reasoningOf(result.newItems)).toEqual([A.cot, A.answerCot]);
    const follow = byPrevious
      ? await r.run(a, "Thanks!", { stream: true, previousResponseId: result.lastResponseId })
      : await r.run(a, [...(result.history as AgentInputItem[]), user("Thanks!")], { stream: true });
    await follow.completed;
    expect(follow.finalOutput).toBe(A.followUp);
    checkLoop({ turns: rig.turns(from), result: RESULT });
  });
});
