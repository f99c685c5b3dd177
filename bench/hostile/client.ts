/**
 * The hostile bench's clients (bench/hostile/main.ts): an HTTP POST and a
 * streamed one, a WebSocket exchange, and the service's own counters read
 * from its /metrics; each bounded in time, each answer summed up as its
 * coded answer and its bytes.
 */
import http from "node:http";
import WebSocket from "ws";
import { schema } from "../../src/protocol/schema.js";
import { MiB, type Answer, type Target } from "./common.js";

export const nested = (depth: number, inner: string) => "[".repeat(depth) + inner + "]".repeat(depth);

/** Error codes, recovery kinds and done events of answer frames, counted. */
export function summarise(events: Record<string, unknown>[]): Map<string, number> {
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

export const describe = (seen: Map<string, number>) => [...seen].map(([k, n]) => (n > 1 ? `${k} ×${n}` : k)).join(", ") || "(no events)";

/** One HTTP POST; its status, its error code or finish reasons (or the ids' count), and the answer's bytes. */
export function post(t: Target, path: string, contentType: string, body: Buffer): Promise<Answer> {
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
            const v = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
              error?: { code?: string };
              ids?: unknown[];
              choices?: { finish_reason?: unknown }[];
            };
            if (v.error?.code) code += ` ${v.error.code}`;
            const finishes = new Set((v.choices ?? []).map((c) => c.finish_reason).filter((f) => typeof f === "string"));
            if (finishes.size) code += ` finish ${[...finishes].join(", ")}`;
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
export function wsExchange(
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

export const hasError = (_n: number, ev: Record<string, unknown>[]) => ev.some((e) => e.error || e.type === "error");
export const hasDone = (_n: number, ev: Record<string, unknown>[]) => ev.some((e) => e.done || e.type === "done");

/** A streamed POST: its status, the error codes and finish reasons of its last 64 KiB, and its bytes. */
export function postStream(t: Target, path: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${t.http}${path}`,
      { method: "POST", headers: { "content-type": "application/json", "content-length": body.length }, timeout: 120_000 },
      (res) => {
        let bytes = 0;
        let tail = "";
        const codes = new Set<string>();
        res.on("data", (c: Buffer) => {
          bytes += c.length;
          // the last 64 KiB are enough to find the finish and an error event
          tail = (tail + c.toString("utf8")).slice(-65536);
        });
        res.on("end", () => {
          for (const m of tail.matchAll(/"code":"([a-z_]+)"/g)) codes.add(m[1]!);
          for (const m of tail.matchAll(/"finish_reason":"([a-z_]+)"/g)) codes.add(`finish ${m[1]!}`);
          resolve({ code: `HTTP ${res.statusCode}${codes.size ? ` ${[...codes].join(", ")}` : ""}`, bytes });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer in 120 s")));
    req.on("error", reject);
    req.end(body);
  });
}

/** A chat request's answer (non-streamed): its status, error code or finish reasons. */
export function chat(t: Target, body: object): Promise<Answer> {
  return post(t, "/v1/chat/completions", "application/json", Buffer.from(JSON.stringify(body)));
}

/** prom-client's event-loop delay of the service (monitorEventLoopDelay, 10 ms resolution), started over by each scrape. */
export const LOOP_LAG = "harmony_process_nodejs_eventloop_lag_max_seconds";

/**
 * The value of one series of the service's own /metrics (a counter's labels as written, e.g.
 * `transport="ws"`, or none); 0 when the series is not there yet. The service's word for what it did,
 * where the attacker's socket cannot tell (a paused socket reads nothing, not even its end). Every read
 * also keeps the most event-loop delay it saw in `t.loopLag`, since each scrape starts that one over.
 */
export async function serviceSeries(t: Target, name: string, labels = ""): Promise<number> {
  const res = await fetch(`${t.http}/metrics`, { signal: AbortSignal.timeout(10_000) });
  const lines = (await res.text()).split("\n");
  const value = (head: string) => {
    const line = lines.find((l) => l.startsWith(head));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
  };
  const lag = value(`${LOOP_LAG} `);
  if (Number.isFinite(lag)) t.loopLag.maxS = Math.max(t.loopLag.maxS, lag);
  return value(labels ? `${name}{${labels}} ` : `${name} `);
}

/** Until `f` holds (polled every `everyMs`) or `ms` have passed; whether it held. */
export async function until(f: () => boolean | Promise<boolean>, ms: number, everyMs = 20): Promise<boolean> {
  const end = performance.now() + ms;
  for (;;) {
    if (await f()) return true;
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
