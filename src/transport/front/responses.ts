/**
 * POST /v1/responses: read, the conversation (its previous response and
 * referenced items from the store, ./stored.ts), plan (src/openai/plan.ts),
 * render, generate (src/service/generate.ts), write (./responses-answer.ts).
 */
import type http from "node:http";
import type { JsonObject as Obj } from "../../core/json.js";
import { planResponses } from "../../openai/plan.js";
import { continuedInput, responsesToChat, responsesToolChoice, type PreviousResponse } from "../../openai/responses-input.js";
import { generate } from "../../service/generate.js";
import type { Service } from "../../service/service.js";
import { MAX_RESPONSE_ID } from "../../store/responses.js";
import type { Engine } from "../../upstream/engine.js";
import { forcedIds, readRequest, refuse, refusePlan, renderPrompt } from "./common.js";
import { ResponsesAnswer } from "./responses-answer.js";
import { lookup, referencedItems } from "./stored.js";

/** The response `previous_response_id` names (null: none); false when the refusal was answered. */
async function previousOf(svc: Service, tenant: string, request: Obj, res: http.ServerResponse): Promise<PreviousResponse | null | false> {
  const previousId = request.previous_response_id ?? null;
  if (previousId === null) return null;
  const param = "previous_response_id";
  if (typeof previousId !== "string" || previousId === "") {
    refuse(res, 400, "invalid_request_error", "bad_request", "previous_response_id must be a response id", param);
    return false;
  }
  if (!svc.responses.enabled) {
    const message = "this server does not store responses (--response-store-bytes 0): send the whole conversation as input";
    refuse(res, 400, "invalid_request_error", "bad_request", message, param);
    return false;
  }
  const found = await lookup(svc, tenant, previousId);
  if (found.ok) return found.record;
  if (found.reason === "unavailable")
    refuse(res, 503, "server_error", "store_unavailable", "the response store did not answer in time; try again", param);
  else {
    const message = `Previous response with id '${previousId.slice(0, MAX_RESPONSE_ID)}' not found.`;
    refuse(res, 404, "invalid_request_error", "previous_response_not_found", message, param);
  }
  return false;
}

export async function handleResponses(svc: Service, engine: Engine, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const request = await readRequest(svc, req, res);
  if (request === null) return;
  const tenant = svc.tenantOf(req.headers.authorization);
  const previous = await previousOf(svc, tenant, request, res);
  if (previous === false) return;
  const input = continuedInput(previous, request.input);
  if (!input.ok) return refuse(res, 400, "invalid_request_error", "bad_request", input.message, input.param);
  const items = await referencedItems(svc, tenant, input.items, previous);
  if (!items.ok)
    return items.code === "store_unavailable"
      ? refuse(res, 503, "server_error", "store_unavailable", items.message, items.param)
      : refuse(res, 404, "invalid_request_error", "item_not_found", items.message, items.param);
  const conv = responsesToChat({ ...request, input: items.items });
  if (!conv.ok)
    return refuse(res, conv.code === "item_not_found" ? 404 : 400, "invalid_request_error", conv.code, conv.message, conv.param);
  const plan = planResponses(request, conv.chat, responsesToolChoice(request.tool_choice));
  if (!plan.ok) return refusePlan(res, plan);
  const prompt = await renderPrompt(svc, tenant, res, conv.chat);
  if (prompt === null) return;
  const answer = new ResponsesAnswer(svc, res, plan, request, tenant, conv.routes, items.items);
  const open = { format: "openai.responses", model: plan.model, tools: plan.tools, calls: plan.calls } as const;
  const gen = generate(svc, engine, { ...plan.engine, prompt, n: 1 }, open, tenant, answer, forcedIds(svc, plan.force));
  res.on("close", () => {
    if (!res.writableFinished) gen.abort();
  });
  await answer.finish(await gen.done);
}
