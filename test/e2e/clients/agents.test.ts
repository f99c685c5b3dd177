/**
 * The OpenAI Agents SDK's own agent loop (`Runner.run`, streamed) through
 * the front: its Responses model (the history sent back whole, and
 * continued by `previousResponseId`) and its Chat Completions model, with
 * the reasoning store on and off (./harness.ts).
 */
import { Agent, OpenAIProvider, Runner, tool, user, type AgentInputItem } from "@openai/agents";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { checkLoop, useRig, WEATHER_AGENT as A, WEATHER_RESULT as RESULT } from "./harness.js";

const rig = useRig();

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
  /** The request bodies the runner's model sent (its client's `fetch` wrapped), to check what it sends back. */
  let bodies: Record<string, unknown>[] = [];
  const runner = (useResponses: boolean) => {
    bodies = [];
    const openAIClient = new OpenAI({
      baseURL: `${rig.fronts[store]}/v1`,
      apiKey: "sk-local",
      fetch: (input, init) => {
        if (typeof init?.body === "string") bodies.push(JSON.parse(init.body) as Record<string, unknown>);
        return fetch(input, init);
      },
    });
    return new Runner({ modelProvider: new OpenAIProvider({ openAIClient, useResponses }), tracingDisabled: true });
  };

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
    // what step 2 sent back: the Responses model, the reasoning item whole and the preamble with phase
    // "commentary"; the Chat model (0.14.3's itemsToMessages), the call's turn as three assistant messages:
    // its reasoning, its preamble, its call (one turn to the front: test/core/render.test.ts)
    if (useResponses) {
      const step2 = bodies[1]!.input as { type?: string; phase?: string; content?: unknown }[];
      expect(step2.map((i) => i.type ?? "message")).toEqual(["message", "reasoning", "message", "function_call", "function_call_output"]);
      expect(step2[2]!.phase).toBe("commentary");
      expect(JSON.stringify(step2[1]!.content)).toContain(A.cot);
    } else {
      const step2 = bodies[1]!.messages as { role: string; reasoning?: string; content?: unknown; tool_calls?: unknown[] }[];
      expect(step2.map((m) => m.role)).toEqual(["system", "user", "assistant", "assistant", "assistant", "tool"]);
      expect(step2[2]).toMatchObject({ content: null, reasoning: A.cot });
      expect(JSON.stringify(step2[3]!.content)).toContain(A.preamble);
      expect(step2[4]!.tool_calls).toHaveLength(1);
    }
    const follow = byPrevious
      ? await r.run(a, "Thanks!", { stream: true, previousResponseId: result.lastResponseId })
      : await r.run(a, [...(result.history as AgentInputItem[]), user("Thanks!")], { stream: true });
    await follow.completed;
    expect(follow.finalOutput).toBe(A.followUp);
    checkLoop({ turns: rig.turns(from), result: RESULT });
  });
});
