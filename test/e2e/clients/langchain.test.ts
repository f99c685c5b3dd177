/**
 * LangChain's `ChatOpenAI` through the front, in the tool loop its docs
 * show (`bindTools`, the model's `tool_calls` run with `tool.invoke`, the
 * `ToolMessage`s sent back): the Responses API (`useResponsesApi: true`)
 * and Chat Completions, `invoke` and `stream`, with the reasoning store on
 * and off (./harness.ts).
 *
 * Streamed with `.stream()`, not `streaming: true`: `invoke` with
 * `streaming: true` estimates the prompt's tokens with js-tiktoken, which
 * fetches its ranks from the network (here: retried until the test's
 * deadline). `gpt-oss` is not a model id `@langchain/openai` sends
 * `reasoning` for (1.5.8's isReasoningModel: o1…, gpt-5* but not
 * gpt-5-chat*), so the summary is asked through `modelKwargs`; on Chat,
 * LangChain reads `reasoning_content` only, asked with
 * `harmony.reasoning_field` (docs/clients.md).
 */
import { HumanMessage, type AIMessage, type AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { checkLoop, useRig, WEATHER_AGENT as A, WEATHER_RESULT as RESULT } from "./harness.js";

const rig = useRig();

/** The reasoning LangChain shows on a message: its reasoning content blocks (Responses: from the summary; Chat: `reasoning_content`). */
function reasoningOf(m: AIMessage): string {
  const blocks = (m.contentBlocks ?? []) as { type: string; reasoning?: string }[];
  const shown = blocks
    .filter((b) => b.type === "reasoning")
    .map((b) => b.reasoning ?? "")
    .join("");
  const kwarg = m.additional_kwargs.reasoning_content;
  return shown !== "" ? shown : typeof kwarg === "string" ? kwarg : "";
}

describe.each(["on", "off"] as const)("LangChain ChatOpenAI (the reasoning store %s)", (store) => {
  it.each([
    [true, false],
    [true, true],
    [false, false],
    [false, true],
  ])("useResponsesApi: %s (stream: %s): the docs' tool loop, then a follow-up", async (useResponsesApi, streamed) => {
    const from = rig.mark();
    const seen: unknown[] = [];
    const getWeather = tool(
      async (args: { city: string }) => {
        seen.push(args);
        return RESULT;
      },
      { name: A.tool, description: "The weather in a city", schema: z.object({ city: z.string() }) },
    );
    const model = new ChatOpenAI({
      model: "gpt-oss",
      apiKey: "sk-local",
      configuration: { baseURL: `${rig.fronts[store]}/v1` },
      useResponsesApi,
      maxRetries: 0,
      modelKwargs: useResponsesApi ? { reasoning: { summary: "auto" } } : { harmony: { reasoning_field: "reasoning_content" } },
    }).bindTools([getWeather]);
    const ask = async (messages: BaseMessage[]): Promise<AIMessage> => {
      if (!streamed) return model.invoke(messages);
      let acc: AIMessageChunk | undefined;
      for await (const chunk of await model.stream(messages)) acc = acc ? acc.concat(chunk) : chunk;
      return acc!;
    };
    const messages: BaseMessage[] = [new HumanMessage("Weather in Paris?")];
    const first = await ask(messages);
    messages.push(first);
    expect(first.tool_calls?.map((c) => c.args)).toEqual([A.args]);
    for (const call of first.tool_calls ?? []) messages.push(await getWeather.invoke(call));
    const second = await ask(messages);
    messages.push(second);
    expect(second.text).toBe(A.answer);
    expect(seen).toEqual([A.args]);
    const shown = [reasoningOf(first), reasoningOf(second)];
    messages.push(new HumanMessage("Thanks!"));
    const third = await ask(messages);
    expect(third.text).toBe(A.followUp);
    expect(shown).toEqual([A.cot, A.answerCot]);
    // Chat: LangChain sends back content and tool_calls only: the store puts the reasoning back, or with it off it is gone
    checkLoop({ turns: rig.turns(from), result: RESULT, reasoningKept: useResponsesApi || store === "on" });
  });
});
