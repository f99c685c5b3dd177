/**
 * A stand-in for vLLM's OpenAI-compatible server, for tests without a GPU.
 * It speaks `POST /v1/completions` with `stream: true` and
 * `return_token_ids: true` the way vLLM does — SSE chunks of 1–4 generated
 * token ids, a final chunk with `finish_reason`, a usage chunk, `[DONE]` —
 * and `GET /v1/models`. What it "generates" is scripted per request, and
 * faults (errors, hangs, broken streams) can be scripted too.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Script {
  /** Completion token ids for choice i (the same for every choice if one list). */
  tokens: number[] | number[][];
  finish?: "stop" | "length";
  /** Answer with this HTTP status and body instead of streaming. */
  status?: number;
  errorBody?: string;
  /** Stop sending (without [DONE]) after this many chunks and close the socket. */
  breakAfterChunks?: number;
  /** Send nothing at all (the sidecar must time out). */
  hang?: boolean;
  /** Delay between chunks. */
  delayMs?: number;
  /** Ids per chunk (default: 1–4, varied); 1 is vLLM's default, --stream-interval 1. */
  chunkSize?: number;
  /**
   * Wait for 'drain' whenever a write says the socket's buffer is full, as
   * vLLM's server does (uvicorn's HTTP protocols await FlowControl.drain() in
   * send(): encode/uvicorn, uvicorn/protocols/http/flow_control.py), so that
   * a reader that stops holds the stream back.
   */
  drain?: boolean;
}

export interface Received {
  body: Record<string, unknown>;
  /** Whether the client went away before the response ended. */
  aborted: boolean;
  /** Completion tokens written to the socket so far. */
  sentTokens: number;
  /** Whether the stream is waiting for the reader to drain it (scripts with `drain`). */
  waiting: boolean;
}

export interface StandIn {
  url: string;
  received: Received[];
  /** Scripts are taken in order; the last one repeats. */
  script(...s: Script[]): void;
  close(): Promise<void>;
}

export async function startStandIn(): Promise<StandIn> {
  let scripts: Script[] = [{ tokens: [] }];
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    if (req.method === "GET" && req.url === "/v1/models") {
      const body = JSON.stringify({ object: "list", data: [{ id: "openai/gpt-oss-20b", object: "model", owned_by: "vllm" }] });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
      return;
    }
    if (req.method !== "POST" || req.url !== "/v1/completions") {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      const rec: Received = { body, aborted: false, sentTokens: 0, waiting: false };
      received.push(rec);
      res.on("close", () => {
        if (!res.writableFinished) rec.aborted = true;
      });
      const s = scripts.length > 1 ? scripts.shift()! : scripts[0]!;
      if (s.status) {
        res.writeHead(s.status, { "content-type": "application/json" });
        res.end(
          s.errorBody ?? JSON.stringify({ object: "error", message: `scripted ${s.status}`, type: "BadRequestError", code: s.status }),
        );
        return;
      }
      if (!Array.isArray(body.prompt) || body.return_token_ids !== true || body.stream !== true) {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "error", message: "the stand-in expects prompt ids, stream and return_token_ids" }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (s.hang) return;
      void stream(res, s, body, (body.prompt as number[]).length, rec);
    });
  });

  async function stream(
    res: http.ServerResponse,
    s: Script,
    body: Record<string, unknown>,
    promptTokens: number,
    rec: Received,
  ): Promise<void> {
    const n = typeof body.n === "number" ? body.n : 1;
    const per = Array.from({ length: n }, (_, i) =>
      Array.isArray(s.tokens[0]) ? ((s.tokens as number[][])[i] ?? []) : (s.tokens as number[]),
    );
    const max = typeof body.max_tokens === "number" ? body.max_tokens : Infinity;
    const id = `cmpl-${Math.random().toString(36).slice(2)}`;
    let sent = 0;
    let completion = 0;
    for (let choice = 0; choice < n; choice++) {
      const toks = per[choice]!.slice(0, max);
      const cut = toks.length < per[choice]!.length;
      let at = 0;
      let seed = 7 + choice;
      while (at < toks.length) {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        const size = s.chunkSize ?? 1 + (seed % 4);
        const piece = toks.slice(at, at + size);
        at += piece.length;
        const last = at >= toks.length;
        const finish = last ? (cut ? "length" : (s.finish ?? "stop")) : null;
        if (s.breakAfterChunks !== undefined && sent >= s.breakAfterChunks) {
          res.socket?.destroy();
          return;
        }
        if (res.destroyed) return;
        const flowing = res.write(
          `data: ${JSON.stringify({ id, object: "text_completion", created: 0, model: body.model, choices: [{ index: choice, text: "", logprobs: null, finish_reason: finish, stop_reason: null, token_ids: piece }], usage: null })}\n\n`,
        );
        sent++;
        completion += piece.length;
        rec.sentTokens = completion;
        if (!flowing && s.drain) {
          rec.waiting = true;
          await new Promise<void>((resolve) => {
            const done = () => {
              res.off("drain", done);
              res.off("close", done);
              resolve();
            };
            res.on("drain", done);
            res.on("close", done);
          });
          rec.waiting = false;
        }
        if (s.delayMs) await new Promise((r) => setTimeout(r, s.delayMs));
      }
      if (toks.length === 0) {
        res.write(
          `data: ${JSON.stringify({ id, object: "text_completion", created: 0, model: body.model, choices: [{ index: choice, text: "", finish_reason: s.finish ?? "stop", token_ids: [] }], usage: null })}\n\n`,
        );
      }
    }
    res.write(
      `data: ${JSON.stringify({ id, object: "text_completion", created: 0, model: body.model, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion } })}\n\n`,
    );
    res.end("data: [DONE]\n\n");
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    script: (...s) => {
      scripts = s;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
