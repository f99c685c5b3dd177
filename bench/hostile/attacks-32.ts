/**
 * Issue #32's classes (bench/hostile/main.ts runs them): the shared store's
 * replies of the wrong type, a backtracking answer pattern, clients that never
 * read (HTTP and WebSocket), request targets the proxy and the access check
 * could read apart, many gRPC calls on one connection.
 */
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { HARMONY_SERVICE } from "../../src/protocol/grpc-methods.js";
import { schema } from "../../src/protocol/schema.js";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { sleep, type Answer, type Attack, type Target } from "./common.js";
import { describe, post, serviceSeries, until } from "./client.js";

const enc = loadHarmonyEncoding();
const word = enc.encodeOrdinary(" hello")[0]!;
const RETURN = enc.encode("<|return|>")[0]!;
const TOTAL = 1 << 20;
const SLOW = "harmony_slow_clients_dropped_total";

/** POST a request on a raw socket, then never read a byte of the answer. */
function unreadRequest(t: Target, path: string, text: string): net.Socket {
  const socket = net.connect(t.port, "127.0.0.1", () => {
    socket.pause();
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${t.port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    );
  });
  socket.on("error", () => undefined);
  return socket;
}

export const ATTACKS_32: Attack[] = [
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
      const ids = [...enc.encode("<|channel|>final<|message|>"), ...enc.encodeOrdinary(JSON.stringify("a".repeat(40) + "b")), RETURN];
      const body = JSON.stringify({
        model: "gpt-oss",
        messages: [{ role: "user", content: "say a" }],
        response_format: { type: "json_schema", json_schema: { name: "a", schema: { type: "string", pattern: "^(a+)+$" } } },
      });
      return async () => {
        t.engine.script({ kind: "ok", ids });
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
      // the engine's answer is scripted before the request: whatever the request's `model` (the sidecar sends the
      // engine's own model id), the engine streams 2^20 ids, 4 an event, each written once its socket has room
      const ids = [...enc.encode("<|channel|>final<|message|>"), ...new Array<number>(TOTAL).fill(word), RETURN];
      const text = JSON.stringify({ model: "gpt-oss", messages: [{ role: "user", content: "go on" }], stream: true });
      return async () => {
        t.engine.script({ kind: "ok", ids, perEvent: 4 });
        const dropped0 = await serviceSeries(t, SLOW, 'transport="http"');
        const { requests, aborted } = t.engine.stats;
        const started = performance.now();
        const socket = unreadRequest(t, "/v1/chat/completions", text);
        try {
          // the engine's request ends (the sidecar went away from it) or the whole answer is sent, within 60 s
          const ended = await until(
            () => t.engine.stats.aborted > aborted || (t.engine.stats.requests > requests && t.engine.stats.sent === ids.length),
            60_000,
          );
          const endedMs = performance.now() - started;
          const sent = t.engine.stats.sent;
          // the service's word that it dropped the client (the client's paused socket cannot tell)
          const dropped = (await serviceSeries(t, SLOW, 'transport="http"')) - dropped0;
          const code = !ended
            ? "not dropped in 60 s"
            : t.engine.stats.aborted > aborted
              ? `${dropped > 0 ? "dropped as a slow client" : "not counted as a slow client"}, the engine's request ended`
              : "the whole answer sent (not held back)";
          return {
            code,
            bytes: 0,
            note: `engine sent ${sent.toLocaleString("en")} of ${ids.length.toLocaleString("en")} ids; its request ended ${(endedMs / 1000).toFixed(1)} s after the client's; ${SLOW}{http} +${dropped}`,
          };
        } finally {
          socket.destroy();
        }
      };
    },
  },
  {
    key: "l",
    name: "WebSocket client that never reads its openai.chat answers (600 frames of 5,000 ids)",
    prepare(t) {
      const first = JSON.stringify({
        ops: [
          { open: { stream: "a", format: "openai.chat" } },
          { tokens: { stream: "a", ids: enc.encode("<|channel|>final<|message|>") } },
        ],
      });
      // ~30 MB of answers: more than --max-buffered-bytes and the loopback sockets' kernel buffers together
      const frame = Buffer.from(JSON.stringify({ ops: [{ tokens: { stream: "a", ids: new Array<number>(5000).fill(word) } }] }));
      return () =>
        new Promise<Answer>((resolve, reject) => {
          // the mask all zeros: ws then sends the frames as they are, and this thread's CPU is not spent on 24 MB of
          // masking while the probes measure the service (the service unmasks as it does any client's)
          const ws = new WebSocket(t.ws, { perMessageDeflate: false, generateMask: (mask: Buffer) => void mask.fill(0) });
          let opened = false;
          // once open, a cut socket is an answer (close 1006), not the client's failure
          ws.on("error", (e) => (opened ? undefined : reject(e)));
          const closed = new Promise<number>((r) => ws.once("close", (code: number) => r(code)));
          ws.on("open", () => {
            opened = true;
            void (async () => {
              const dropped0 = await serviceSeries(t, SLOW, 'transport="ws"');
              ws.pause(); // never read a byte of the answers
              ws.send(first);
              for (let i = 0; i < 600; i++) ws.send(frame, { binary: false });
              const started = performance.now();
              // the service's word that it dropped the client: its counter, read every 250 ms for at most 60 s
              let dropped = 0;
              const seen = await until(
                async () => (dropped = (await serviceSeries(t, SLOW, 'transport="ws"')) - dropped0) > 0,
                60_000,
                250,
              );
              const droppedMs = performance.now() - started;
              // then what the client is told once it reads: a close code (4409), or 1006 if the socket was cut first
              ws.resume();
              const code = await Promise.race([closed, sleep(10_000).then(() => null)]);
              ws.terminate();
              resolve({
                code: seen ? `dropped as a slow client; close ${code ?? "not seen in 10 s"}` : "not dropped in 60 s",
                bytes: 0,
                note: `${SLOW}{ws} +${dropped} ${(droppedMs / 1000).toFixed(1)} s after the last frame was queued`,
              });
            })().catch(reject);
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
