/**
 * The engine stand-in: vLLM's `POST /v1/completions` stream as the sidecar
 * asks for it (prompt as ids, `return_token_ids: true`, `stream_options:
 * {include_usage: true}`), written as cheaply as it can be, so that what the
 * bench measures is what sits between the engine and the client.
 *
 * The chunk shape is vLLM's `completion_stream_generator`
 * (vllm/entrypoints/openai/completion/serving.py @ 030ea52effcb05071543c8c42b8f0145e94cee43):
 * one `CompletionStreamResponse` per output per step, dumped with
 * `exclude_unset=True` (every field the constructor sets, nulls included, no
 * `usage` key): `id`, `object: "text_completion"`, `created`, `model`, and
 * one choice with `index`, `text`, `logprobs`, `finish_reason`,
 * `stop_reason`, `prompt_token_ids` (the prompt's ids on a choice's first
 * chunk when `return_token_ids`, else null) and `token_ids` (this step's
 * ids); then the usage chunk (`exclude_none=True`: `choices: []` and
 * `usage` with prompt_tokens, total_tokens, completion_tokens) and
 * `data: [DONE]`. The stop token stays in `token_ids` and leaves the text
 * (v1/engine/detokenizer.py); finish `stop` with `stop_reason` null for the
 * tokenizer EOS `<|return|>` (v1/core/sched/utils.py `check_stop`).
 * test/e2e/stand-ins/vllm.ts models the same generator in full.
 *
 * The scheduler is one loop of steps over every running stream, as vLLM's
 * engine core steps its whole batch: each step writes `--step-tokens` ids
 * (one event) to every stream that can take them; a new request joins at the
 * next step (its prefill gives its first id). `--rate` paces steps per
 * second; 0 runs them back to back. A stream whose socket is full (write
 * answered false) skips steps until it drains: its ids wait, none is dropped
 * or merged into a bigger event, and the loop sleeps when no stream can take
 * anything.
 *
 * Run by ./main.ts as a child process: `node engine.js --port 0 --rate N
 * --step-tokens K --tokens T`; `POST /bench/pace?rate=N&step_tokens=K`
 * changes the pace between runs. It prints one JSON line `{"ready":true,
 * "port":…,"chars":…}` (chars: the answer's and reasoning's text, which the
 * fronts' deltas add up to) when it listens.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Command } from "commander";
import { HARMONY } from "../../src/core/preset.js";
import { Vocabulary } from "../../src/core/vocab.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { bodyChars, completionIds } from "./completion.js";

const opts = new Command()
  .option("--port <n>", "port (0: any free port)", (v) => Number(v), 0)
  .option("--rate <n>", "engine steps per second (0: flat out)", (v) => Number(v), 100)
  .option("--step-tokens <n>", "ids per stream per step (one event)", (v) => Number(v), 1)
  .option("--tokens <n>", "ids per completion, <|return|> included", (v) => Number(v), 256)
  .option("--model <name>", "the served model", "openai/gpt-oss-20b")
  .parse()
  .opts<{ port: number; rate: number; stepTokens: number; tokens: number; model: string }>();

const enc = loadHarmonyEncoding();
const vocab = new Vocabulary(enc.table);
const IDS = completionIds(opts.tokens, (t) => enc.encodeOrdinary(t));
/** Each id's text as vLLM's detokenizer gives it with skip_special_tokens false, JSON-escaped; the stop token has none. */
const TEXT = IDS.map((id, i) => (i === IDS.length - 1 && id === HARMONY.tokens.return ? "" : JSON.stringify(vocab.text(id)).slice(1, -1)));
/** The text the fronts stream as deltas. */
const CHARS = bodyChars(IDS, (id) => vocab.text(id));

interface Stream {
  res: http.ServerResponse;
  head: string;
  prompt: string;
  promptLen: number;
  next: number;
  blocked: boolean;
}

const running = new Set<Stream>();
let serial = 0;

function chunkOf(s: Stream): string {
  const from = s.next;
  const to = Math.min(IDS.length, from + stepTokens);
  s.next = to;
  let text = "";
  let ids = "";
  for (let i = from; i < to; i++) {
    text += TEXT[i];
    ids += i === from ? String(IDS[i]) : `,${IDS[i]}`;
  }
  const last = to === IDS.length;
  const prompt = from === 0 ? s.prompt : "null";
  const finish = last ? '"stop"' : "null";
  let out = `data: ${s.head}"choices":[{"index":0,"text":"${text}","logprobs":null,"finish_reason":${finish},"stop_reason":null,"prompt_token_ids":${prompt},"token_ids":[${ids}]}]}\n\n`;
  if (last) {
    const c = IDS.length;
    out += `data: ${s.head}"choices":[],"usage":{"prompt_tokens":${s.promptLen},"total_tokens":${s.promptLen + c},"completion_tokens":${c}}}\n\ndata: [DONE]\n\n`;
  }
  return out;
}

let scheduled = false;
let due = 0;
let period = opts.rate > 0 ? 1000 / opts.rate : 0;
let stepTokens = Math.max(1, opts.stepTokens);

function wake(): void {
  if (scheduled) return;
  scheduled = true;
  if (period === 0) setImmediate(step);
  else {
    const now = performance.now();
    if (due < now - period) due = now; // idle or behind by more than a step: the schedule starts again
    setTimeout(step, Math.max(0, due - now));
  }
}

function step(): void {
  scheduled = false;
  due += period;
  let wrote = false;
  for (const s of running) {
    if (s.blocked) continue;
    if (s.res.destroyed) {
      running.delete(s);
      continue;
    }
    const out = chunkOf(s);
    wrote = true;
    if (s.next >= IDS.length) {
      running.delete(s);
      s.res.end(out);
    } else if (!s.res.write(out)) {
      s.blocked = true;
      s.res.once("drain", () => {
        s.blocked = false;
        wake();
      });
    }
  }
  // every running stream blocked: the loop sleeps until one drains
  if (running.size > 0 && (wrote || period > 0)) wake();
}

function completions(req: http.IncomingMessage, res: http.ServerResponse): void {
  const parts: Buffer[] = [];
  req.on("data", (b: Buffer) => parts.push(b));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as { prompt?: unknown; model?: unknown };
    const ids = Array.isArray(body.prompt) ? (body.prompt as number[]) : [];
    const created = Math.floor(Date.now() / 1000);
    const head = `{"id":"cmpl-${(serial++).toString(16).padStart(8, "0")}","object":"text_completion","created":${created},"model":${JSON.stringify(opts.model)},`;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
    res.flushHeaders();
    running.add({ res, head, prompt: JSON.stringify(ids), promptLen: ids.length, next: 0, blocked: false });
    wake();
  });
}

function json(res: http.ServerResponse, v: unknown): void {
  const body = JSON.stringify(v);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const url = req.url ?? "/";
  if (req.method === "POST" && url === "/v1/completions") return completions(req, res);
  // the bench's own knob: main.ts sets the pace between set-ups, with no stream running
  if (req.method === "POST" && url.startsWith("/bench/pace?")) {
    const q = new URL(url, "http://x").searchParams;
    const rate = Number(q.get("rate"));
    period = rate > 0 ? 1000 / rate : 0;
    stepTokens = Math.max(1, Number(q.get("step_tokens")) || 1);
    return json(res, { rate, step_tokens: stepTokens });
  }
  if (url === "/health") return void res.writeHead(200).end();
  if (url === "/version") return json(res, { version: "0.11.0" });
  if (url === "/v1/models")
    return json(res, {
      object: "list",
      data: [{ id: opts.model, object: "model", created: 0, owned_by: "vllm", root: opts.model, parent: null, max_model_len: 131072 }],
    });
  res.writeHead(404).end();
});
server.keepAliveTimeout = 60_000;
server.listen(opts.port, "127.0.0.1", () => {
  const port = (server.address() as AddressInfo).port;
  process.stdout.write(`${JSON.stringify({ ready: true, port, chars: CHARS, ids: IDS.length })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
