/**
 * What the front's handlers share: reading the request body, refusing in
 * OpenAI's shape, rendering a plan's conversation, the forced call as ids,
 * the streamed answer's flow control, and the structured answer's check.
 */
import type http from "node:http";
import type { ErrorCode } from "../../core/errors.js";
import { isObj, type JsonObject as Obj } from "../../core/json.js";
import type { PlanError } from "../../openai/plan.js";
import type { AnswerFormat, HarmonyPiece } from "../../openai/request.js";
import type { ForcedCall } from "../../service/generate.js";
import type { Service } from "../../service/service.js";
import { ClientFlow } from "../client-flow.js";
import { readJson, sendOpenAIError, type OpenAIErrorType } from "../respond.js";

/** An error answer of the front's, its type named (nothing once the answer has started). */
export function refuse(
  res: http.ServerResponse,
  status: number,
  type: OpenAIErrorType,
  code: ErrorCode,
  message: string,
  param: string | null = null,
): void {
  sendOpenAIError(res, status, code, message, { type, param });
}

/** A plan's refusal answered. */
export function refusePlan(res: http.ServerResponse, e: PlanError): void {
  refuse(res, e.status, "invalid_request_error", e.code, e.message, e.param);
}

/** The request's body as a JSON object; null when the refusal was answered. */
export async function readRequest(svc: Service, req: http.IncomingMessage, res: http.ServerResponse): Promise<Obj | null> {
  const read = await readJson(req, svc.limits.maxFrameBytes);
  if (!read.ok) {
    refuse(res, read.status, "invalid_request_error", read.code, read.message);
    return null;
  }
  if (!isObj(read.value)) {
    refuse(res, 400, "invalid_request_error", "bad_request", "the request must be a JSON object");
    return null;
  }
  return read.value;
}

/** A render refused for its content is the client's 400; one stopped at its deadline is a 503. */
function renderStatus(code: string): number {
  return code === "render_timeout" ? 503 : 400;
}

/** `chat` (the request as a chat request) rendered for the client's tenant into prompt ids; null when the refusal was answered. */
export async function renderPrompt(svc: Service, tenant: string, res: http.ServerResponse, chat: unknown): Promise<number[] | null> {
  const rendered = await svc.render(chat, tenant);
  if (!rendered.ok) {
    const e = rendered.error;
    refuse(res, renderStatus(e.code), "invalid_request_error", e.code, e.message, e.path || null);
    return null;
  }
  return rendered.ids;
}

/** A plan's forced call as token ids (generate's two steps), or null. */
export function forcedIds(svc: Service, force: { prefix: HarmonyPiece[]; header: HarmonyPiece[] } | null): ForcedCall | null {
  if (force === null) return null;
  const enc = svc.encoding;
  const ids = (parts: HarmonyPiece[]) =>
    parts.flatMap((p) => ("special" in p ? [enc.preset.specials[p.special]!] : enc.encodeOrdinary(p.text)));
  return { prefix: ids(force.prefix), header: ids(force.header) };
}

/** OpenAI's error type for an upstream failure: the client's mistake (4xx) or the engine's. */
export function errorType(status: number): OpenAIErrorType {
  return status < 500 ? "invalid_request_error" : "upstream_error";
}

/** A streamed answer's flow control (../client-flow.ts): its client dropped, counted and logged, once unread for the bound. */
export function clientFlow(svc: Service, res: http.ServerResponse): ClientFlow {
  const ms = svc.limits.slowClientTimeoutMs;
  return new ClientFlow(res, ms, () => {
    svc.metrics.slowClients.inc({ transport: "http" });
    svc.logger.info({ slow_client_timeout_ms: ms }, "a client left its streamed answer unread; dropping it");
  });
}

export function setupSse(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
}

/** A structured answer that is not what `response_format` asked for (the answer itself is delivered as generated). */
interface SchemaMismatch {
  kind: "schema_mismatch";
  /** The choice (Chat; 0 for Responses). */
  choice: number;
  detail: string;
}

/** A structured answer whose check did not finish within its deadline (or could not run): delivered, and said to be unchecked. */
interface Unchecked {
  choice: number;
  reason: string;
}

/** What the answer's `harmony` says of its checks: the mismatches and the answers left unchecked; null when neither. */
export type CheckNote = { recoveries?: SchemaMismatch[]; unchecked?: Unchecked[] } | null;

/**
 * Check each answer (by choice; null: none to check, e.g. a tool call)
 * against the requested format, on the answer-check thread; what does not
 * match, or could not be checked in time, is counted, logged and returned,
 * to be said in the answer's `harmony`.
 */
export async function checkAnswers(svc: Service, format: AnswerFormat, answers: (string | null)[], response: string): Promise<CheckNote> {
  const checks = await Promise.all(answers.map((text) => (text === null ? Promise.resolve(null) : svc.checkAnswer(format.schema, text))));
  const out: SchemaMismatch[] = [];
  const unchecked: Unchecked[] = [];
  checks.forEach((c, choice) => {
    if (c === null) return;
    if ("unchecked" in c) {
      unchecked.push({ choice, reason: c.unchecked });
      svc.metrics.answerChecks.inc({ outcome: "unchecked" });
      svc.logger.warn({ response, format: format.name, choice, reason: c.unchecked }, "a structured answer could not be checked in time");
    } else {
      svc.metrics.answerChecks.inc({ outcome: c.ok ? "ok" : "mismatch" });
      if (!c.ok) out.push({ kind: "schema_mismatch", choice, detail: c.reason });
    }
  });
  if (out.length > 0) {
    svc.metrics.recoveries.inc({ kind: "schema_mismatch" }, out.length);
    for (const m of out)
      svc.logger.warn({ response, format: format.name, choice: m.choice, detail: m.detail }, "recovered malformed model output");
  }
  if (out.length === 0 && unchecked.length === 0) return null;
  return { ...(out.length > 0 ? { recoveries: out } : {}), ...(unchecked.length > 0 ? { unchecked } : {}) };
}

/** The answer's `harmony`: its recoveries (calls dropped where none were allowed, schema mismatches) and the answers left unchecked; null when there are none. */
export function harmonyOf(dropped: readonly unknown[], note: CheckNote): Obj | null {
  const recoveries = [...dropped, ...(note?.recoveries ?? [])];
  const unchecked = note?.unchecked ?? [];
  if (recoveries.length === 0 && unchecked.length === 0) return null;
  return { ...(recoveries.length > 0 ? { recoveries } : {}), ...(unchecked.length > 0 ? { unchecked } : {}) };
}
