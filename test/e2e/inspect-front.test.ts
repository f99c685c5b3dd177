/**
 * The inspector and the OpenAI front agree: for the same completion ids,
 * the Chat chunks and Responses events POST /v1/parse gives with
 * `chunks: true` are the ones the front streams to the official `openai`
 * client (the engine: test/e2e/stand-in-vllm.ts, one id per chunk as vLLM
 * streams by default), the request's own ids and times aside. And a
 * repaired answer's log line names the id the client got and an /inspect
 * link whose ids and options are the parse's.
 */
import OpenAI from "openai";
import { pino } from "pino";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeFragment, parseIdList } from "../../src/inspect/logic.js";
import { answerParse } from "../../src/inspect/parse.js";
import { INSPECT_CHAT_ID, INSPECT_RESPONSE_ID } from "../../src/inspect/chunks.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";
import { Server } from "../../src/server.js";
import { MAX_LINK_IDS } from "../../src/transport/repair-log.js";
import { harmony } from "../helpers.js";
import { joinedDeltas } from "./coalesced.js";
import { startStandIn, type StandIn } from "./stand-in-vllm.js";

const { enc, vocab } = harmony();
/** An abandoned call header, restarted: three repairs, one call (docs/inspect.md's example). */
const SPLICED =
  '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|><|start|>assistant<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>';
const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
];

type Obj = Record<string, unknown>;

/** What /v1/parse says the front streams for `ids`. */
function inspected(ids: number[], extra: Obj = {}): { chat: Obj[]; responses: Obj[] } {
  const r = answerParse(
    vocab,
    enc.encode,
    new TextEncoder().encode(JSON.stringify({ ids, tools: ["get_weather"], tokens: true, chunks: true, ...extra })),
    262144,
  );
  expect(r.status).toBe(200);
  const a = JSON.parse(r.json) as { chunks: { chat: { data: Obj }[]; responses: { data: Obj }[] } };
  return { chat: a.chunks.chat.map((c) => c.data), responses: a.chunks.responses.map((c) => c.data) };
}

/** One request's own values set aside: its ids, its times, the engine's usage; deltas joined (./coalesced.ts). */
function normal(objs: Obj[], id: string, as: string): unknown {
  const base = id.replace(/^resp_/, "");
  const text = JSON.stringify(objs)
    .replaceAll(id, as)
    .replaceAll(`_${base}_`, `_${as.replace(/^resp_/, "")}_`)
    .replace(/"(created|created_at)":\d+/g, '"$1":0')
    .replace(/"call_[0-9a-z]+_(\d+)"/g, '"call_inspect_$1"')
    .replace(/"model":"[^"]*"/g, '"model":"m"');
  const out = JSON.parse(text) as Obj[];
  for (const o of out) if (o.response && typeof o.response === "object") delete (o.response as Obj).usage;
  return joinedDeltas(out);
}

describe("the inspector's chunks are the front's", () => {
  let upstream: StandIn;
  let server: Server;
  let client: OpenAI;
  const logs: Obj[] = [];

  beforeAll(async () => {
    upstream = await startStandIn();
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n")) if (line.trim() !== "") logs.push(JSON.parse(line) as Obj);
        done();
      },
    });
    server = new Server({
      host: "127.0.0.1",
      port: 0,
      grpcPort: -1,
      workers: 0,
      drainTimeoutMs: 2000,
      limits: DEFAULT_LIMITS,
      logger: pino({ level: "warn" }, sink),
      upstream: { url: upstream.url, idleTimeoutMs: 5000, reasoningField: "reasoning" },
    });
    const { port } = await server.start();
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
  });

  afterAll(async () => {
    await server.stop();
    await upstream.close();
  });

  const repairLines = (response: string) => logs.filter((l) => l.msg === "recovered malformed model output" && l.response === response);

  it("Chat Completions, streamed: the same chunks, and a log line with the chatcmpl id and a link that reproduces it", async () => {
    const ids = enc.encode(SPLICED);
    upstream.script({ tokens: ids, chunkSize: 1 });
    const stream = await client.chat.completions.create({
      model: "openai/gpt-oss-20b",
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: TOOLS,
      stream: true,
    });
    const got: Obj[] = [];
    for await (const chunk of stream) got.push(chunk as unknown as Obj);
    const id = String(got[0]!.id);
    expect(id).toMatch(/^chatcmpl-/);
    expect(normal(got, id, INSPECT_CHAT_ID)).toEqual(normal(inspected(ids).chat, INSPECT_CHAT_ID, INSPECT_CHAT_ID));
    // the log line: the id the client got, the repairs, and the link
    const [line] = repairLines(id);
    expect(line).toMatchObject({ choice: 0, recoveries: { double_start: 1, abandoned_header: 1, recipient_spliced: 1 } });
    const link = String(line!.inspect);
    expect(link.startsWith("/inspect#ids=")).toBe(true);
    const f = decodeFragment(link.slice("/inspect".length))!;
    expect(parseIdList(f.value)).toEqual(ids);
    expect(f.tools).toEqual(["get_weather"]);
    expect(f.calls).toBeUndefined();
  });

  it("Responses, streamed: the same events, and the resp_ id in the log line (with the calls the request allows)", async () => {
    const ids = enc.encode(SPLICED);
    upstream.script({ tokens: ids, chunkSize: 1 });
    const stream = await client.responses.create({
      model: "openai/gpt-oss-20b",
      input: "Weather in Oslo?",
      tools: [
        { type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false },
      ],
      parallel_tool_calls: false,
      stream: true,
    });
    const got: Obj[] = [];
    for await (const ev of stream) got.push(ev as unknown as Obj);
    const id = String((got[0]!.response as Obj).id);
    expect(id).toMatch(/^resp_/);
    expect(normal(got, id, INSPECT_RESPONSE_ID)).toEqual(
      normal(inspected(ids, { calls: "one" }).responses, INSPECT_RESPONSE_ID, INSPECT_RESPONSE_ID),
    );
    const [line] = repairLines(id);
    expect(line).toMatchObject({ choice: 0, recoveries: { recipient_spliced: 1 } });
    const f = decodeFragment(String(line!.inspect).slice("/inspect".length))!;
    expect([parseIdList(f.value), f.calls]).toEqual([ids, "one"]);
  });

  it("an answer with nothing repaired logs nothing; one too long for a link says so", async () => {
    const clean = enc.encode('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>');
    upstream.script({ tokens: clean });
    const a = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], tools: TOOLS });
    expect(repairLines(a.id)).toEqual([]);
    const long = enc.encode(
      `<|channel|>analysis<|message|>${"think ".repeat(MAX_LINK_IDS)}<|end|><|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>`,
    );
    upstream.script({ tokens: long });
    const b = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
    const [line] = repairLines(b.id);
    expect(line).toMatchObject({ inspect: null, recoveries: { stray_stop: 1 } });
    expect(String(line!.inspect_omitted)).toContain(`more than the ${MAX_LINK_IDS} a link holds`);
  });
});
