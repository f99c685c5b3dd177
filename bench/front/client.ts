/**
 * The bench's clients, one child process (forked by ./main.ts, driven over
 * IPC) running many streams at once and costing as little as it can:
 * node:http with a keep-alive agent, SSE split on blank lines, each event
 * looked at with string searches (JSON.parse only for the one event that
 * carries usage). Per stream it records the time to the first event that
 * carries a token of text (TTFT, from the request's start) and the gap
 * between consecutive such events, in HDR histograms (µs), and counts the
 * tokens and the delta text that came through.
 *
 * Kinds of run:
 * - `completions`: vLLM's `/v1/completions` as the sidecar asks it (the
 *   engine alone, or the pass-through); tokens: the `token_ids` of each event;
 *   a token event: one whose ids include one of a message's body (`Bodies`);
 * - `chat`: the front's `/v1/chat/completions`; tokens: the usage chunk's
 *   `completion_tokens`; a token event: a delta with `content` or `reasoning`;
 * - `responses`: the front's `/v1/responses`; tokens: `response.completed`'s
 *   `usage.output_tokens`; a token event: a `*.delta` event;
 * - `codex`: the same, asked as Codex CLI asks (test/e2e/clients/codex.test.ts:
 *   `include: ["reasoning.encrypted_content"]`, `reasoning.summary: "auto"`),
 *   so each reasoning delta is followed by a summary delta, which is not a
 *   token event of its own;
 * - `ws`: the WebSocket edge's `openai.chat` streams through the bundled
 *   client (src/client/): each stream reads the engine's `/v1/completions`
 *   and writes its ids into a stream opened with `format: "openai.chat"`,
 *   as an engine integration does; tokens: the ids written; a token event:
 *   an `openai` event whose delta has `content` or `reasoning`.
 */
import http from "node:http";
import { build as buildHistogram, encodeIntoCompressedBase64, type Histogram } from "hdr-histogram-js";
import { HarmonyClient, type StreamHandle } from "../../src/client/index.js";
import { HARMONY } from "../../src/core/preset.js";

const MESSAGE = HARMONY.tokens.message;
const FIRST_SPECIAL = HARMONY.firstSpecial;

export type Kind = "completions" | "chat" | "responses" | "codex" | "ws";

export interface RunCommand {
  kind: Kind;
  /** Base URL of what the client talks to over HTTP (for `ws`, the engine). */
  url: string;
  /** `ws` only: the sidecar's WebSocket URL. */
  wsUrl?: string;
  streams: number;
  /** Requests each stream makes, one after another. */
  requests: number;
  model: string;
  tag: string;
}

export interface RunResult {
  tokens: number;
  /** Events that carried text: a delta, or (completions) an id of a message's body. */
  events: number;
  /** Delta text (content and reasoning) through the chat, responses and ws fronts. */
  chars: number;
  requests: number;
  errors: string[];
  wallMs: number;
  ttft: string;
  gap: string;
}

function newHist(): Histogram {
  return buildHistogram({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 });
}

/**
 * Keep-alive within a run (a stream's requests reuse its connection); each
 * run starts with none, so no request races a server closing a connection
 * that sat idle since the run before, and every set-up's TTFT includes the
 * same connects.
 */
let agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/** A prompt of the length the sidecar renders for the bench's chat request (its ids are echoed on the first chunk only). */
const PROMPT = Array.from({ length: 80 }, (_, i) => 1000 + i);
const USER = "Write a few sentences about relays.";

function requestBody(kind: Kind, model: string): { path: string; body: string } {
  switch (kind) {
    case "completions":
    case "ws":
      return {
        path: "/v1/completions",
        body: JSON.stringify({
          model,
          prompt: PROMPT,
          stream: true,
          stream_options: { include_usage: true },
          return_token_ids: true,
          skip_special_tokens: false,
        }),
      };
    case "chat":
      return {
        path: "/v1/chat/completions",
        body: JSON.stringify({ model, messages: [{ role: "user", content: USER }], stream: true, stream_options: { include_usage: true } }),
      };
    case "responses":
      return { path: "/v1/responses", body: JSON.stringify({ model, input: USER, stream: true, store: false }) };
    case "codex":
      return {
        path: "/v1/responses",
        body: JSON.stringify({
          model,
          input: USER,
          stream: true,
          store: false,
          include: ["reasoning.encrypted_content"],
          reasoning: { summary: "auto" },
        }),
      };
  }
}

/** The length of the JSON string value that starts at `at` (just after its opening quote). */
function stringLength(s: string, at: number): number {
  let i = at;
  while (i < s.length && s.charCodeAt(i) !== 34) i += s.charCodeAt(i) === 92 ? 2 : 1;
  return i - at;
}

/** The ids of a completions event's `token_ids`, or null when it has none. */
function idsOf(ev: string): number[] | null {
  const k = ev.indexOf('"token_ids":[');
  if (k < 0) return null;
  const end = ev.indexOf("]", k);
  const inner = ev.slice(k + 13, end);
  if (inner.length === 0) return [];
  return inner.split(",").map(Number);
}

/** Delta text in a chat chunk: `content` and `reasoning` values (0: not a token event). */
function chatChars(ev: string): number {
  let n = -1;
  for (const key of ['"content":"', '"reasoning":"', '"reasoning_content":"']) {
    const k = ev.indexOf(key);
    if (k >= 0) n = Math.max(0, n) + stringLength(ev, k + key.length);
  }
  return n;
}

class Meter {
  readonly ttft = newHist();
  readonly gap = newHist();
  tokens = 0;
  events = 0;
  chars = 0;
  requests = 0;
  readonly errors: string[] = [];

  error(e: string): void {
    if (this.errors.length < 20) this.errors.push(e);
  }
}

/** One stream's timing: TTFT from the request's start, then the gaps between token events. */
class Timer {
  private last = 0;
  constructor(
    private readonly m: Meter,
    private readonly t0: number,
  ) {}
  tokenEvent(): void {
    const now = performance.now();
    if (this.last === 0) this.m.ttft.recordValue(Math.max(1, Math.round((now - this.t0) * 1000)));
    else this.m.gap.recordValue(Math.max(1, Math.round((now - this.last) * 1000)));
    this.last = now;
    this.m.events++;
  }
}

/** POST and read the SSE answer, calling `onEvent` with each event's data. */
function sse(url: string, path: string, body: string, onEvent: (data: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, url);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), accept: "text/event-stream" },
      },
      (res) => {
        res.setEncoding("utf8");
        if (res.statusCode !== 200) {
          let text = "";
          res.on("data", (c: string) => (text += c));
          res.on("end", () => reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`)));
          return;
        }
        let carry = "";
        res.on("data", (c: string) => {
          carry += c;
          let at = 0;
          for (let k = carry.indexOf("\n\n", at); k >= 0; k = carry.indexOf("\n\n", at)) {
            const ev = carry.slice(at, k);
            at = k + 2;
            const d = ev.indexOf("data: ");
            if (d >= 0) onEvent(ev.slice(d + 6));
          }
          carry = carry.slice(at);
        });
        res.on("end", resolve);
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Which of a completion's ids a front turns into delta text: the ordinary ids
 * of a message's body (after `<|message|>`, before the next special). An
 * event of the engine's counts as a token event when it carries one, so the
 * engine's and the relay's TTFT and gaps are timed to the same tokens as the
 * fronts' deltas.
 */
class Bodies {
  private inBody = false;
  /** Whether `ids` carry a body id. */
  read(ids: readonly number[]): boolean {
    let body = false;
    for (const id of ids) {
      if (id === MESSAGE) this.inBody = true;
      else if (id >= FIRST_SPECIAL) this.inBody = false;
      else if (this.inBody) body = true;
    }
    return body;
  }
}

async function oneHttp(cmd: RunCommand, m: Meter): Promise<void> {
  const { path, body } = requestBody(cmd.kind, cmd.model);
  const timer = new Timer(m, performance.now());
  const bodies = new Bodies();
  await sse(cmd.url, path, body, (data) => {
    if (cmd.kind === "completions") {
      const ids = idsOf(data);
      if (ids !== null && ids.length > 0) {
        m.tokens += ids.length;
        if (bodies.read(ids)) timer.tokenEvent();
      }
    } else if (cmd.kind === "chat") {
      const c = chatChars(data);
      if (c > 0) {
        m.chars += c;
        timer.tokenEvent();
      } else if (data.includes('"usage":{')) {
        const u = (JSON.parse(data) as { usage?: { completion_tokens?: number } }).usage;
        m.tokens += u?.completion_tokens ?? 0;
      }
    } else {
      const k = data.indexOf('"delta":"');
      if (k >= 0 && data.includes('.delta"') && !data.includes('"type":"response.reasoning_summary_text.delta"')) {
        const c = stringLength(data, k + 9);
        if (c > 0) {
          m.chars += c;
          timer.tokenEvent();
        }
      } else if (data.includes('"type":"response.completed"')) {
        const r = (JSON.parse(data) as { response?: { usage?: { output_tokens?: number } } }).response;
        m.tokens += r?.usage?.output_tokens ?? 0;
      }
    }
  });
  m.requests++;
}

let wsClient: HarmonyClient | null = null;
let wsUrl = "";
let serial = 0;

async function oneWs(cmd: RunCommand, m: Meter): Promise<void> {
  const client = wsClient!;
  const { path, body } = requestBody("ws", cmd.model);
  const timer = new Timer(m, performance.now());
  const stream: StreamHandle = client.open(`${cmd.tag}-${serial++}`, { format: "openai.chat", model: cmd.model });
  const reading = (async () => {
    for await (const ev of stream) {
      const p = (ev as unknown as { payload?: { choices?: { delta?: { content?: string; reasoning?: string } }[] } }).payload;
      const d = p?.choices?.[0]?.delta;
      const c = (d?.content?.length ?? 0) + (d?.reasoning?.length ?? 0);
      if (c > 0) {
        m.chars += c;
        timer.tokenEvent();
      }
    }
  })();
  await sse(cmd.url, path, body, (data) => {
    const ids = idsOf(data);
    if (ids !== null && ids.length > 0) {
      m.tokens += ids.length;
      stream.write(ids);
    }
  });
  stream.close("eos");
  await reading;
  m.requests++;
}

async function run(cmd: RunCommand): Promise<RunResult> {
  if (cmd.kind === "ws" && (wsClient === null || wsUrl !== cmd.wsUrl)) {
    await wsClient?.close();
    wsClient = await HarmonyClient.connect(cmd.wsUrl!, { handles: true });
    wsUrl = cmd.wsUrl!;
  }
  const m = new Meter();
  const t0 = performance.now();
  const one = cmd.kind === "ws" ? oneWs : oneHttp;
  await Promise.all(
    Array.from({ length: cmd.streams }, async () => {
      for (let r = 0; r < cmd.requests; r++) {
        try {
          await one(cmd, m);
        } catch (e) {
          m.error((e as Error).message);
        }
      }
    }),
  );
  const wallMs = performance.now() - t0;
  agent.destroy();
  agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  return {
    tokens: m.tokens,
    events: m.events,
    chars: m.chars,
    requests: m.requests,
    errors: m.errors,
    wallMs,
    ttft: encodeIntoCompressedBase64(m.ttft),
    gap: encodeIntoCompressedBase64(m.gap),
  };
}

process.on("message", (msg: { run?: RunCommand; exit?: boolean }) => {
  if (msg.exit) {
    void (wsClient?.close() ?? Promise.resolve()).then(() => process.exit(0));
    return;
  }
  if (msg.run)
    void run(msg.run).then(
      (result) => process.send!({ result }),
      (e: Error) => process.send!({ failed: e.message }),
    );
});
process.send!({ ready: true });
