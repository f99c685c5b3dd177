/**
 * The simulator's `/v1/chat/completions` and `/v1/responses` (`chat: "raw"`):
 * the same generations as `/v1/completions`, answered as plain text with
 * the control tokens in it, and no parsed calls: what a client gets from a
 * server that passes gpt-oss output through without a Harmony parser. It is
 * not vLLM's own Chat or Responses handling of gpt-oss.
 */
import type http from "node:http";
import { isObj } from "../core/json.js";
import { shapeOfSchema, type ToolSpec } from "../loadtest/arguments.js";
import type { Engine } from "./engine.js";
import { json, REQUEST_ID_HEADER, SSE_HEADERS } from "./http.js";
import { requestKey } from "./prompt.js";
import {
  errorBody,
  finishReason,
  GENERATION_CONFIG_EOS,
  HttpFail,
  randomId,
  runChoice,
  textOf,
  TOKENIZER_EOS,
  usageOf,
  type Plan,
  type Run,
} from "./vllm.js";

type Obj = Record<string, unknown>;

export function chat(e: Engine, res: http.ServerResponse, body: Obj, endpoint: "chat" | "responses"): void {
  const { o, metrics } = e;
  const fail = (status: number, message: string, param: string | null = null) => {
    metrics.requestsTotal.inc({ endpoint, status: String(status) });
    json(res, status, errorBody(new HttpFail(status, message, status === 404 ? "NotFoundError" : "BadRequestError", param)));
  };
  if (typeof body.model === "string" && body.model !== o.servedModelName) return fail(404, `The model \`${body.model}\` does not exist.`);
  const read = conversation(body, endpoint);
  if (typeof read === "string") return fail(400, read);
  const n = endpoint === "chat" && typeof body.n === "number" ? body.n : 1;
  if (!Number.isInteger(n) || n < 1 || n > 128) return fail(400, `n must be an integer from 1 to 128, got ${String(body.n)}.`, "n");
  const promptLen = e.enc.encodeOrdinary(read.text).length;
  const asked = endpoint === "chat" ? (body.max_completion_tokens ?? body.max_tokens) : body.max_output_tokens;
  if (asked !== undefined && asked !== null && (typeof asked !== "number" || !Number.isInteger(asked) || asked < 1))
    return fail(400, "max_tokens must be a positive integer", "max_tokens");
  const room = o.maxModelLen - promptLen;
  const maxTokens = typeof asked === "number" ? asked : room;
  if (maxTokens > room || room < 1)
    return fail(
      400,
      `This model's maximum context length is ${o.maxModelLen} tokens; the prompt has ${promptLen} and ${maxTokens} more were asked for.`,
    );
  const stream = body.stream === true;
  const skipSpecial = body.skip_special_tokens === true;
  // the chat template's stop: the generation config's EOS ids
  const pl: Plan = {
    prompts: [[]],
    n,
    stream,
    maxTokens: [maxTokens],
    minTokens: 0,
    eos: TOKENIZER_EOS,
    stopIds: GENERATION_CONFIG_EOS.filter((x) => x !== TOKENIZER_EOS),
    includeStop: false,
    skipSpecial,
    returnTokenIds: false,
    logprobs: null,
    asTokenIds: false,
    includeUsage: false,
    continuousUsage: false,
    interval: o.streamInterval,
    repetition: null,
    ignoreEos: false,
  };
  const stops = new Set([TOKENIZER_EOS, ...pl.stopIds]);
  const { sampled, gens } = e.samples(n, read.tools, read.key, stops);
  const runs = sampled.map((s) => runChoice(s, pl, promptLen, o.maxModelLen, maxTokens));
  const id = endpoint === "chat" ? `chatcmpl-${randomId()}` : `resp_${randomId()}`;
  e.record(id, read.key, endpoint, read.tools, gens, runs);
  metrics.promptTokens.inc(metrics.labels, promptLen);
  metrics.requestsTotal.inc({ endpoint, status: "200" });
  const created = Math.floor(Date.now() / 1000);
  const states = e.states(runs, pl.interval);
  const texts = states.map(() => "");
  const headers = { [REQUEST_ID_HEADER]: id };
  const job = e.job(res, promptLen, states);
  const completionTokens = () => runs.reduce((a, r) => a + r.ids.length, 0);
  const chatFinish = (run: Run) => finishReason(run.end);
  let seq = 0;
  const event = (type: string, fields: Obj) => {
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
  };
  const msgId = `msg_${id.slice(5)}`;
  const response = (status: string, text: string | null): Obj => {
    const run = runs[0]!;
    const incomplete = status === "incomplete";
    return {
      id,
      object: "response",
      created_at: created,
      model: o.servedModelName,
      status,
      error: null,
      incomplete_details: incomplete ? { reason: run.end.kind === "abort" ? "abort" : "max_output_tokens" } : null,
      output:
        text === null
          ? []
          : [
              {
                type: "message",
                id: msgId,
                status: incomplete ? "incomplete" : "completed",
                role: "assistant",
                content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
              },
            ],
      parallel_tool_calls: true,
      tool_choice: body.tool_choice ?? "auto",
      tools: Array.isArray(body.tools) ? body.tools : [],
      usage:
        text === null
          ? null
          : {
              input_tokens: promptLen,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: completionTokens(),
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: promptLen + completionTokens(),
            },
    };
  };
  const responseStatus = () => (runs[0]!.end.kind === "finish" && runs[0]!.end.reason === "stop" ? "completed" : "incomplete");
  if (stream) {
    res.writeHead(200, { ...SSE_HEADERS, ...headers });
    if (endpoint === "chat") {
      const chunk = (choices: Obj[], usage?: Obj) =>
        res.write(
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: o.servedModelName, choices, ...(usage ? { usage } : {}) })}\n\n`,
        );
      chunk(states.map((_, i) => ({ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null })));
      job.step = () => {
        for (const [i, st] of states.entries()) {
          const piece = st.emitter.step();
          if (!piece) continue;
          const end = piece.last ? st.run.end : null;
          const dropStop = !!end && end.kind === "finish" && end.stopToken;
          const text = textOf(piece.ids, dropStop, skipSpecial, e.bytesOf, st.decoder, piece.last);
          if (text) chunk([{ index: i, delta: { content: text }, logprobs: null, finish_reason: null }]);
          if (end) chunk([{ index: i, delta: {}, logprobs: null, finish_reason: chatFinish(st.run) }]);
        }
        if (!states.every((s) => s.emitter.done)) return false;
        metrics.countFinish(runs);
        const so = body.stream_options;
        if (isObj(so) && so.include_usage === true) chunk([], usageOf(promptLen, completionTokens()));
        res.end("data: [DONE]\n\n");
        return true;
      };
    } else {
      event("response.created", { response: response("in_progress", null) });
      event("response.in_progress", { response: response("in_progress", null) });
      let opened = false;
      job.step = () => {
        const st = states[0]!;
        const piece = st.emitter.step();
        if (piece) {
          const end = piece.last ? st.run.end : null;
          const dropStop = !!end && end.kind === "finish" && end.stopToken;
          const text = textOf(piece.ids, dropStop, skipSpecial, e.bytesOf, st.decoder, piece.last);
          if (!opened && (text || end)) {
            opened = true;
            event("response.output_item.added", {
              output_index: 0,
              item: { type: "message", id: msgId, status: "in_progress", role: "assistant", content: [] },
            });
            event("response.content_part.added", {
              item_id: msgId,
              output_index: 0,
              content_index: 0,
              part: { type: "output_text", text: "", annotations: [], logprobs: [] },
            });
          }
          if (text) {
            texts[0] += text;
            event("response.output_text.delta", { item_id: msgId, output_index: 0, content_index: 0, delta: text, logprobs: [] });
          }
        }
        if (!st.emitter.done) return false;
        metrics.countFinish(runs);
        const final = response(responseStatus(), texts[0]!);
        const item = (final.output as Obj[])[0]!;
        event("response.output_text.done", { item_id: msgId, output_index: 0, content_index: 0, text: texts[0], logprobs: [] });
        event("response.content_part.done", {
          item_id: msgId,
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: texts[0], annotations: [], logprobs: [] },
        });
        event("response.output_item.done", { output_index: 0, item });
        event(final.status === "completed" ? "response.completed" : "response.incomplete", { response: final });
        res.end();
        return true;
      };
    }
  } else {
    e.whole(job, states, runs, () => {
      const textsOf = states.map((st) => {
        const end = st.run.end;
        return textOf(st.run.ids, end.kind === "finish" && end.stopToken, skipSpecial, e.bytesOf, st.decoder, true);
      });
      if (endpoint === "chat")
        json(
          res,
          200,
          {
            id,
            object: "chat.completion",
            created,
            model: o.servedModelName,
            choices: states.map((st, i) => ({
              index: i,
              message: { role: "assistant", content: textsOf[i], refusal: null, tool_calls: [] },
              logprobs: null,
              finish_reason: chatFinish(st.run),
              stop_reason: st.run.end.kind === "finish" ? st.run.end.stopReason : null,
            })),
            usage: usageOf(promptLen, completionTokens()),
          },
          headers,
        );
      else json(res, 200, response(responseStatus(), textsOf[0]!), headers);
    });
  }
  e.loop.submit(job);
}

/** A Chat or Responses request's text (for usage), declared function tools and load-test key; or why it cannot be read. */
function conversation(
  body: Obj,
  endpoint: "chat" | "responses",
): { text: string; tools: ToolSpec[] | undefined; key: string | null } | string {
  const textOf = (content: unknown): string => {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return "";
    return content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("");
  };
  let items: unknown[];
  if (endpoint === "chat") {
    if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages must be a non-empty list";
    items = body.messages;
  } else if (typeof body.input === "string") items = [{ role: "user", content: body.input }];
  else if (Array.isArray(body.input)) items = body.input;
  else return "input must be a string or a list of items";
  let text = typeof body.instructions === "string" ? body.instructions : "";
  let lastUser: string | null = null;
  for (const m of items) {
    if (!isObj(m)) continue;
    const t = textOf(m.content);
    text += t;
    if (m.role === "user") lastUser = t;
  }
  let tools: ToolSpec[] | undefined;
  if (Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== "none") {
    tools = [];
    for (const t of body.tools.slice(0, 128)) {
      if (!isObj(t) || t.type !== "function") continue;
      const f = endpoint === "chat" ? t.function : t;
      if (!isObj(f) || typeof f.name !== "string") continue;
      tools.push({ name: f.name, params: f.parameters === undefined || f.parameters === null ? null : shapeOfSchema(f.parameters) });
    }
    if (tools.length === 0) tools = undefined;
  }
  return { text, tools, key: requestKey(lastUser) };
}
