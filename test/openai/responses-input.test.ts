/** Responses input → the chat request the renderer takes (src/openai/responses-input.ts): Harmony's turn structure. */
import { describe, expect, it } from "vitest";
import { carriedReasoning, carryReasoning, responseIdOfItem, responsesToChat } from "../../src/openai/responses-input.js";

const chat = (input: unknown[]) => {
  const r = responsesToChat({ input });
  if (!r.ok) throw new Error(r.message);
  return r.chat.messages as unknown[];
};
const U = { role: "user", content: "q" };
const RS = { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "think" }] };
const FC = { type: "function_call", call_id: "c1", name: "f", arguments: "{}" };
const OUT = { type: "function_call_output", call_id: "c1", output: "r" };

describe("responsesToChat", () => {
  it("a preamble (phase commentary, or no phase with a call after it) is in the call's turn, with the turn's reasoning", () => {
    const want = [
      { role: "user", content: "q" },
      { role: "assistant", content: "pre", reasoning: "think", tool_calls: [expect.objectContaining({ id: "c1" })] },
      { role: "tool", tool_call_id: "c1", content: "r" },
    ];
    expect(chat([U, RS, { role: "assistant", content: "pre", phase: "commentary" }, FC, OUT])).toEqual(want);
    expect(chat([U, RS, { type: "message", role: "assistant", content: [{ type: "output_text", text: "pre" }] }, FC, OUT])).toEqual(want);
  });

  it("an answer without a phase and no call after it is final; a commentary with no call yet stays commentary", () => {
    expect(chat([U, RS, { role: "assistant", content: "done" }])).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: "done", reasoning: "think" },
    ]);
    expect(chat([U, RS, { role: "assistant", content: "pre", phase: "commentary" }])).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: "pre", reasoning: "think", channel: "commentary" },
    ]);
    // reasoning alone (a built-in call, a cut turn): analysis only, no final
    expect(chat([U, RS])).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: null, reasoning: "think", channel: "commentary" },
    ]);
    // a preamble then a final answer: the preamble is commentary, the answer final
    expect(
      chat([
        U,
        RS,
        { role: "assistant", content: "pre", phase: "commentary" },
        { role: "assistant", content: "ans", phase: "final_answer" },
      ]),
    ).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: "pre", reasoning: "think", channel: "commentary" },
      { role: "assistant", content: "ans" },
    ]);
  });

  it("reasoning from content, else summary, else the sidecar's encrypted_content; a custom call as {input}", () => {
    const carried = carryReasoning("héllo");
    expect(carriedReasoning(carried)).toBe("héllo");
    expect(carriedReasoning("gAAAAB-someone-else")).toBeNull();
    const [, a] = chat([
      U,
      { type: "reasoning", id: "rs_2", summary: [], encrypted_content: carried },
      { type: "custom_tool_call", call_id: "c2", name: "patch", input: "*** x" },
    ]);
    expect(a).toMatchObject({
      reasoning: "héllo",
      tool_calls: [{ id: "c2", function: { name: "patch", arguments: '{"input":"*** x"}' } }],
    });
    const [, b] = chat([
      U,
      { type: "reasoning", id: "rs_3", summary: [{ type: "summary_text", text: "sum" }] },
      { ...FC, namespace: "crm" },
    ]);
    expect(b).toMatchObject({ reasoning: "sum", tool_calls: [{ function: { name: "crm__f" } }] });
  });

  it("item ids of the sidecar's name their response; others do not", () => {
    expect(responseIdOfItem("rs_0a1b2c_0")).toBe("resp_0a1b2c");
    expect(responseIdOfItem("msg_0a1b2c_in12")).toBe("resp_0a1b2c");
    expect(responseIdOfItem("msg_01a236ff-98d5-7863")).toBeNull();
  });
});
