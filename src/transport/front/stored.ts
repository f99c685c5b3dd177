/**
 * The stored responses: GET and DELETE /v1/responses/{id}, its input items,
 * and the store reads of a new response's conversation (its previous
 * response, the items it references).
 */
import type http from "node:http";
import { findItem, itemReferences, responseIdOfItem, type PreviousResponse } from "../../openai/responses-input.js";
import type { Service } from "../../service/service.js";
import { MAX_RESPONSE_ID, type Lookup } from "../../store/responses.js";
import { sendJson } from "../respond.js";
import { refuse } from "./common.js";

/**
 * `items` with each `item_reference` replaced by the item it names, read
 * from the response store within the tenant: the response an id of the
 * sidecar's names (`rs_<base>_0` → `resp_<base>`), else the previous
 * response's items. One read per response.
 */
export async function referencedItems(
  svc: Service,
  tenant: string,
  items: unknown[],
  previous: PreviousResponse | null,
): Promise<{ ok: true; items: unknown[] } | { ok: false; code: "item_not_found" | "store_unavailable"; message: string; param: string }> {
  const refs = itemReferences(items);
  if (refs.length === 0) return { ok: true, items };
  const records = new Map<string, PreviousResponse | null>();
  const out = [...items];
  for (const { index, id } of refs) {
    const param = `input[${index}].id`;
    const notFound = { ok: false as const, code: "item_not_found" as const, message: "", param };
    if (typeof id !== "string" || id === "" || id.length > MAX_RESPONSE_ID)
      return { ...notFound, message: "an item_reference needs the id of a stored item" };
    let found = previous ? findItem(previous, id) : null;
    const responseId = found === null ? responseIdOfItem(id) : null;
    if (found === null && responseId !== null && svc.responses.enabled) {
      if (!records.has(responseId)) {
        const got = await lookup(svc, tenant, responseId);
        if (!got.ok && got.reason === "unavailable")
          return { ok: false, code: "store_unavailable", message: "the response store did not answer in time; try again", param };
        records.set(responseId, got.ok ? got.record : null);
      }
      const record = records.get(responseId);
      found = record ? findItem(record, id) : null;
    }
    if (found === null || found.type === "item_reference")
      return {
        ...notFound,
        message: svc.responses.enabled
          ? `Item with id '${id}' not found.`
          : `Item with id '${id}' not found: this server does not store responses (--response-store-bytes 0)`,
      };
    out[index] = found;
  }
  return { ok: true, items: out };
}

/** The response stored under `id` for `tenant`, the outcome counted. */
export async function lookup(svc: Service, tenant: string, id: string): Promise<Lookup> {
  const found = await svc.responses.get(tenant, id);
  svc.metrics.responses.inc({ op: "get", outcome: found.ok ? "found" : found.reason });
  return found;
}

function notFound(res: http.ServerResponse, id: string): void {
  // vLLM's words and status (vllm/entrypoints/openai/serving_responses.py, _make_not_found_error)
  refuse(
    res,
    404,
    "invalid_request_error",
    "response_not_found",
    `Response with id '${id.slice(0, MAX_RESPONSE_ID)}' not found.`,
    "response_id",
  );
}

function storeUnavailable(res: http.ServerResponse): void {
  refuse(res, 503, "server_error", "store_unavailable", "the response store did not answer in time; try again");
}

/** GET /v1/responses/{id}: the stored response (this tenant's only). */
export async function getResponse(svc: Service, id: string, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (url.searchParams.get("stream") === "true")
    return refuse(
      res,
      400,
      "invalid_request_error",
      "bad_request",
      "a stored response is not streamed again: GET it without stream",
      "stream",
    );
  const found = await lookup(svc, svc.tenantOf(req.headers.authorization), id);
  if (found.ok) return sendJson(res, 200, found.record.response);
  if (found.reason === "unavailable") return storeUnavailable(res);
  notFound(res, id);
}

/** DELETE /v1/responses/{id}. */
export async function deleteResponse(svc: Service, id: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const deleted = await svc.responses.delete(svc.tenantOf(req.headers.authorization), id);
  svc.metrics.responses.inc({ op: "delete", outcome: deleted === "unavailable" ? "unavailable" : deleted ? "deleted" : "not_found" });
  if (deleted === "unavailable") return storeUnavailable(res);
  if (!deleted) return notFound(res, id);
  sendJson(res, 200, { id, object: "response", deleted: true });
}

/** GET /v1/responses/{id}/input_items: a page of the stored input items (`limit` 1–100, default 20; `order` desc by default; `after` an item id). */
export async function listInputItems(
  svc: Service,
  id: string,
  url: URL,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const q = url.searchParams;
  const limit = q.has("limit") ? Number(q.get("limit")) : 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    return refuse(res, 400, "invalid_request_error", "bad_request", "limit must be an integer from 1 to 100", "limit");
  const order = q.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc")
    return refuse(res, 400, "invalid_request_error", "bad_request", "order must be asc or desc", "order");
  const found = await lookup(svc, svc.tenantOf(req.headers.authorization), id);
  if (!found.ok) return found.reason === "unavailable" ? storeUnavailable(res) : notFound(res, id);
  const items = order === "asc" ? found.record.input : [...found.record.input].reverse();
  const after = q.get("after");
  let start = 0;
  if (after !== null) {
    const at = items.findIndex((item) => item.id === after);
    if (at === -1) return refuse(res, 400, "invalid_request_error", "bad_request", "after names no input item of this response", "after");
    start = at + 1;
  }
  const data = items.slice(start, start + limit);
  sendJson(res, 200, {
    object: "list",
    data,
    first_id: data.length > 0 ? data[0]!.id : null,
    last_id: data.length > 0 ? data[data.length - 1]!.id : null,
    has_more: start + limit < items.length,
  });
}
