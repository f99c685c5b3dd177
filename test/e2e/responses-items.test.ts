/**
 * Responses input items and tools the way OpenAI's current reference has
 * them (the `openai` package's types, node_modules/openai/resources/responses/responses.d.ts
 * 6.49: `ResponseInputItem`, `Tool`), through the front (issue #30): each
 * handled or refused by name with a documented code; `item_reference`
 * resolved from the response store within the tenant; custom and
 * namespaced tools mapped to gpt-oss functions and back; a request with no
 * tools never gets a call; reasoning in `summary` when asked.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";
import { startVllm, type VllmStandIn } from "./stand-ins/vllm.js";
import { startTestServer } from "./test-server.js";

const { enc, vocab } = harmony();
const ids = (text: string) => enc.encode(text);
const COT = "Think about it.";
const callOf = (name: string, args: string) =>
  `<|channel|>analysis<|message|>${COT}<|end|><|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`;

async function failure(
  p: Promise<unknown>,
): Promise<{ status?: number; error?: { code?: string; param?: string | null; message?: string } }> {
  return p.then(
    () => ({}),
    (e: unknown) => e as { status?: number; error?: { code?: string; param?: string | null; message?: string } },
  );
}

describe("Responses items and tools through the front", () => {
  let vllm: VllmStandIn;
  let server: Server;
  let client: OpenAI;
  const lastPrompt = () => (vllm.completions().at(-1)!.body!.prompt as number[]).map((id) => vocab.text(id)).join("");

  beforeAll(async () => {
    vllm = await startVllm({ maxModelLen: 8192 });
    const s = await startTestServer({ grpcPort: -1, upstream: { url: vllm.url, idleTimeoutMs: 5000, reasoningField: "reasoning" } });
    server = s.server;
    client = new OpenAI({ baseURL: `${s.http}/v1`, apiKey: "sk-a", maxRetries: 0 });
  });
  afterAll(async () => {
    await server.stop();
    await vllm.close();
  });

  it("item types and content parts it cannot render are refused by name, before the engine is asked", async () => {
    const before = vllm.completions().length;
    const cases: [unknown[], string][] = [
      [[{ type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "x" } }], "input[0].type"],
      [[{ type: "local_shell_call_output", id: "x", call_id: "c", output: "o" }], "input[0].type"],
      [[{ type: "compaction", encrypted_content: "e" }], "input[0].type"],
      [
        [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AA==", detail: "auto" }] }],
        "input[0].content[0]",
      ],
    ];
    for (const [input, param] of cases) {
      const err = await failure(client.responses.create({ model: "gpt-oss", input: input as OpenAI.Responses.ResponseInput }));
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ code: "unsupported_input_item", param });
    }
    for (const [tool, param] of [
      [{ type: "web_search" }, "tools[0].type"],
      [{ type: "file_search", vector_store_ids: ["vs_1"] }, "tools[0].type"],
      [{ type: "code_interpreter", container: { type: "auto" } }, "tools[0].type"],
      [{ type: "namespace", name: "n", description: "d", tools: [{ type: "web_search" }] }, "tools[0].tools[0].type"],
    ] as const) {
      const err = await failure(client.responses.create({ model: "gpt-oss", input: "hi", tools: [tool as OpenAI.Responses.Tool] }));
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ code: "unsupported_tool", param });
      expect(err.error?.message).toContain(JSON.stringify(tool.type === "namespace" ? "web_search" : tool.type));
    }
    // Chat refuses what is not a function by name too
    const chat = await failure(
      client.chat.completions.create({
        model: "gpt-oss",
        messages: [{ role: "user", content: "hi" }],
        tools: [{ type: "custom", custom: { name: "x" } }],
      }),
    );
    expect(chat.error).toMatchObject({ code: "unsupported_tool", param: "tools[0].type" });
    expect(vllm.completions().length).toBe(before);
  });

  it("item_reference: resolved from the response store; an id it does not hold is 404 item_not_found", async () => {
    vllm.script({ tokens: ids(`<|channel|>analysis<|message|>${COT}<|end|><|start|>assistant<|channel|>final<|message|>Four.<|return|>`) });
    const r = await client.responses.create({ model: "gpt-oss", input: "2+2?" });
    const [reasoning, message] = r.output;
    expect(reasoning?.type).toBe("reasoning");
    vllm.script({ tokens: ids("<|channel|>final<|message|>Five.<|return|>") });
    await client.responses.create({
      model: "gpt-oss",
      input: [
        { role: "user", content: "2+2?" },
        { type: "item_reference", id: reasoning!.id! },
        { type: "item_reference", id: message!.id! },
        { role: "user", content: "and 2+3?" },
      ],
    });
    // the referenced answer is in the prompt; its reasoning dropped: a final answer follows it
    expect(lastPrompt()).toContain("<|start|>assistant<|channel|>final<|message|>Four.<|end|><|start|>user<|message|>and 2+3?<|end|>");
    expect(lastPrompt()).not.toContain(COT);
    // (tenants: the lookup is the store's, scoped like previous_response_id's; one token per process,
    // so another tenant is tested in test/e2e/replicas.test.ts's way, not here)
    for (const id of ["msg_nosuchresponse_0", "rs_nosuchresponse_in3", "not-an-id-of-ours", ""]) {
      const err = await failure(client.responses.create({ model: "gpt-oss", input: [{ type: "item_reference", id }] }));
      expect(err.status).toBe(404);
      expect(err.error).toMatchObject({ code: "item_not_found", param: "input[0].id" });
    }
  });

  it("a custom (freeform) tool is a function taking one string; its call comes back a custom_tool_call, streamed and not", async () => {
    const tools: OpenAI.Responses.Tool[] = [{ type: "custom", name: "apply_patch", description: "Apply a patch" }];
    const patch = "*** Begin Patch\n*** End Patch";
    vllm.script({ tokens: ids(callOf("apply_patch", JSON.stringify({ input: patch }))) });
    const r = await client.responses.create({ model: "gpt-oss", input: "patch it", tools });
    const call = r.output.find((o) => o.type === "custom_tool_call");
    expect(call).toMatchObject({ type: "custom_tool_call", name: "apply_patch", input: patch });
    expect(lastPrompt()).toContain("type apply_patch = (_: {\n// The tool's whole input, as free text.\ninput: string,\n}) => any;");
    vllm.script({ tokens: ids(callOf("apply_patch", JSON.stringify({ input: patch }))) });
    const types: string[] = [];
    let done = "";
    for await (const ev of await client.responses.create({ model: "gpt-oss", input: "patch it", tools, stream: true })) {
      types.push(ev.type);
      if (ev.type === "response.custom_tool_call_input.done") done = ev.input;
    }
    expect(done).toBe(patch);
    expect(types).not.toContain("response.function_call_arguments.delta");
    // and sent back: the call and its output in the next prompt
    vllm.script({ tokens: ids("<|channel|>final<|message|>Patched.<|return|>") });
    await client.responses.create({
      model: "gpt-oss",
      tools,
      input: [
        { role: "user", content: "patch it" },
        { type: "custom_tool_call", call_id: "c1", name: "apply_patch", input: patch },
        { type: "custom_tool_call_output", call_id: "c1", output: "Done" },
      ],
    });
    expect(lastPrompt()).toContain(
      `to=functions.apply_patch<|channel|>commentary <|constrain|>json<|message|>${JSON.stringify({ input: patch })}<|call|>`,
    );
    expect(lastPrompt()).toContain("<|start|>functions.apply_patch to=assistant<|channel|>commentary<|message|>Done<|end|>");
  });

  it("a namespace's functions are functions ns__name; a call comes back with the client's name and namespace", async () => {
    const tools = [
      {
        type: "namespace",
        name: "crm",
        description: "Customer records",
        tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: { id: { type: "string" } } } }],
      },
    ] as unknown as OpenAI.Responses.Tool[];
    vllm.script({ tokens: ids(callOf("crm__lookup", '{"id":"7"}')) });
    const r = await client.responses.create({ model: "gpt-oss", input: "who is 7?", tools });
    expect(r.output.find((o) => o.type === "function_call")).toMatchObject({ name: "lookup", namespace: "crm", arguments: '{"id":"7"}' });
    expect(lastPrompt()).toContain("type crm__lookup = (_: {");
  });

  it("no tools, no call: a call the model writes anyway is dropped and the answer says so (Responses and Chat)", async () => {
    const call = callOf("bash", '{"cmd":"ls"}');
    vllm.script({ tokens: ids(call) });
    const r = (await client.responses.create({ model: "gpt-oss", input: "Title for this chat?" })) as OpenAI.Responses.Response & {
      harmony?: { recoveries: { kind: string }[] };
    };
    expect(r.output.map((o) => o.type)).toEqual(["reasoning"]);
    expect(JSON.stringify(r.output)).not.toContain("ls");
    expect(r.harmony?.recoveries).toEqual([{ kind: "call_not_allowed", detail: expect.stringContaining("functions.bash") }]);
    vllm.script({ tokens: ids(call) });
    const c = (await client.chat.completions.create({
      model: "gpt-oss",
      messages: [{ role: "user", content: "Title?" }],
    })) as OpenAI.Chat.ChatCompletion & {
      harmony?: { recoveries: { kind: string; choice: number }[] };
    };
    expect(c.choices[0]!.finish_reason).toBe("stop");
    expect(c.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(c.choices[0]!.message.content ?? "").toBe("");
    expect(c.harmony?.recoveries).toEqual([{ kind: "call_not_allowed", choice: 0, detail: expect.stringContaining("functions.bash") }]);
    // streamed: one chunk with no choices says so
    vllm.script({ tokens: ids(call) });
    const said: unknown[] = [];
    for await (const chunk of await client.chat.completions.create({
      model: "gpt-oss",
      messages: [{ role: "user", content: "Title?" }],
      stream: true,
    }))
      if ("harmony" in chunk) said.push((chunk as { harmony: unknown }).harmony);
    expect(said).toEqual([{ recoveries: [{ kind: "call_not_allowed", choice: 0, detail: expect.any(String) }] }]);
    const metrics = await (await fetch(`${client.baseURL.replace(/\/v1$/, "")}/metrics`)).text();
    expect(metrics).toMatch(/harmony_recoveries_total\{kind="call_not_allowed"\} [1-9]/);
  });

  it("reasoning.summary asked: the reasoning item's summary carries it, with the summary events; not asked: summary stays empty", async () => {
    const text = `<|channel|>analysis<|message|>${COT}<|end|><|start|>assistant<|channel|>final<|message|>Ok.<|return|>`;
    vllm.script({ tokens: ids(text) });
    const plain = await client.responses.create({ model: "gpt-oss", input: "hi" });
    expect(plain.output[0]).toMatchObject({ type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: COT }] });
    vllm.script({ tokens: ids(text) });
    const asked = await client.responses.create({ model: "gpt-oss", input: "hi", reasoning: { summary: "auto" } });
    expect(asked.output[0]).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: COT }] });
    vllm.script({ tokens: ids(text) });
    let summary = "";
    const seqs: number[] = [];
    for await (const ev of await client.responses.create({
      model: "gpt-oss",
      input: "hi",
      reasoning: { summary: "detailed" },
      stream: true,
    })) {
      seqs.push(ev.sequence_number);
      if (ev.type === "response.reasoning_summary_text.delta") summary += ev.delta;
    }
    expect(summary).toBe(COT);
    expect(seqs).toEqual(seqs.map((_, i) => i));
  });
});
