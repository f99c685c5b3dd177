/**
 * Issue #16's attacks at full size against the real service (`node
 * dist/src/cli.js serve`, a child process on loopback), one at a time, while
 * a probe GETs /healthz every 10 ms and the service's RSS is read from
 * /proc/<pid>/status every 10 ms (both on a worker thread, so that building
 * and reading the attacks on this thread does not delay them):
 *   (a) a 20 KB WebSocket JSON frame whose `ids` hold 10,000 nested arrays;
 *   (b) POST /v1/render with `reasoning_effort` nested 10,000 deep;
 *   (c) one JSON frame of 130,000 ids 200007 (<|end|>) on one stream;
 *   (d) POST /v1/render with one 120,000-character word;
 *   (e) POST /v1/render of ~4 MiB of 120,000-character words (just under --max-frame-bytes);
 *   (f) a 4 MB binary frame of 2M empty ops (bytes 0x0a 0x00 repeated);
 *   (g) 600 opens with 4 MB stream names on one connection, one open per frame, then a disconnect;
 *   (h) a WebSocket upgrade with `Origin: https://evil.example`, and a text/plain POST to
 *       /v1/chat/completions (the service runs with an --upstream nothing listens on, so that the
 *       OpenAI front exists and the refusal is the access check's).
 * Issue #32's classes, against the same service (its --cot-store a fake RESP peer on a Unix socket that
 * answers MGET with `:1`, its --upstream an engine stand-in on loopback that waits for 'drain' as vLLM's
 * uvicorn does, --slow-client-timeout-ms 2000):
 *   (i) POST /v1/render naming tool calls while the store answers MGET with `:1`, then `*1 :5`;
 *   (j) a streamed chat whose response_format pattern is `^(a+)+$`, the answer 40 a's and a b;
 *   (k) a streamed chat client that never reads an answer of 2^20 tokens (the engine's sent tokens noted);
 *   (l) a WebSocket client that never reads its openai.chat answers (300 frames of 5,000 ids);
 *   (m) GET //x/health, //tokenize/x/../../health and an absolute-form target;
 *   (n) 8 gRPC Stream calls on one HTTP/2 connection, 2,000 opens each (--max-connection-bytes 16 MiB over all).
 * For each: the coded answer, the answer's bytes, the attack's duration (first byte sent to the last
 * answer), /healthz latency p50/p99/max over the probes scheduled meanwhile (measured from the time
 * each was due, so a frozen service is not under-counted; an attack over in under 1 s is sent again, back to
 * back, until 1 s has passed, so that ~100 probes see it), the service's RSS before, its peak from the
 * attack's start to 2 s after its end, and 2 s after its end; and whether the process is still up.
 * Every run starts a fresh service and runs the attacks in order in it; every loop is bounded.
 *
 *   node dist/bench/hostile/main.js [--runs 3] [--only abcdefgh] [--json-file FILE]
 *   taskset -c 0 node dist/bench/hostile/main.js --child-cpus 1   (the service alone on CPU 1)
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import http from "node:http";
import os from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import net from "node:net";
import { Command } from "commander";
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { HARMONY_SERVICE } from "../../src/protocol/grpc-methods.js";
import { schema } from "../../src/protocol/schema.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";

const MiB = 1 << 20;
const PROBE_MS = 10;
const SETTLE_MS = 2000;
/** an attack shorter than this is repeated until it has lasted this long */
const MIN_WINDOW_MS = 1000;

/** VmRSS of `pid` in bytes, or null once it is gone. */
function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------
// The probe thread: GET /healthz every 10 ms on a fixed schedule, read the RSS every 10 ms.

interface ProbeReport {
  probes: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
  rssPeak: number;
  rssEnd: number | null;
  exited: boolean;
}

function probeThread(port: number, pid: number): void {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  let window: { lat: number[]; failed: number; pending: number; open: boolean; rssPeak: number; reportWhenDone: boolean } | null = null;
  let exited = false;
  let stopped = false;
  const t0 = performance.now();
  let k = 0;

  const maybeReport = () => {
    const w = window;
    if (!w || !w.reportWhenDone || w.pending > 0) return;
    const s = [...w.lat].sort((a, b) => a - b);
    const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]! : NaN);
    const report: ProbeReport = {
      probes: s.length + w.failed,
      failed: w.failed,
      p50: q(0.5),
      p99: q(0.99),
      max: s.length ? s[s.length - 1]! : NaN,
      rssPeak: w.rssPeak,
      rssEnd: rssOf(pid),
      exited,
    };
    window = null;
    parentPort!.postMessage(report);
  };

  const probe = (due0: number) => {
    // timers may fire a little early: time a probe from when it was due or sent, whichever came first
    const due = Math.min(due0, performance.now());
    const w = window?.open ? window : null;
    if (w) w.pending++;
    const done = (ok: boolean) => {
      if (!w) return;
      w.pending--;
      if (ok) w.lat.push(performance.now() - due);
      else w.failed++;
      maybeReport();
    };
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent, timeout: 60_000 }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode === 200));
      res.on("error", () => done(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(false));
  };

  const tick = () => {
    if (stopped) return;
    const due = t0 + k * PROBE_MS;
    probe(due);
    const rss = rssOf(pid);
    if (rss === null) exited = true;
    else if (window && rss > window.rssPeak) window.rssPeak = rss;
    // the next due time; a late tick skips none (each probe is timed from when it was due)
    k++;
    setTimeout(tick, Math.max(0, t0 + k * PROBE_MS - performance.now()));
  };
  tick();

  parentPort!.on("message", (m: string) => {
    if (m === "begin") window = { lat: [], failed: 0, pending: 0, open: true, rssPeak: rssOf(pid) ?? 0, reportWhenDone: false };
    else if (m === "end" && window) window.open = false;
    else if (m === "report" && window) {
      window.reportWhenDone = true;
      maybeReport();
    } else if (m === "stop") {
      stopped = true;
      agent.destroy();
      parentPort!.close();
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// The attacks.

interface Answer {
  /** the coded answer: error codes, HTTP status, close code */
  code: string;
  bytes: number;
  note?: string;
}

interface Target {
  port: number;
  http: string;
  ws: string;
  grpc: string;
  /** The RESP peer standing for the shared store: what it answers MGET with. */
  store: { mget: string };
  /** The engine stand-in: the tokens it sent for its last request, and whether that one was cut. */
  engine: { sent: number; aborted: boolean };
}

interface Attack {
  key: string;
  name: string;
  /** build the payload (before the clock starts), then return the function that sends it */
  prepare(t: Target): () => Promise<Answer>;
}

interface Row {
  key: string;
  name: string;
  answer: Answer;
  durationMs: number;
  probe: ProbeReport;
  rssBefore: number;
  /** times the attack was sent in its window (1 unless it took under MIN_WINDOW_MS) */
  repeats: number;
  up: boolean;
  load: string;
}

const nested = (depth: number, inner: string) => "[".repeat(depth) + inner + "]".repeat(depth);

/** Error codes, recovery kinds and done events of answer frames, counted. */
function summarise(events: Record<string, unknown>[]): Map<string, number> {
  const seen = new Map<string, number>();
  const add = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
  for (const e of events) {
    const err = (e.error as { code?: string } | undefined) ?? (e.type === "error" ? (e as { code?: string }) : undefined);
    const rec = (e.recovery as { kind?: string } | undefined) ?? (e.type === "recovery" ? (e as { kind?: string }) : undefined);
    if (err?.code) add(err.code);
    else if (rec?.kind) add(`recovery ${rec.kind}`);
    else if (e.done || e.type === "done") add("done");
  }
  return seen;
}

const describe = (seen: Map<string, number>) => [...seen].map(([k, n]) => (n > 1 ? `${k} ×${n}` : k)).join(", ") || "(no events)";

/** One HTTP POST; its status, its error code (or the ids' count), and the answer's bytes. */
function post(t: Target, path: string, contentType: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${t.http}${path}`,
      { method: "POST", headers: { "content-type": contentType, "content-length": body.length }, timeout: 120_000 },
      (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on("data", (c: Buffer) => {
          bytes += c.length;
          if (bytes <= 64 * MiB) chunks.push(c);
        });
        res.on("end", () => {
          let code = `HTTP ${res.statusCode}`;
          let note: string | undefined;
          try {
            const v = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { error?: { code?: string }; ids?: unknown[] };
            if (v.error?.code) code += ` ${v.error.code}`;
            if (Array.isArray(v.ids)) note = `${v.ids.length.toLocaleString("en")} ids`;
          } catch {
            // not JSON: the status alone
          }
          resolve({ code, bytes, ...(note ? { note } : {}) });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer in 120 s")));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * One WebSocket connection: send `frames` (at most `window` unsent at a time, so that the client never
 * buffers more than a few), gather answers until `enough` holds or the socket closes, then close it.
 */
function wsExchange(
  t: Target,
  frames: number,
  frame: (i: number) => { data: Buffer; binary: boolean },
  enough: (answers: number, events: Record<string, unknown>[]) => boolean,
  window = 4,
): Promise<Answer> {
  const wire = schema();
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(t.ws, { maxPayload: 1 << 30, perMessageDeflate: false });
    const events: Record<string, unknown>[] = [];
    let answers = 0;
    let bytes = 0;
    let closeCode: number | null = null;
    let finished = false;
    const timer = setTimeout(() => finish("timed out after 120 s"), 120_000);
    const finish = (note?: string) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      const seen = summarise(events);
      if (closeCode !== null && closeCode !== 1000 && closeCode !== 1005) seen.set(`close ${closeCode}`, 1);
      resolve({ code: describe(seen), bytes, note: `${answers} answer frame${answers === 1 ? "" : "s"}${note ? `; ${note}` : ""}` });
      if (ws.readyState === WebSocket.OPEN) ws.close();
    };
    let sent = 0;
    let inFlight = 0;
    const pump = () => {
      while (inFlight < window && sent < frames && ws.readyState === WebSocket.OPEN) {
        const f = frame(sent++);
        inFlight++;
        ws.send(f.data, { binary: f.binary }, () => {
          inFlight--;
          pump();
        });
      }
    };
    ws.on("open", pump);
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      answers++;
      bytes += data.length;
      const v = (
        isBinary ? wire.ServerFrame.toObject(wire.ServerFrame.decode(data), { oneofs: false }) : JSON.parse(data.toString("utf8"))
      ) as { events?: Record<string, unknown>[] };
      for (const e of v.events ?? []) events.push(e);
      if (enough(answers, events)) finish();
    });
    ws.on("close", (code: number) => {
      closeCode = code;
      finish(`closed by the service (${code})`);
    });
    ws.on("error", (e: Error) => (finished ? undefined : reject(e)));
  });
}

const hasError = (_n: number, ev: Record<string, unknown>[]) => ev.some((e) => e.error || e.type === "error");
const hasDone = (_n: number, ev: Record<string, unknown>[]) => ev.some((e) => e.done || e.type === "done");

const ATTACKS: Attack[] = [
  {
    key: "a",
    name: "WS JSON frame, `ids` 10,000 nested arrays",
    prepare(t) {
      const data = Buffer.from(`{"ops":[{"open":{"stream":"a"}},{"tokens":{"stream":"a","ids":${nested(10_000, "1")}}}]}`);
      return () => wsExchange(t, 1, () => ({ data, binary: false }), hasError);
    },
  },
  {
    key: "b",
    name: "POST /v1/render, `reasoning_effort` nested 10,000 deep",
    prepare(t) {
      const body = Buffer.from(`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":${nested(10_000, '"high"')}}`);
      return () => post(t, "/v1/render", "application/json", body);
    },
  },
  {
    key: "c",
    name: "JSON frame of 130,000 ids 200007 on one stream",
    prepare(t) {
      const ids = new Array<number>(130_000).fill(200007);
      const data = Buffer.from(
        JSON.stringify({ ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids } }, { close: { stream: "a" } }] }),
      );
      return () => wsExchange(t, 1, () => ({ data, binary: false }), hasDone);
    },
  },
  {
    key: "d",
    name: "POST /v1/render, one 120,000-character word",
    prepare(t) {
      const body = Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "abcdefghij".repeat(12_000) }] }));
      return () => post(t, "/v1/render", "application/json", body);
    },
  },
  {
    key: "e",
    name: "POST /v1/render, ~4 MiB of 120,000-character words",
    prepare(t) {
      const word = "abcdefghij".repeat(12_000);
      const count = Math.floor((4 * MiB - 256) / (word.length + 1));
      const body = Buffer.from(
        JSON.stringify({ messages: [{ role: "user", content: Array.from({ length: count }, () => word).join(" ") }] }),
      );
      if (body.length > 4 * MiB) throw new Error("(e) body over 4 MiB");
      return () => post(t, "/v1/render", "application/json", body);
    },
  },
  {
    key: "f",
    name: "4 MB binary frame of 2M empty ops",
    prepare(t) {
      const data = Buffer.alloc(4_000_000);
      for (let i = 0; i < data.length; i += 2) data[i] = 0x0a; // ClientFrame.ops (field 1, LEN), length 0
      return () => wsExchange(t, 1, () => ({ data, binary: true }), hasError);
    },
  },
  {
    key: "g",
    name: "600 opens with 4 MB stream names, one per frame, then disconnect",
    prepare(t) {
      // four frame buffers, reused once sent, each naming its stream by its number in the last 6 bytes
      const head = Buffer.from('{"ops":[{"open":{"stream":"');
      const tail = Buffer.from('"}}]}');
      const NAME = 4_000_000;
      const pool = Array.from({ length: 5 }, () => {
        const b = Buffer.alloc(head.length + NAME + tail.length, "x".charCodeAt(0));
        head.copy(b, 0);
        tail.copy(b, head.length + NAME);
        return b;
      });
      if (pool[0]!.length > 4 * MiB) throw new Error("(g) frame over 4 MiB");
      const frame = (i: number) => {
        const b = pool[i % pool.length]!; // at most 4 in flight, so a buffer is sent before it is reused
        b.write(String(i).padStart(6, "0"), head.length + NAME - 6, "latin1");
        return { data: b, binary: false };
      };
      return () => wsExchange(t, 600, frame, (n) => n >= 600);
    },
  },
  {
    key: "h",
    name: "WS upgrade with Origin https://evil.example; text/plain POST /v1/chat/completions",
    prepare(t) {
      const body = Buffer.from(JSON.stringify({ model: "gpt-oss", messages: [{ role: "user", content: "hi" }] }));
      return async () => {
        const upgrade = await new Promise<{ status: number; bytes: number }>((resolve, reject) => {
          const ws = new WebSocket(t.ws, { headers: { origin: "https://evil.example" } });
          ws.on("unexpected-response", (_req, res) => {
            let bytes = 0;
            res.on("data", (c: Buffer) => (bytes += c.length));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes }));
          });
          ws.on("open", () => {
            ws.close();
            resolve({ status: 101, bytes: 0 });
          });
          ws.on("error", (e) => reject(e));
        });
        const chat = await post(t, "/v1/chat/completions", "text/plain", body);
        return { code: `upgrade HTTP ${upgrade.status}; POST ${chat.code}`, bytes: upgrade.bytes + chat.bytes };
      };
    },
  },
  {
    key: "i",
    name: "POST /v1/render naming tool calls; the store answers MGET `:1`, then `*1 :5`",
    prepare(t) {
      const body = Buffer.from(
        JSON.stringify({
          messages: [
            { role: "user", content: "go" },
            {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_x", type: "function", function: { name: "f", arguments: "{}" } }],
            },
            { role: "tool", tool_call_id: "call_x", content: "{}" },
          ],
        }),
      );
      return async () => {
        t.store.mget = ":1\r\n";
        const a = await post(t, "/v1/render", "application/json", body);
        t.store.mget = "*1\r\n:5\r\n";
        const b = await post(t, "/v1/render", "application/json", body);
        return { code: `${a.code}; ${b.code}`, bytes: a.bytes + b.bytes };
      };
    },
  },
  {
    key: "j",
    name: "chat with response_format pattern `^(a+)+$`, the answer 40 a's and a b",
    prepare(t) {
      const body = JSON.stringify({
        model: "evil-pattern",
        messages: [{ role: "user", content: "say a" }],
        response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "string", pattern: "^(a+)+$" } } },
      });
      return async () => {
        const res = await fetch(`${t.http}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
        const text = await res.text();
        const kinds = (JSON.parse(text) as { harmony?: { recoveries?: { kind: string }[] } }).harmony?.recoveries?.map((r) => r.kind) ?? [];
        return { code: `HTTP ${res.status} ${kinds.join(" ")}`.trim(), bytes: text.length };
      };
    },
  },
  {
    key: "k",
    name: "streamed chat client that never reads (an answer of 2^20 tokens)",
    prepare(t) {
      const text = JSON.stringify({ model: "endless", messages: [{ role: "user", content: "go on" }], stream: true });
      return () =>
        new Promise<Answer>((resolve) => {
          const socket = net.connect(t.port, "127.0.0.1", () => {
            socket.pause();
            socket.write(
              `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${t.port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
            );
          });
          socket.on("error", () => undefined);
          t.engine.aborted = false;
          const started = performance.now();
          const poll = setInterval(() => {
            if (!t.engine.aborted && performance.now() - started < 120_000) return;
            clearInterval(poll);
            socket.destroy();
            resolve({
              code: t.engine.aborted ? "dropped (engine request ended)" : "not dropped in 120 s",
              bytes: 0,
              note: `engine sent ${t.engine.sent.toLocaleString("en")} of ${(1 << 20).toLocaleString("en")} tokens`,
            });
          }, 20);
        });
    },
  },
  {
    key: "l",
    name: "WebSocket client that never reads its openai.chat answers (300 frames of 5,000 ids)",
    prepare(t) {
      const enc = loadHarmonyEncoding();
      const word = enc.encodeOrdinary(" hello")[0]!;
      const first = JSON.stringify({
        ops: [
          { open: { stream: "a", format: "openai.chat" } },
          { tokens: { stream: "a", ids: enc.encode("<|channel|>final<|message|>") } },
        ],
      });
      const frame = JSON.stringify({ ops: [{ tokens: { stream: "a", ids: new Array<number>(5000).fill(word) } }] });
      return () =>
        new Promise<Answer>((resolve, reject) => {
          const ws = new WebSocket(t.ws, { perMessageDeflate: false });
          ws.on("error", (e) => reject(e));
          ws.on("open", () => {
            ws.pause();
            ws.send(first);
            for (let i = 0; i < 300; i++) ws.send(frame);
            const started = performance.now();
            const poll = setInterval(() => {
              const gone = (ws as unknown as { _socket?: { destroyed: boolean } })._socket?.destroyed === true;
              if (!gone && performance.now() - started < 120_000) return;
              clearInterval(poll);
              ws.once("close", (code: number) => resolve({ code: `close ${code}`, bytes: 0 }));
              ws.resume();
              setTimeout(() => resolve({ code: gone ? "socket cut" : "not dropped in 120 s", bytes: 0 }), 2000);
            }, 20);
          });
        });
    },
  },
  {
    key: "m",
    name: "GET //x/health, //tokenize/x/../../health, http://127.0.0.1/health (absolute-form)",
    prepare(t) {
      const raw = (target: string) =>
        new Promise<string>((resolve) => {
          const socket = net.connect(t.port, "127.0.0.1", () =>
            socket.write(`GET ${target} HTTP/1.1\r\nhost: 127.0.0.1:${t.port}\r\nconnection: close\r\n\r\n`),
          );
          let text = "";
          socket.on("data", (c: Buffer) => (text += c.toString("latin1")));
          socket.on("close", () => resolve(`HTTP ${text.slice(9, 12)} ${/"code":"([a-z_]+)"/.exec(text)?.[1] ?? ""}`.trim()));
          socket.on("error", () => resolve("socket error"));
        });
      return async () => {
        const codes = [];
        for (const target of ["//x/health", "//tokenize/x/../../health", `http://127.0.0.1:${t.port}/health`])
          codes.push(await raw(target));
        return { code: [...new Set(codes)].join(", "), bytes: 0 };
      };
    },
  },
  {
    key: "n",
    name: "8 gRPC Stream calls on one HTTP/2 connection, 2,000 opens each",
    prepare(t) {
      const wire = schema();
      const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
      return async () => {
        const client = new Stub(t.grpc, grpc.credentials.createInsecure()) as unknown as {
          Stream(): grpc.ClientDuplexStream<Uint8Array, Buffer>;
          close(): void;
        };
        const seen = new Map<string, number>();
        const calls = Array.from({ length: 8 }, () => client.Stream());
        for (const [c, call] of calls.entries()) {
          call.on("error", () => undefined);
          const answered = new Promise<void>((resolve) =>
            call.once("data", (b: Buffer) => {
              const f = wire.ServerFrame.toObject(wire.ServerFrame.decode(b)) as { events?: { error?: { code: string } }[] };
              for (const e of f.events ?? []) if (e.error) seen.set(e.error.code, (seen.get(e.error.code) ?? 0) + 1);
              resolve();
            }),
          );
          const ops = [
            ...Array.from({ length: 2000 }, (_, i) => ({ open: { stream: `c${c}-${i}` } })),
            { tokens: { stream: "probe", ids: [1] } },
          ];
          call.write(wire.ClientFrame.encode({ ops }).finish());
          await answered;
        }
        for (const call of calls) call.end();
        client.close();
        return { code: describe(seen), bytes: 0 };
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------------
// The shared store's stand-in (a RESP peer answering anything) and the engine's (vLLM's completions stream).

/** A RESP peer on a Unix socket: enough for ioredis to connect; MGET answered with `target.mget`, everything else +OK. */
async function startStorePeer(store: { mget: string }): Promise<{ url: string; close(): void }> {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "hs-bench-resp-")), "peer.sock");
  const server = net.createServer((socket) => {
    socket.on("error", () => undefined);
    let pending = "";
    socket.on("data", (c: Buffer) => {
      pending += c.toString("latin1");
      // commands are arrays of bulk strings: *N\r\n($len\r\nvalue\r\n)×N
      for (;;) {
        const m = /^\*(\d+)\r\n/.exec(pending);
        if (!m) return;
        let at = m[0].length;
        const parts: string[] = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const l = /^\$(\d+)\r\n/.exec(pending.slice(at));
          if (!l || pending.length < at + l[0].length + Number(l[1]) + 2) return;
          parts.push(pending.slice(at + l[0].length, at + l[0].length + Number(l[1])));
          at += l[0].length + Number(l[1]) + 2;
        }
        pending = pending.slice(at);
        const name = parts[0]!.toUpperCase();
        if (name === "INFO") socket.write("$22\r\n# Server\r\nloading:0\r\n\r\n");
        else if (name === "MGET") socket.write(store.mget);
        else socket.write("+OK\r\n");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(file, resolve));
  return { url: `unix://${file}`, close: () => server.close() };
}

/** vLLM's /v1/completions stream, by the request's model: `endless` 2^20 tokens, `evil-pattern` a JSON string of 40 a's and a b. */
async function startEngine(engine: { sent: number; aborted: boolean }): Promise<{ url: string; close(): void }> {
  const enc = loadHarmonyEncoding();
  const word = enc.encodeOrdinary(" hello")[0]!;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "openai/gpt-oss-20b", object: "model", max_model_len: 2_000_000 }] }));
        return;
      }
      let body: { model?: string } = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { model?: string };
      } catch {
        // not JSON: the short answer
      }
      const head = enc.encode("<|channel|>final<|message|>");
      const ids =
        body.model === "endless"
          ? [...head, ...new Array<number>(1 << 20).fill(word), ...enc.encode("<|return|>")]
          : [...head, ...enc.encodeOrdinary(JSON.stringify("a".repeat(40) + "b")), ...enc.encode("<|return|>")];
      res.writeHead(200, { "content-type": "text/event-stream" });
      engine.sent = 0;
      res.on("close", () => {
        if (!res.writableFinished) engine.aborted = true;
      });
      void (async () => {
        for (let at = 0; at < ids.length; at += 4) {
          if (res.destroyed) return;
          const piece = ids.slice(at, at + 4);
          const last = at + 4 >= ids.length;
          const ok = res.write(
            `data: ${JSON.stringify({ choices: [{ index: 0, text: "", finish_reason: last ? "stop" : null, token_ids: piece }], usage: null })}\n\n`,
          );
          engine.sent = Math.min(ids.length, at + 4);
          // as uvicorn does: wait for the reader to drain (encode/uvicorn, uvicorn/protocols/http/flow_control.py)
          if (!ok)
            await new Promise<void>((resolve) => {
              res.once("drain", resolve);
              res.once("close", resolve);
            });
        }
        res.end("data: [DONE]\n\n");
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// The service child and the runs.

interface Service {
  proc: ChildProcess;
  pid: number;
  port: number;
  grpcPort: number;
  stderr: string[];
  warnLines: string[];
}

const CLI = fileURLToPath(new URL("../../src/cli.js", import.meta.url));

async function startService(
  nodeFlags: string[],
  serveFlags: string[],
  cpus: string | undefined,
  upstream: string,
  store: string,
): Promise<Service> {
  // taskset execs node in place, so the pid stays the service's own
  const cmd = cpus ? ["taskset", "-c", cpus, process.execPath] : [process.execPath];
  const args = [
    ...cmd.slice(1),
    ...nodeFlags,
    CLI,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--grpc-port",
    "0",
    "--log-level",
    "info",
    // the OpenAI front on (the engine stand-in), so that (h)'s POST meets the access check and not a 404
    "--upstream",
    upstream,
    "--upstream-timeout-ms",
    "60000",
    // the shared store: the RESP peer of (i)
    "--cot-store",
    store,
    "--cot-store-timeout-ms",
    "100",
    "--slow-client-timeout-ms",
    "2000",
    // (n): 16 MiB over all the calls of one HTTP/2 connection (1,000 streams)
    "--max-connection-bytes",
    String(16 * MiB),
    ...serveFlags,
  ];
  const proc = spawn(cmd[0]!, args, { stdio: ["ignore", "pipe", "pipe"] });
  const svc: Service = { proc, pid: proc.pid!, port: 0, grpcPort: 0, stderr: [], warnLines: [] };
  createInterface({ input: proc.stderr! }).on("line", (l) => svc.stderr.length < 1000 && svc.stderr.push(l));
  svc.port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start: ${svc.stderr.join("\n")}`)), 60_000);
    proc.once("exit", (code) => reject(new Error(`the service exited (${code}): ${svc.stderr.join("\n")}`)));
    createInterface({ input: proc.stdout! }).on("line", (l) => {
      let rec: { msg?: string; port?: number; grpcPort?: number; level?: number } = {};
      try {
        rec = JSON.parse(l) as typeof rec;
      } catch {
        return;
      }
      if (rec.msg === "harmony-sidecar serving" && typeof rec.port === "number") {
        clearTimeout(timer);
        svc.grpcPort = rec.grpcPort ?? 0;
        resolve(rec.port);
      } else if ((rec.level ?? 0) >= 40 && svc.warnLines.length < 1000) svc.warnLines.push(l.slice(0, 300));
    });
  });
  return svc;
}

async function stopService(s: Service): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
  const exited = new Promise((resolve) => s.proc.once("exit", resolve));
  s.proc.kill("SIGTERM");
  const t = setTimeout(() => s.proc.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(t);
}

function healthz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", timeout: 5000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

async function runOnce(
  only: string,
  nodeFlags: string[],
  serveFlags: string[],
  cpus: string | undefined,
  log: (s: string) => void,
): Promise<Row[]> {
  const store = { mget: "*1\r\n$-1\r\n" };
  const engineState = { sent: 0, aborted: false };
  const peer = await startStorePeer(store);
  const engine = await startEngine(engineState);
  const svc = await startService(nodeFlags, serveFlags, cpus, engine.url, peer.url);
  const target: Target = {
    port: svc.port,
    http: `http://127.0.0.1:${svc.port}`,
    ws: `ws://127.0.0.1:${svc.port}/v1/stream`,
    grpc: `127.0.0.1:${svc.grpcPort}`,
    store,
    engine: engineState,
  };
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { port: svc.port, pid: svc.pid } });
  const reports: ProbeReport[] = [];
  let wake: (() => void) | null = null;
  worker.on("message", (r: ProbeReport) => {
    reports.push(r);
    wake?.();
  });
  const nextReport = () =>
    new Promise<ProbeReport>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no probe report in 90 s")), 90_000);
      const check = () => {
        const r = reports.shift();
        if (r) {
          clearTimeout(t);
          wake = null;
          resolve(r);
        } else wake = check;
      };
      check();
    });
  const rows: Row[] = [];
  try {
    await sleep(SETTLE_MS);
    for (const a of ATTACKS) {
      if (!only.includes(a.key)) continue;
      if (svc.proc.exitCode !== null || svc.proc.signalCode !== null) {
        log(`(${a.key}) skipped: the service is gone`);
        continue;
      }
      const send = a.prepare(target);
      await sleep(SETTLE_MS);
      const rssBefore = rssOf(svc.pid) ?? 0;
      const load0 = loadavg();
      worker.postMessage("begin");
      const t0 = performance.now();
      let answer: Answer;
      try {
        answer = await send();
      } catch (e) {
        answer = { code: `client error: ${(e as Error).message}`, bytes: 0 };
      }
      const durationMs = performance.now() - t0;
      // an attack over in less than MIN_WINDOW_MS is sent again, back to back, until then, so that the
      // probes see it (the answer and duration are the first one's)
      let repeats = 1;
      while (performance.now() - t0 < MIN_WINDOW_MS && repeats < 10_000) {
        try {
          await send();
        } catch {
          // counted as sent; the first answer is the one reported
        }
        repeats++;
      }
      if (repeats > 1) answer.note = `${answer.note ? `${answer.note}; ` : ""}sent ${repeats}× back to back for ${MIN_WINDOW_MS / 1000} s`;
      worker.postMessage("end");
      await sleep(SETTLE_MS);
      worker.postMessage("report");
      const probe = await nextReport();
      const up = svc.proc.exitCode === null && svc.proc.signalCode === null && (await healthz(svc.port));
      const row: Row = { key: a.key, name: a.name, answer, durationMs, probe, rssBefore, repeats, up, load: `${load0} → ${loadavg()}` };
      rows.push(row);
      log(
        `(${a.key}) ${answer.code} · ${answer.bytes} B · ${durationMs.toFixed(0)} ms · healthz p99 ${probe.p99.toFixed(1)} ms max ${probe.max.toFixed(1)} ms · RSS peak ${(probe.rssPeak / MiB).toFixed(0)} MiB · ${up ? "up" : "DOWN"}`,
      );
    }
  } finally {
    worker.postMessage("stop");
    await stopService(svc);
    await worker.terminate();
    engine.close();
    peer.close();
  }
  if (svc.warnLines.length) log(`service warnings: ${svc.warnLines.length}, first: ${svc.warnLines[0]}`);
  return rows;
}

const mib = (b: number | null) => (b === null ? "gone" : `${(b / MiB).toFixed(0)}`);
const ms = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : "–");
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function table(rows: Row[]): string {
  const out = [
    "| attack | coded answer | answer bytes | duration ms | /healthz probes (failed) | p50 ms | p99 ms | max ms | RSS before MiB | peak RSS MiB | RSS 2 s after MiB | up |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const r of rows) {
    out.push(
      `| (${r.key}) ${r.name} | ${r.answer.code}${r.answer.note ? ` (${r.answer.note})` : ""} | ${r.answer.bytes.toLocaleString("en")} | ${ms(r.durationMs)} | ${r.probe.probes} (${r.probe.failed}) | ${ms(r.probe.p50)} | ${ms(r.probe.p99)} | ${ms(r.probe.max)} | ${mib(r.rssBefore)} | ${mib(r.probe.rssPeak)} | ${mib(r.probe.rssEnd)} | ${r.up ? "yes" : "**no**"} |`,
    );
  }
  return out.join("\n");
}

/** Medians over runs, attack by attack; the answers as the set seen across runs. */
function medianTable(runs: Row[][]): string {
  const out = [
    "| attack | coded answer (all runs) | answer bytes | duration ms | sent × in the window | p50 ms | p99 ms [range] | max ms [range] | RSS before MiB | peak RSS MiB [range] | RSS 2 s after MiB | up (runs) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  const keys = [...new Set(runs.flat().map((r) => r.key))];
  for (const k of keys) {
    const rs = runs.flatMap((run) => run.filter((r) => r.key === k));
    const m = (f: (r: Row) => number) => median(rs.map(f));
    const range = (f: (r: Row) => number, g: (v: number) => string) => {
      const v = rs.map(f);
      return `[${g(Math.min(...v))}–${g(Math.max(...v))}]`;
    };
    const codes = [...new Set(rs.map((r) => r.answer.code))].join(" / ");
    out.push(
      `| (${k}) ${rs[0]!.name} | ${codes} | ${Math.round(m((r) => r.answer.bytes)).toLocaleString("en")} | ${ms(m((r) => r.durationMs))} | ${m((r) => r.repeats)} | ${ms(m((r) => r.probe.p50))} | ${ms(m((r) => r.probe.p99))} ${range((r) => r.probe.p99, ms)} | ${ms(m((r) => r.probe.max))} ${range((r) => r.probe.max, ms)} | ${mib(m((r) => r.rssBefore))} | ${mib(m((r) => r.probe.rssPeak))} ${range((r) => r.probe.rssPeak, mib)} | ${mib(m((r) => r.probe.rssEnd ?? NaN))} | ${rs.filter((r) => r.up).length} of ${rs.length} |`,
    );
  }
  return out.join("\n");
}

async function main(): Promise<void> {
  const opts = new Command()
    .option("--runs <n>", "runs, each with a fresh service (medians printed when more than one)", (v) => Number(v), 1)
    .option("--only <letters>", "run a subset of the attacks a–n", "abcdefghijklmn")
    .option("--server-flags <flags>", "extra node flags for the service child, space-separated", "")
    .option("--serve-flags <flags>", "extra `serve` flags for the service child, space-separated", "")
    .option(
      "--child-cpus <list>",
      "run the service on these CPUs only (taskset -c LIST); run the bench itself under taskset to keep it off them",
    )
    .option("--json-file <file>", "also write every run's rows as JSON to FILE")
    .parse()
    .opts<{ runs: number; only: string; serverFlags: string; serveFlags: string; childCpus?: string; jsonFile?: string }>();
  const nodeFlags = opts.serverFlags.split(" ").filter(Boolean);
  const serveFlags = opts.serveFlags.split(" ").filter(Boolean);
  const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
  // the service's heap limit, for its memory budget (75% of it by default)
  const heapLimit = await new Promise<number>((resolve) => {
    const p = spawn(process.execPath, [...nodeFlags, "-p", "v8.getHeapStatistics().heap_size_limit"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    let out = "";
    p.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    p.on("exit", () => resolve(Number(out.trim()) || 0));
  });
  const runs: Row[][] = [];
  for (let i = 0; i < opts.runs; i++) {
    log(`run ${i + 1} of ${opts.runs}, load ${loadavg()}`);
    runs.push(await runOnce(opts.only, nodeFlags, serveFlags, opts.childCpus, log));
  }
  const lines = [
    `Hostile bench — node ${process.version}, ${os.cpus()[0]?.model ?? "?"} × ${os.cpus().length}, ${opts.runs} run(s); ` +
      `the service's heap limit ${(heapLimit / MiB).toFixed(0)} MiB (memory budget 75%: ${((0.75 * heapLimit) / MiB).toFixed(0)} MiB), ` +
      `--max-connection-bytes 256 MiB; /healthz probed every ${PROBE_MS} ms, latency from when each probe was due` +
      `${opts.childCpus ? `; the service on CPUs ${opts.childCpus}` : ""}.`,
    "",
  ];
  runs.forEach((rows, i) => lines.push(`Run ${i + 1}:`, "", table(rows), ""));
  if (runs.length > 1) lines.push(`Medians of ${runs.length} runs:`, "", medianTable(runs), "");
  console.log(lines.join("\n"));
  if (opts.jsonFile) writeFileSync(opts.jsonFile, JSON.stringify({ node: process.version, heapLimit, runs }, null, 2));
}

// last, so that every declaration above is initialised
if (!isMainThread) {
  const d = workerData as { port: number; pid: number };
  probeThread(d.port, d.pid);
} else {
  await main();
}
