/**
 * The simulator's `POST /v1/completions`, as vLLM answers it: the request
 * planned and refused as vLLM's validators do (src/simulate/vllm.ts), each
 * choice's sample run through the stop checks, then streamed one engine
 * step at a time (completion_stream_generator) or answered whole
 * (request_output_to_completion_response).
 */
import type http from "node:http";
import type { ToolSpec } from "../loadtest/arguments.js";
import type { Engine } from "./engine.js";
import { json, REQUEST_ID_HEADER, SSE_HEADERS } from "./http.js";
import type { Sample } from "./model.js";
import { declaredTools, decodeIds, lastMessage, requestKey } from "./prompt.js";
import { errorBody, finishReason, HttpFail, logprobsOf, plan, randomId, runChoice, textOf, usageOf, type Plan, type Run } from "./vllm.js";

type Obj = Record<string, unknown>;

export function completions(e: Engine, res: http.ServerResponse, body: Obj): void {
  const { o, metrics } = e;
  let pl: Plan;
  try {
    pl = plan(body, e.served, (t) => e.enc.encodeOrdinary(t));
  } catch (err) {
    if (err instanceof HttpFail) {
      metrics.requestsTotal.inc({ endpoint: "completions", status: String(err.status) });
      return json(res, err.status, errorBody(err));
    }
    throw err;
  }
  const id = `cmpl-${randomId()}`;
  const created = Math.floor(Date.now() / 1000);
  const stops = new Set(pl.eos === null ? pl.stopIds : [pl.eos, ...pl.stopIds]);
  // choice index = output.index + prompt_idx * n
  const runs: Run[] = [];
  const choicePrompt: number[] = [];
  const allGens: (Sample | null)[] = [];
  let key: string | null = null;
  let tools: ToolSpec[] | undefined;
  pl.prompts.forEach((ids, pi) => {
    const text = decodeIds(e.vocab, ids);
    const k = requestKey(lastMessage(text, "user"));
    const t = declaredTools(text);
    if (pi === 0) {
      key = k;
      tools = t;
    }
    const { sampled, gens } = e.samples(pl.n, t, pi === 0 ? k : k === null ? null : `${k}#${pi}`, stops);
    sampled.forEach((s, c) => {
      runs.push(runChoice(s, pl, ids.length, o.maxModelLen, pl.maxTokens[pi]!));
      choicePrompt.push(pi);
      allGens.push(gens[c]!);
    });
  });
  const promptLen = pl.prompts.reduce((a, p) => a + p.length, 0);
  metrics.promptTokens.inc(metrics.labels, promptLen);
  e.record(id, key, "completions", tools, allGens, runs);
  metrics.requestsTotal.inc({ endpoint: "completions", status: "200" });
  const states = e.states(runs, pl.interval);
  const headers = { [REQUEST_ID_HEADER]: id };
  const job = e.job(res, promptLen, states);
  const head = { id, object: "text_completion", created, model: o.servedModelName };
  if (pl.stream) {
    res.writeHead(200, { ...SSE_HEADERS, ...headers });
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    job.step = () => {
      for (const [i, st] of states.entries()) {
        const piece = st.emitter.step();
        if (!piece) continue;
        const promptIds = pl.prompts[choicePrompt[i]!]!;
        const end = piece.last ? st.run.end : null;
        const dropStop = !!end && end.kind === "finish" && end.stopToken && !pl.includeStop;
        const text = textOf(piece.ids, dropStop, pl.skipSpecial, e.bytesOf, st.decoder, piece.last);
        const first = !st.prompted;
        st.prompted = true;
        // "Chunked prefill case, don't return empty chunks"
        if (!text && piece.ids.length === 0 && st.sentIds === 0) continue;
        const choice: Obj = {
          index: i,
          text,
          logprobs: logprobsOf(piece.ids, pl, e.nameOf, st.sentText),
          finish_reason: end ? finishReason(end) : null,
          stop_reason: end && end.kind === "finish" ? end.stopReason : null,
          prompt_token_ids: first && pl.returnTokenIds ? promptIds : null,
          token_ids: pl.returnTokenIds ? piece.ids : null,
        };
        st.sentIds += piece.ids.length;
        st.sentText += text.length;
        const chunk: Obj = { ...head, choices: [choice] };
        if (pl.continuousUsage) chunk.usage = usageOf(promptIds.length, st.sentIds);
        send(chunk);
      }
      if (!states.every((s) => s.emitter.done)) return false;
      metrics.countFinish(runs);
      if (pl.includeUsage) {
        const completion = states.reduce((a, s) => a + s.sentIds, 0);
        send({ ...head, choices: [], usage: usageOf(promptLen, completion) });
      }
      res.end("data: [DONE]\n\n");
      return true;
    };
  } else {
    e.whole(job, states, runs, () => {
      const choices = states.map((st, i) => {
        const end = st.run.end;
        const dropStop = end.kind === "finish" && end.stopToken && !pl.includeStop;
        const c: Obj = {
          index: i,
          text: textOf(st.run.ids, dropStop, pl.skipSpecial, e.bytesOf, st.decoder, true),
          logprobs: logprobsOf(st.run.ids, pl, e.nameOf, 0),
          finish_reason: finishReason(end),
          stop_reason: end.kind === "finish" ? end.stopReason : null,
          token_ids: pl.returnTokenIds ? st.run.ids : null,
          prompt_logprobs: null,
          prompt_token_ids: pl.returnTokenIds ? pl.prompts[choicePrompt[i]!] : null,
        };
        return c;
      });
      const completion = runs.reduce((a, r) => a + r.ids.length, 0);
      json(
        res,
        200,
        {
          ...head,
          choices,
          service_tier: null,
          system_fingerprint: null,
          usage: { ...usageOf(promptLen, completion), prompt_tokens_details: null },
          kv_transfer_params: null,
        },
        headers,
      );
    });
  }
  e.loop.submit(job);
}
