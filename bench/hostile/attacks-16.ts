/**
 * Issue #16's attacks (bench/hostile/main.ts runs them): deep JSON, huge
 * renders, stop ids by the hundred thousand, empty ops by the million, huge
 * stream names, a foreign Origin.
 */
import WebSocket from "ws";
import { MiB, type Attack } from "./common.js";
import { hasDone, hasError, nested, post, wsExchange } from "./client.js";

export const ATTACKS_16: Attack[] = [
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
];
