/**
 * POST /v1/chat/completions: read, plan (src/openai/plan.ts), render,
 * generate (src/service/generate.ts), write (./chat-answer.ts).
 */
import type http from "node:http";
import { planChat, type ChatPlan } from "../../openai/plan.js";
import type { DoorOpen } from "../../service/door.js";
import { generate } from "../../service/generate.js";
import type { Service } from "../../service/service.js";
import type { Engine, UpstreamConfig } from "../../upstream/engine.js";
import { ChatAnswer } from "./chat-answer.js";
import { forcedIds, readRequest, refusePlan, renderPrompt } from "./common.js";

export async function handleChat(
  svc: Service,
  engine: Engine,
  cfg: UpstreamConfig,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const request = await readRequest(svc, req, res);
  if (request === null) return;
  const plan = planChat(request, cfg.reasoningField);
  if (!plan.ok) return refusePlan(res, plan);
  const tenant = svc.tenantOf(req.headers.authorization);
  const prompt = await renderPrompt(svc, tenant, res, request);
  if (prompt === null) return;
  const answer = new ChatAnswer(svc, res, plan);
  const gen = generate(svc, engine, { ...plan.engine, prompt, n: plan.n }, chatOpen(plan), tenant, answer, forcedIds(svc, plan.force));
  answer.endChoice = gen.endChoice;
  res.on("close", () => {
    if (!res.writableFinished) gen.abort(); // the client went away: stop the upstream, free the sessions
  });
  await answer.finish(await gen.done);
}

/** How a Chat answer's parser streams are opened: its chunks' model and reasoning field, the tools and calls the plan allows. */
export function chatOpen(plan: ChatPlan): DoorOpen {
  return { format: "openai.chat", model: plan.model, reasoningField: plan.reasoningField, tools: plan.tools, calls: plan.calls };
}
