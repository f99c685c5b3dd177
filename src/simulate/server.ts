/**
 * `harmony-sidecar simulate-engine`: a vLLM-compatible gpt-oss engine
 * without a GPU. It serves vLLM's `POST /v1/completions` (prompt as token
 * ids, `return_token_ids`, streamed and not), `GET /v1/models`, `/health`,
 * `/ping`, `/version`, `/metrics` (`vllm:*` series), `/tokenize` and
 * `/detokenize`, with vLLM's contract (src/simulate/vllm.ts). What the
 * "model" writes comes from the load tester's generator, with faults at a
 * chosen rate (src/simulate/model.ts); what was injected into each request
 * is kept and served at `GET /simulate/requests` (by `id`, `key` or `run`).
 *
 * Generation is paced like an engine's: one step loop for every running
 * sequence (continuous batching, at most `maxNumSeqs` at once, the rest
 * waiting), each step `stepTokens` ids per sequence (the first, prefill,
 * one), `tokensPerSecond` per sequence (0: as fast as the loop turns).
 *
 * `/v1/chat/completions` and `/v1/responses` (`chat: "raw"`) answer with
 * the same generations as plain text, control tokens included: what a
 * client gets from a server that passes gpt-oss output through without a
 * Harmony parser. It is not vLLM's own Chat or Responses handling of
 * gpt-oss (docs/loadtest.md says what is and is not modelled).
 *
 * This file routes; the parts are by role: options.ts (flags and their
 * defaults), engine.ts (what the endpoints share: samples, records, jobs),
 * steps.ts (the step loop), metrics.ts (`/metrics`), completions.ts and
 * chat.ts (the generating endpoints), http.ts (bodies and answers).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { isObj } from "../core/json.js";
import type { Vocabulary } from "../core/vocab.js";
import type { Encoder } from "../loadtest/generate.js";
import { chat } from "./chat.js";
import { completions } from "./completions.js";
import { Engine } from "./engine.js";
import { json, readBody } from "./http.js";
import { SIMULATOR_DEFAULTS, type Script, type SimulatorOptions } from "./options.js";
import { decodeIds } from "./prompt.js";
import type { Records } from "./records.js";
import { errorBody, HttpFail, isIntList, modelList, VLLM_ROUTES } from "./vllm.js";

export { SIMULATOR_DEFAULTS, type Script, type SimulatorOptions } from "./options.js";

type Obj = Record<string, unknown>;

export interface Simulator {
  url: string;
  port: number;
  records: Records;
  /** Scripts are taken in order, one per generating request (the last repeats); none given: the generator. */
  script(...s: Script[]): void;
  close(): Promise<void>;
}

export async function startSimulator(options: Partial<SimulatorOptions>, enc: Encoder, vocab: Vocabulary): Promise<Simulator> {
  const o: SimulatorOptions = { ...SIMULATOR_DEFAULTS, ...options };
  const e = new Engine(o, enc, vocab);
  const started = Math.floor(Date.now() / 1000);

  const ROUTES: Record<string, readonly string[]> = {
    ...VLLM_ROUTES,
    "/simulate/requests": ["GET"],
    ...(o.chat === "raw" ? { "/v1/chat/completions": ["POST"], "/v1/responses": ["POST"] } : {}),
  };

  const server = http.createServer((req, res) => {
    route(req, res).catch((err: Error) => {
      if (!res.headersSent) json(res, 500, { error: { message: err.message, type: "InternalServerError", param: null, code: 500 } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const allowed = ROUTES[path];
    if (!allowed) {
      req.resume();
      return json(res, 404, { detail: "Not Found" });
    }
    if (!allowed.includes(method === "HEAD" ? "GET" : method)) {
      req.resume();
      return json(res, 405, { detail: "Method Not Allowed" });
    }
    switch (path) {
      case "/health":
      case "/ping":
        req.resume();
        res.writeHead(200, { "content-length": 0 });
        res.end();
        return;
      case "/version":
        return json(res, 200, { version: "0.0.0-harmony-sidecar-simulator" });
      case "/metrics": {
        const text = await e.metrics.registry.metrics();
        res.writeHead(200, { "content-type": e.metrics.registry.contentType });
        res.end(text);
        return;
      }
      case "/v1/models":
        return json(res, 200, modelList(o.servedModelName, o.servedModelName, o.maxModelLen, started));
      case "/simulate/requests":
        return lookup(res, url);
    }
    // validate_json_request (api_utils.py)
    const ctype = String(req.headers["content-type"] ?? "")
      .split(";")[0]!
      .trim()
      .toLowerCase();
    if (ctype !== "application/json") {
      req.resume();
      return json(res, 400, errorBody(new HttpFail(400, "Unsupported Media Type: Only 'application/json' is allowed")));
    }
    const body = await readBody(req, o.maxBodyBytes);
    if (!body.ok) return json(res, body.status, errorBody(new HttpFail(body.status, body.message)));
    if (!isObj(body.value)) return json(res, 400, errorBody(new HttpFail(400, "the request body must be a JSON object")));
    const b = body.value;
    switch (path) {
      case "/tokenize":
        return tokenize(res, b);
      case "/detokenize":
        if (!isIntList(b.tokens)) return json(res, 400, errorBody(new HttpFail(400, "tokens must be a list of token ids")));
        return json(res, 200, { prompt: decodeIds(e.vocab, b.tokens) });
      case "/v1/completions":
        return completions(e, res, b);
      case "/v1/chat/completions":
        return chat(e, res, b, "chat");
      case "/v1/responses":
        return chat(e, res, b, "responses");
    }
  }

  function tokenize(res: http.ServerResponse, b: Obj): void {
    let text: string;
    if (typeof b.prompt === "string") text = b.prompt;
    else if (Array.isArray(b.messages)) text = b.messages.map((m) => (isObj(m) && typeof m.content === "string" ? m.content : "")).join("");
    else return json(res, 400, errorBody(new HttpFail(400, "prompt or messages must be provided")));
    const tokens = e.enc.encodeOrdinary(text);
    json(res, 200, {
      count: tokens.length,
      max_model_len: o.maxModelLen,
      tokens,
      token_strs: b.return_token_strs === true ? tokens.map(e.nameOf) : null,
    });
  }

  function lookup(res: http.ServerResponse, url: URL): void {
    const id = url.searchParams.get("id");
    const key = url.searchParams.get("key");
    const run = url.searchParams.get("run");
    if (id !== null || key !== null) {
      const r = id !== null ? e.records.get(id) : e.records.byRequestKey(key!);
      return r ? json(res, 200, r) : json(res, 404, { detail: "no record of that request (never seen, or no longer kept)" });
    }
    if (run !== null) return json(res, 200, { object: "list", run, data: e.records.run(run) });
    json(res, 400, { detail: "give id, key or run" });
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = o.host.includes(":") ? `[${o.host}]` : o.host;
  return {
    url: `http://${hostForUrl}:${port}`,
    port,
    records: e.records,
    script: (...s) => {
      e.scripts = s;
    },
    close: () =>
      new Promise((resolve) => {
        e.loop.stop();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
