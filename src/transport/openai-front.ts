/**
 * The OpenAI-compatible front of sidecar mode: clients talk Chat Completions
 * or Responses to us; we render their request into Harmony prompt ids (with
 * chain-of-thought restoration), drive the upstream engine by token ids, and
 * parse its output with the resilient parser on the worker pool. Malformed
 * model output is repaired, never an HTTP 500; upstream failures become
 * well-formed OpenAI-style errors or a clean end of stream.
 *
 * Each endpoint's handler is in ./front/: read, plan (src/openai/plan.ts),
 * render, generate (src/service/generate.ts), write.
 */
import type http from "node:http";
import type { Service } from "../service/service.js";
import type { Engine, UpstreamConfig, UpstreamError } from "../upstream/engine.js";
import { handleChat } from "./front/chat.js";
import { refuse } from "./front/common.js";
import { handleResponses } from "./front/responses.js";
import { deleteResponse, getResponse, listInputItems } from "./front/stored.js";

/** One of the front's paths, the methods it takes, and the response id it names. */
export interface FrontRoute {
  kind: "chat" | "responses" | "models" | "response" | "input_items";
  methods: readonly string[];
  /** `response` and `input_items`: the id in the path. */
  id: string;
}

const RESPONSE_PATH = /^\/v1\/responses\/([^/]+)(\/input_items)?$/;

/** The front's route for `path` (Chat Completions, Responses and stored responses, the engine's model list), or null. */
export function frontRoute(path: string): FrontRoute | null {
  if (path === "/v1/chat/completions") return { kind: "chat", methods: ["POST"], id: "" };
  if (path === "/v1/responses") return { kind: "responses", methods: ["POST"], id: "" };
  if (path === "/v1/models") return { kind: "models", methods: ["GET"], id: "" };
  const m = RESPONSE_PATH.exec(path);
  if (m === null) return null;
  let id = m[1]!;
  try {
    id = decodeURIComponent(id);
  } catch {
    // not percent-encoded UTF-8: looked up as it is (and not found)
  }
  return m[2] ? { kind: "input_items", methods: ["GET"], id } : { kind: "response", methods: ["GET", "DELETE"], id };
}

/** Sidecar mode's OpenAI-compatible endpoints, over one engine. */
export class OpenAIFront {
  constructor(
    private readonly svc: Service,
    readonly engine: Engine,
    readonly cfg: UpstreamConfig,
  ) {}

  /** The configured upstream URL. */
  get url(): string {
    return this.cfg.url;
  }

  /** How long the upstream may stay silent. */
  get timeoutMs(): number {
    return this.cfg.idleTimeoutMs;
  }

  /** Answer a request for a {@link frontRoute} (method checked by the caller). */
  handle(route: FrontRoute, url: URL, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    switch (route.kind) {
      case "models":
        return handleModels(this.engine, res);
      case "chat":
        return handleChat(this.svc, this.engine, this.cfg, req, res);
      case "responses":
        return handleResponses(this.svc, this.engine, req, res);
      case "response":
        return req.method === "DELETE" ? deleteResponse(this.svc, route.id, req, res) : getResponse(this.svc, route.id, url, req, res);
      case "input_items":
        return listInputItems(this.svc, route.id, url, req, res);
    }
  }
}

async function handleModels(engine: Engine, res: http.ServerResponse): Promise<void> {
  try {
    const r = await engine.models();
    res.writeHead(r.status, { "content-type": "application/json", "content-length": Buffer.byteLength(r.body) });
    res.end(r.body);
  } catch (e) {
    const err = e as UpstreamError;
    refuse(res, err.status ?? 502, "upstream_error", err.code ?? "upstream_unreachable", err.message);
  }
}
