/**
 * Issue #31's attacks, the engine as the peer that misbehaves
 * (bench/peers/hostile-engine.ts as the service's --upstream, scripted before
 * each request; bench/hostile/main.ts runs them), and the control row (0):
 * no attack, /healthz alone, the machine's own noise beside the other rows.
 */
import http from "node:http";
import { loadHarmonyEncoding } from "../../src/vocab/index.js";
import { MiB, MIN_WINDOW_MS, sleep, type Answer, type Attack } from "./common.js";
import { chat, postStream } from "./client.js";
import { UPSTREAM_DEADLINE_MS, UPSTREAM_TIMEOUT_MS } from "./service.js";

const enc = loadHarmonyEncoding();
/** The ids the engine's answers are made of: a final message's header, " hi" (one id), <|return|>. */
export const HEAD = enc.encode("<|channel|>final<|message|>");
export const HI = enc.encode(" hi")[0]!;
export const RETURN = enc.encode("<|return|>")[0]!;
const ASK = { model: "gpt-oss", messages: [{ role: "user", content: "hi" }] };

export const CONTROL: Attack = {
  key: "0",
  name: "none: /healthz alone for 1 s (the machine's own noise, for the rows below)",
  prepare() {
    return async () => {
      // a timer may fire a little early: the whole window, so that it is not sent again
      const start = performance.now();
      while (performance.now() - start < MIN_WINDOW_MS) await sleep(MIN_WINDOW_MS + 1 - (performance.now() - start));
      return { code: "–", bytes: 0 };
    };
  },
};

export const ATTACKS_31: Attack[] = [
  {
    key: "o",
    name: "engine ignores max_tokens, streams ids forever; chat with max_tokens 1000",
    prepare(t) {
      return () => {
        t.engine.script({ kind: "forever", ids: new Array<number>(16).fill(HI) });
        return chat(t, { ...ASK, max_tokens: 1000 });
      };
    },
  },
  {
    key: "p",
    name: "engine ignores max_tokens, streams ids forever; streamed chat with max_tokens 1000",
    prepare(t) {
      const body = Buffer.from(JSON.stringify({ ...ASK, max_tokens: 1000, stream: true }));
      return () => {
        t.engine.script({ kind: "forever", ids: new Array<number>(16).fill(HI) });
        return postStream(t, "/v1/chat/completions", body);
      };
    },
  },
  {
    key: "q",
    name: "one engine event of 300,000 ids",
    prepare(t) {
      const ids = [...HEAD, ...new Array<number>(300_000).fill(HI), RETURN];
      return async () => {
        t.engine.script({ kind: "huge_event", ids });
        const a = await chat(t, ASK);
        return { ...a, note: `${a.bytes.toLocaleString("en")} B of answer for 900,000 characters` };
      };
    },
  },
  {
    key: "r",
    name: 'ids that are not token ids (-1, 1.5, "x", 2^32, null)',
    prepare(t) {
      return async () => {
        const seen = new Set<string>();
        let bytes = 0;
        for (const bad of [-1, 1.5, "x", 2 ** 32, null]) {
          t.engine.script({ kind: "bad_id", bad });
          const a = await chat(t, ASK);
          seen.add(a.code);
          bytes += a.bytes;
        }
        return { code: [...seen].join(" / "), bytes };
      };
    },
  },
  {
    key: "s",
    name: "one engine event that never ends, 4 KiB pieces up to 17 MiB",
    prepare(t) {
      return () => {
        t.engine.script({ kind: "unterminated", pieceBytes: 4096, totalBytes: 17 * MiB });
        return chat(t, ASK);
      };
    },
  },
  {
    key: "t",
    name: `engine sends SSE comments every 300 ms and nothing else (--upstream-timeout-ms ${UPSTREAM_TIMEOUT_MS})`,
    prepare(t) {
      return () => {
        t.engine.script({ kind: "comments", intervalMs: 300 });
        return chat(t, ASK);
      };
    },
  },
  {
    key: "u",
    name: `engine sends empty events every 50 ms, never finishing (--upstream-deadline-ms ${UPSTREAM_DEADLINE_MS})`,
    prepare(t) {
      return () => {
        t.engine.script({ kind: "no_progress", intervalMs: 50 });
        return chat(t, ASK);
      };
    },
  },
  {
    key: "v",
    name: "GET /metrics while the engine's /metrics is 80 MB",
    prepare(t) {
      return () =>
        new Promise<Answer>((resolve, reject) => {
          t.engine.metricsBytes = 80 * MiB;
          http
            .get(`${t.http}/metrics`, (res) => {
              let bytes = 0;
              let skipped = "";
              res.on("data", (c: Buffer) => {
                bytes += c.length;
                const m = /left out \(([a-z_]+)\)/.exec(c.toString("utf8"));
                if (m) skipped = m[1]!;
              });
              res.on("end", () => {
                t.engine.metricsBytes = 0;
                resolve({ code: `HTTP ${res.statusCode}${skipped ? `, engine series left out (${skipped})` : ""}`, bytes });
              });
              res.on("error", reject);
            })
            .on("error", reject);
        });
    },
  },
];
