/**
 * The `openai` package's own tool loops through the front: Chat
 * Completions' `runTools` (the SDK runs the function and sends its result
 * back) and `responses.stream` with the loop its docs show (send the
 * response's output items back with the function's output), against the
 * vLLM stand-in, with the reasoning store on and off (./harness.ts).
 */
import OpenAI from "openai";
import type { RunnableToolFunctionWithParse } from "openai/lib/RunnableFunction";
import type { ResponseInputItem } from "openai/resources/responses/responses";
import { describe, expect, it } from "vitest";
import { checkLoop, useRig, WEATHER_AGENT as A, WEATHER_RESULT as RESULT } from "./harness.js";

const PARAMS = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };

const rig = useRig();

describe.each(["on", "off"] as const)("openai (the reasoning store %s)", (store) => {
  const client = () => new OpenAI({ baseURL: `${rig.fronts[store]}/v1`, apiKey: "sk-local", maxRetries: 0 });

  it.each([false, true])("chat.completions.runTools (stream: %s): the SDK's loop, then a follow-up", async (stream) => {
    const from = rig.mark();
    const seen: unknown[] = [];
    const tools: RunnableToolFunctionWithParse<{ city: string }>[] = [
      {
        type: "function",
        function: {
          name: A.tool,
          description: "The weather in a city",
          parameters: PARAMS,
          parse: (s: string) => JSON.parse(s) as { city: string },
          function: (args: { city: string }) => {
            seen.push(args);
            return RESULT;
          },
        },
      },
    ];
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather in Paris?" }];
    let streamed = "";
    let runner;
    if (stream) {
      const r = client().chat.completions.runTools({ model: "gpt-oss", messages, tools, stream: true });
      r.on("chunk", (chunk) => {
        streamed += (chunk.choices[0]?.delta as { reasoning?: string } | undefined)?.reasoning ?? "";
      });
      runner = r;
    } else runner = client().chat.completions.runTools({ model: "gpt-oss", messages, tools });
    expect(await runner.finalContent()).toBe(A.answer);
    expect(seen).toEqual([A.args]);
    // the reasoning is where a Chat client reads it: the message's (or the delta's) `reasoning`
    if (stream) expect(streamed).toBe(A.cot + A.answerCot);
    else {
      const assistant = runner.messages.filter((m) => m.role === "assistant") as { reasoning?: string }[];
      expect(assistant.map((m) => m.reasoning)).toEqual([A.cot, A.answerCot]);
    }
    const follow = await client().chat.completions.create({
      model: "gpt-oss",
      messages: [...runner.messages, { role: "user", content: "Thanks!" }],
    });
    expect(follow.choices[0]!.message.content).toBe(A.followUp);
    // runTools sends back content and tool_calls only (toRequestMessage, openai 6.49): the reasoning
    // comes back from the store, or, with it off, not at all
    checkLoop({ turns: rig.turns(from), result: RESULT, reasoningKept: store === "on" });
  });

  it("responses.stream: the docs' loop (output items back, with the function's output), then a follow-up", async () => {
    const from = rig.mark();
    const c = client();
    const tools = [{ type: "function" as const, name: A.tool, parameters: PARAMS, strict: true }];
    const input: ResponseInputItem[] = [{ role: "user", content: "Weather in Paris?" }];
    const deltas: string[] = [];
    const first = c.responses.stream({ model: "gpt-oss", input, tools });
    first.on("response.reasoning_text.delta", (e) => deltas.push(e.delta));
    const r1 = await first.finalResponse();
    expect(deltas.join("")).toBe(A.cot);
    const call = r1.output.find((o) => o.type === "function_call");
    expect(call?.type === "function_call" && JSON.parse(call.arguments)).toEqual(A.args);
    const preamble = r1.output.find((o) => o.type === "message");
    expect(preamble?.type === "message" && preamble.phase).toBe("commentary");
    input.push(...(r1.output as ResponseInputItem[]));
    input.push({ type: "function_call_output", call_id: call!.type === "function_call" ? call!.call_id : "", output: RESULT });
    const r2 = await c.responses.stream({ model: "gpt-oss", input, tools }).finalResponse();
    expect(r2.output_text).toBe(A.answer);
    input.push(...(r2.output as ResponseInputItem[]), { role: "user", content: "Thanks!" });
    const r3 = await c.responses.stream({ model: "gpt-oss", input, tools }).finalResponse();
    expect(r3.output_text).toBe(A.followUp);
    checkLoop({ turns: rig.turns(from), result: RESULT });
  });
});
