/**
 * The floor under the sidecar's Chat front: the least a Node front can do to
 * turn the engine's ids into Chat chunks, and nothing else. A node:http
 * server; each request is sent on to the engine as one fixed completion
 * request (no rendering, no plan, no checks of the body); the engine's
 * answer is read with node:http (as the relay reads it), split into events
 * with the sidecar's own SSE reader (src/upstream/sse.ts), each event's JSON
 * parsed, its `token_ids` fed to one HarmonyParser, the parser's events
 * turned into chunks by the sidecar's ChatCompletionChunkAdapter, and each
 * chunk written as `data: JSON\n\n`, then the usage chunk and `[DONE]`.
 *
 * No service, pool, sessions, limits, metrics, flow control, logs, repair
 * log or id checks: what it costs over the relay is what parsing and
 * encoding cost at least, and what the sidecar costs over it is its own
 * layers. A yardstick for issue #35, never a front to serve with (it
 * trusts the engine, and a slow client's bytes pile up in its memory).
 *
 * With `--in-place` (the `in-place` set-up) it also skips what the issue's
 * "parse in place, encode once" would skip: no SSE split and no JSON.parse
 * (each event's `token_ids` digits are read straight from the engine's bytes),
 * and a delta of one content or reasoning string is written from a
 * per-request template with only its text JSON-encoded. It reads the
 * stand-in's vLLM shape and nothing else (a yardstick: it checks nothing).
 *
 * Run by ./main.ts as a child process: `node floor.js --upstream URL`;
 * prints `{"ready":true,"port":…}` when it listens.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Command } from "commander";
import { HarmonyParser } from "../../src/core/parser.js";
import { Vocabulary } from "../../src/core/vocab.js";
import { ChatCompletionChunkAdapter, type HarmonyChatCompletionChunk } from "../../src/openai/chat.js";
import { SseEvents } from "../../src/upstream/sse.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";

const opts = new Command()
  .requiredOption("--upstream <url>", "the engine")
  .option("--port <n>", "port (0: any free port)", (v) => Number(v), 0)
  .option("--model <name>", "the served model", "openai/gpt-oss-20b")
  .option("--in-place", "read ids from the bytes and write deltas from a template", false)
  .parse()
  .opts<{ upstream: string; port: number; model: string; inPlace: boolean }>();

const up = new URL(opts.upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const vocab = new Vocabulary(loadHarmonyEncoding().table);

/** The one completion asked of the engine for every request (the stand-in streams its own ids whatever the prompt). */
const UPSTREAM_BODY = JSON.stringify({
  model: opts.model,
  prompt: [200006, 1428, 200008, 12194, 200007, 200006, 173781],
  max_tokens: 131072,
  stream: true,
  stream_options: { include_usage: true },
  return_token_ids: true,
});

const TOKEN_IDS = Buffer.from('"token_ids":[');
const PROMPT_TOKENS = Buffer.from('"prompt_tokens":');
const EVENT_END = Buffer.from("\n\n");

/** The decimal integers from `at` up to the first `]` or `}` (or the end): each pushed to `out`; where the reading stopped. */
function readInts(bytes: Buffer, at: number, out: number[]): number {
  let n = 0;
  let digits = false;
  for (; at < bytes.length; at++) {
    const b = bytes[at]!;
    if (b >= 0x30 && b <= 0x39) {
      n = n * 10 + (b - 0x30);
      digits = true;
      continue;
    }
    if (digits) out.push(n);
    n = 0;
    digits = false;
    if (b === 0x5d || b === 0x7d) break;
  }
  if (digits) out.push(n);
  return at;
}

/** A chunk whose only part is one choice's delta of one content or reasoning string: that field and its text, else null. */
function templated(c: HarmonyChatCompletionChunk): [string, string] | null {
  const choice = c.choices.length === 1 && c.usage === undefined ? c.choices[0]! : null;
  if (choice === null || choice.index !== 0 || choice.finish_reason !== null || choice.logprobs != null) return null;
  const d = choice.delta;
  let only: [string, string] | null = null;
  for (const k in d) {
    const v = (d as Record<string, unknown>)[k];
    if (only !== null || (k !== "content" && k !== "reasoning") || typeof v !== "string") return null;
    only = [k, v];
  }
  return only;
}

let served = 0;

function serve(res: http.ServerResponse): void {
  const id = `chatcmpl-floor-${++served}`;
  const created = Math.floor(Date.now() / 1000);
  const parser = new HarmonyParser(vocab, {});
  const adapter = new ChatCompletionChunkAdapter({ id, model: opts.model, created });
  const reader = new SseEvents(4 * 1024 * 1024);
  let completion = 0;
  let prompt = 0;
  const head = `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(opts.model)},"choices":[{"index":0,"delta":{"`;
  const send = (chunks: readonly HarmonyChatCompletionChunk[]) => {
    for (const c of chunks) {
      const text = opts.inPlace ? templated(c) : null;
      if (text !== null) res.write(`${head}${text[0]}":${JSON.stringify(text[1])}},"logprobs":null,"finish_reason":null}]}\n\n`);
      else res.write(`data: ${JSON.stringify(c)}\n\n`);
    }
  };
  const onEvent = (data: string) => {
    if (data === "[DONE]") return;
    const chunk = JSON.parse(data) as {
      choices: { token_ids: number[] }[];
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
    };
    if (chunk.usage) prompt = chunk.usage.prompt_tokens;
    for (const c of chunk.choices) {
      completion += c.token_ids.length;
      for (const ev of parser.write(c.token_ids)) send(adapter.push(ev));
    }
  };
  const out = http.request(
    {
      host: up.hostname,
      port: up.port,
      method: "POST",
      path: "/v1/completions",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(UPSTREAM_BODY), host: up.host },
      agent,
    },
    (r) => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let carry: Buffer | null = null;
      r.on("data", (piece: Buffer) => {
        if (!opts.inPlace) return reader.push(piece, onEvent);
        // whole events only: what follows the last blank line waits for the next piece
        const bytes: Buffer = carry === null ? piece : Buffer.concat([carry, piece]);
        const end = bytes.lastIndexOf(EVENT_END) + EVENT_END.length;
        carry = end < bytes.length ? Buffer.from(bytes.subarray(Math.max(end, 0))) : null;
        for (let at = bytes.indexOf(TOKEN_IDS); at >= 0 && at < end; at = bytes.indexOf(TOKEN_IDS, at)) {
          const ids: number[] = [];
          at = readInts(bytes, at + TOKEN_IDS.length, ids);
          completion += ids.length;
          for (const ev of parser.write(ids)) send(adapter.push(ev));
        }
        const u = bytes.indexOf(PROMPT_TOKENS);
        if (u >= 0 && u < end) {
          const n: number[] = [];
          readInts(bytes, u + PROMPT_TOKENS.length, n);
          prompt = n[0] ?? prompt;
        }
      });
      r.on("end", () => {
        for (const ev of parser.end("eos")) send(adapter.push(ev));
        const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
        send([{ id, object: "chat.completion.chunk", created, model: opts.model, choices: [], usage }]);
        res.end("data: [DONE]\n\n");
      });
    },
  );
  out.on("error", () => res.destroy());
  res.on("close", () => {
    if (!res.writableFinished) out.destroy();
  });
  out.end(UPSTREAM_BODY);
}

const server = http.createServer((req, res) => {
  // the request's body is read and dropped: every request is the same completion
  req.resume();
  req.on("end", () => serve(res));
});
server.keepAliveTimeout = 60_000;
server.listen(opts.port, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
