/**
 * The upstream SSE reader against a real HTTP server that misbehaves the way a
 * broken or hostile engine could: an event that never ends, a body that never
 * stops, an error answer that is huge or nested. Each must end in a coded
 * UpstreamError with bounded memory, not a process that holds all of it.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ChunkTemplate } from "../../src/upstream/chunk-template.js";
import { UpstreamError } from "../../src/upstream/engine.js";
import { AFTER_DONE_MS, BODY_HIGH_WATER_BYTES, getText, HeldBody, readEvents, SseEvents, streamSse } from "../../src/upstream/sse.js";

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server on 127.0.0.1:0 whose every answer is `handler`'s. */
async function serve(handler: http.RequestListener): Promise<string> {
  const s = http.createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** Write `pieces` pieces of `piece` then end, stopping when the client goes away. */
function stream(res: http.ServerResponse, head: string, piece: string, pieces: number, status = 200) {
  res.writeHead(status, { "content-type": "text/event-stream" });
  res.write(head);
  let sent = 0;
  const more = () => {
    while (sent < pieces && !res.destroyed) {
      sent++;
      if (!res.write(piece)) return void res.once("drain", more);
    }
    res.end();
  };
  more();
}

async function collect(
  base: string,
  maxEventBytes?: number,
  clocks: { idleTimeoutMs?: number; deadlineMs?: number } = {},
  template?: ChunkTemplate,
) {
  const chunks: Record<string, unknown>[] = [];
  const opts = { baseUrl: base, idleTimeoutMs: 5000, signal: new AbortController().signal, maxEventBytes, template, ...clocks };
  try {
    await streamSse("/v1/completions", {}, opts, (c) => void chunks.push(c));
    return { chunks, error: null };
  } catch (e) {
    return { chunks, error: e as UpstreamError };
  }
}

describe("streamSse", () => {
  it("an event that never ends is refused once it passes the limit (upstream_bad_response)", async () => {
    const base = await serve((_req, res) => stream(res, 'data: {"ok":1}\n\ndata: "', "x".repeat(64 * 1024), 64));
    const r = await collect(base, 1024 * 1024);
    expect(r.chunks).toEqual([{ ok: 1 }]);
    expect(r.error).toBeInstanceOf(UpstreamError);
    expect([r.error?.status, r.error?.code]).toEqual([502, "upstream_bad_response"]);
  });

  it("events split across pieces at every byte, and CRLF blank lines, still come out whole", async () => {
    const text = 'data: {"a":1}\r\n\r\ndata: {"b":2}\n\n: comment\n\ndata: {"c":\ndata: 3}\n\ndata: [DONE]\n\n';
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const next = () => (i < text.length ? res.write(text[i++], () => setImmediate(next)) : res.end());
      next();
    });
    const r = await collect(base);
    expect(r.error).toBeNull();
    expect(r.chunks).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });

  it("a huge or deeply nested error answer gives a short message", async () => {
    const deep = await serve((_req, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(`{"error":${"[".repeat(100000)}${"]".repeat(100000)}}`);
    });
    const r = await collect(deep);
    expect([r.error?.status, r.error?.code]).toEqual([502, "upstream_error"]);
    expect(r.error!.message.length).toBeLessThan(600);
    const huge = await serve((_req, res) => stream(res, "", "y".repeat(64 * 1024), 256, 503));
    const h = await collect(huge);
    expect([h.error?.status, h.error?.code]).toEqual([502, "upstream_error"]);
    expect(h.error!.message.length).toBeLessThan(600);
  });
});

/** A chunk template that counts the events it read in place. */
class CountingTemplate extends ChunkTemplate {
  hits = 0;
  override read(bytes: Buffer, start: number, end: number) {
    const r = super.read(bytes, start, end);
    if (r !== null) this.hits++;
    return r;
  }
}

describe("streamSse with a chunk template (src/upstream/chunk-template.ts)", () => {
  it("a hostile engine's vLLM-shaped stream gives the same chunks and the same error read in place as read as text", async () => {
    // vLLM's streamed completion chunk (test/upstream/chunk-template.test.ts names the source), and what an engine
    // gone wrong may put in it: escapes, surrogates, invalid UTF-8, a key twice, repetition, a huge step, deep nesting
    const head = '{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"';
    const step = (text: string, ids: string, prompt = "null") =>
      Buffer.from(
        `data: ${head}${text}","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":${prompt},"token_ids":[${ids}]}]}\n\n`,
      );
    const parts: Buffer[] = [step("", "1", "[1,2]")];
    const texts = ["a", "\\n", "\\u00e9", "é", "🦀", "\\ud83e\\udd80", "", '\\"', "b\\tc"];
    for (let k = 0; k < 2000; k++) parts.push(step(texts[k % texts.length]!, String(k % 7 === 0 ? `${k},${k + 1}` : k)));
    // invalid UTF-8 in the text, and a text the later key overrides
    parts.push(
      Buffer.concat([step("x", "5").subarray(0, 6 + head.length), Buffer.from([0xff, 0xc3]), step("x", "5").subarray(7 + head.length)]),
    );
    parts.push(
      Buffer.from(
        `data: ${head}a","text" :"x","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":[9]}]}\n\n`,
      ),
    );
    parts.push(step("long", Array.from({ length: 300_000 }, (_, i) => i % 200_000).join(",")));
    parts.push(Buffer.from(`data: {"choices":[],"deep":${"[".repeat(100_000)}${"]".repeat(100_000)}}\n\ndata: [DONE]\n\n`));
    const body = Buffer.concat(parts);
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(body);
    });
    const asText = await collect(base);
    const template = new CountingTemplate();
    const inPlace = await collect(base, undefined, {}, template);
    const hits = template.hits;
    // (read as text: the first, the ones the template cannot read, and an event cut by a piece's end)
    expect(hits).toBeGreaterThan(1900);
    expect(asText.chunks.length).toBe(2004);
    expect(inPlace.chunks).toStrictEqual(asText.chunks);
    expect([inPlace.error?.code, inPlace.error?.message]).toEqual([asText.error?.code, asText.error?.message]);
    expect(inPlace.error?.code).toBe("upstream_bad_response");
    // what the engine's JSON has: the later key's text, the invalid bytes as U+FFFD, every id of the huge step
    expect((asText.chunks[2002]!.choices as { text: string }[])[0]!.text).toBe("x");
    expect((asText.chunks[2001]!.choices as { text: string }[])[0]!.text).toBe("\ufffd\ufffd");
    expect((asText.chunks[2003]!.choices as { token_ids: number[] }[])[0]!.token_ids).toHaveLength(300_000);
  });

  it("a request's first piece of many events: all but the first ones read in place (the template learnt as they are split)", async () => {
    // vLLM's chunk, as above; the first carries the prompt's ids, so it is no template; a body read behind the engine
    // comes so: 200 steps in one piece, all split before run() takes the first
    const head = '{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"';
    const step = (text: string, ids: string, prompt = "null") =>
      `data: ${head}${text}","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":${prompt},"token_ids":[${ids}]}]}\n\n`;
    let body = step("", "1", "[1,2,3]");
    for (let k = 0; k < 200; k++) body += step(` w${k}`, String(k));
    body += "data: [DONE]\n\n";
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(body);
    });
    const asText = await collect(base);
    const template = new CountingTemplate();
    const inPlace = await collect(base, undefined, {}, template);
    const hits = template.hits;
    expect(inPlace.error).toBeNull();
    expect(inPlace.chunks).toStrictEqual(asText.chunks);
    expect(inPlace.chunks).toHaveLength(201);
    // the first two read as text (the second is the one learnt from), and any event a piece's end cut (the body's
    // 57 KB may come in a few socket reads)
    expect(hits).toBeGreaterThan(190);
  });
});

describe("streamSse's dispatcher", () => {
  it("its own: a global dispatcher set by anything else in the process (Node's fetch sets its older undici's) is not used", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end('data: {"ok":1}\n\ndata: [DONE]\n\n');
    });
    // undici keeps the global dispatcher under this symbol, shared by every copy of it in the process
    const key = Symbol.for("undici.globalDispatcher.1");
    const g = globalThis as unknown as Record<symbol, unknown>;
    const was = g[key];
    g[key] = {
      dispatch() {
        throw new Error("the global dispatcher was used");
      },
    };
    try {
      expect(await collect(base)).toEqual({ chunks: [{ ok: 1 }], error: null });
    } finally {
      g[key] = was;
    }
  });
});

describe("SseEvents", () => {
  it("gives the same events however the bytes are cut into pieces, CRLF and multi-byte characters included (property)", () => {
    const text = 'data: {"a":"☀️"}\r\n\r\n: keep-alive\n\nevent: x\ndata: {"b":\ndata: "喵"}\n\ndata:{"c":3}\n\nid: 7\n\n';
    const bytes = Buffer.from(text);
    const whole: string[] = [];
    new SseEvents(1 << 20).push(bytes, (d) => whole.push(d));
    expect(whole).toEqual(['{"a":"☀️"}', '{"b":\n"喵"}', '{"c":3}']);
    fc.assert(
      fc.property(fc.array(fc.nat(bytes.length), { maxLength: 12 }), (cuts) => {
        const at = [...new Set(cuts)].sort((a, b) => a - b);
        const got: string[] = [];
        const r = new SseEvents(1 << 20);
        let from = 0;
        for (const c of [...at, bytes.length]) {
          r.push(bytes.subarray(from, c), (d) => got.push(d));
          from = c;
        }
        expect(got).toEqual(whole);
      }),
    );
  });

  it("offers the common event in place again once nothing is held: after an event cut by the last piece, a comment or a CRLF event", () => {
    const r = new SseEvents(1000);
    const text: string[] = [];
    const inPlace: string[] = [];
    const bytes = (piece: Buffer, start: number, end: number) => (inPlace.push(piece.toString("utf8", start, end)), true);
    r.push(Buffer.from('data: {"cut":'), (d) => text.push(d), bytes);
    r.push(
      Buffer.from('1}\n\ndata: {"a":1}\n\n: comment\n\ndata: {"b":2}\n\ndata: {"c":3}\r\n\r\ndata: {"d":4}\n\n'),
      (d) => text.push(d),
      bytes,
    );
    expect(text).toEqual(['{"cut":1}', '{"c":3}']);
    expect(inPlace).toEqual(['{"a":1}', '{"b":2}', '{"d":4}']);
  });

  it("an event held past its bound is refused, counted across pieces (one line or many data lines)", () => {
    const r = new SseEvents(1000);
    expect(() => {
      for (let i = 0; i < 20; i++) r.push(Buffer.from("x".repeat(100)), () => undefined);
    }).toThrow(/over 1000 bytes/);
    const lines = new SseEvents(1000);
    expect(() => {
      for (let i = 0; i < 20; i++) lines.push(Buffer.from(`data: ${"y".repeat(90)}\n`), () => undefined);
    }).toThrow(/over 1000 bytes/);
  });
});

describe("streamSse's clocks", () => {
  it("SSE comments are no sign of life: an engine that sends only comments gets the idle timeout (504)", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const t = setInterval(() => res.write(": keep-alive\n\n"), 30);
      res.on("close", () => clearInterval(t));
    });
    const r = await collect(base, undefined, { idleTimeoutMs: 300 });
    expect([r.error?.status, r.error?.code]).toEqual([504, "upstream_timeout"]);
  });

  it("the silence is timed from the last event: a stream far longer than the idle timeout whose events keep coming is read whole", async () => {
    // 12 events 150 ms apart (1.8 s) against an idle timeout of 1 s: each gap well inside it, the whole far past it
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let n = 0;
      const t = setInterval(() => {
        if (++n <= 12) res.write(`data: {"n":${n}}\n\n`);
        else {
          clearInterval(t);
          res.end("data: [DONE]\n\n");
        }
      }, 150);
      res.on("close", () => clearInterval(t));
    });
    const r = await collect(base, undefined, { idleTimeoutMs: 1000 });
    expect(r.error).toBeNull();
    expect(r.chunks.map((c) => c.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it("the silence is timed again after events: an engine that goes quiet mid-stream gets the idle timeout (504)", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"n":1}\n\n');
      setTimeout(() => res.write('data: {"n":2}\n\n'), 200);
      // then nothing, the connection kept open
    });
    // (the second event 200 ms in, well inside the timeout on a slow machine too)
    const r = await collect(base, undefined, { idleTimeoutMs: 1000 });
    expect([r.error?.status, r.error?.code]).toEqual([504, "upstream_timeout"]);
    expect(r.chunks.map((c) => c.n)).toEqual([1, 2]);
  });

  it("no silence of the engine's while the consumer holds the stream back, however long: the clock starts again when it takes the next event", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');
    });
    const seen: unknown[] = [];
    const opts = { baseUrl: base, idleTimeoutMs: 200, signal: new AbortController().signal };
    // the first event held for three idle timeouts
    await streamSse("/v1/completions", {}, opts, (c) => {
      seen.push(c.n);
      return c.n === 1 ? new Promise<void>((r) => setTimeout(r, 600)) : undefined;
    });
    expect(seen).toEqual([1, 2]);
  });

  it("events that never end get the deadline (504 upstream_deadline), whatever they hold", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const t = setInterval(() => res.write('data: {"choices":[]}\n\n'), 20);
      res.on("close", () => clearInterval(t));
    });
    const r = await collect(base, undefined, { idleTimeoutMs: 5000, deadlineMs: 400 });
    expect([r.error?.status, r.error?.code]).toEqual([504, "upstream_deadline"]);
    expect(r.chunks.length).toBeGreaterThan(0);
  });

  it("a 401 or 403 from the engine is a 502 that names --upstream-api-key", async () => {
    const base = await serve((_req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end('{"error":"Unauthorized"}');
    });
    const r = await collect(base);
    expect([r.error?.status, r.error?.code]).toEqual([502, "upstream_unauthorized"]);
    expect(r.error?.message).toMatch(/--upstream-api-key/);
  });
});

describe("getText", () => {
  it("a body past the limit is refused (upstream_bad_response), not held", async () => {
    const base = await serve((_req, res) => stream(res, "", "z".repeat(1024 * 1024), 17));
    await expect(getText(base, "/v1/models", 5000)).rejects.toMatchObject({ status: 502, code: "upstream_bad_response" });
    const ok = await serve((_req, res) => res.end('{"data":[]}'));
    expect(await getText(ok, "/v1/models", 5000)).toMatchObject({ status: 200, body: '{"data":[]}' });
  });
});

/**
 * The control a {@link HeldBody} is given, as undici's parser answers it: a
 * feeder pushes its pieces one after another, synchronously, until the body
 * pauses it (undici's onData answered false), and a resume feeds again at
 * once (undici parses what the socket holds inside resume()). Aborts and
 * pauses are counted.
 */
class Feeder {
  paused = false;
  pauses = 0;
  aborts = 0;
  /** The most the body held unread after a push. */
  held = 0;
  private sent = 0;
  readonly body: HeldBody = new HeldBody({
    pause: () => {
      this.paused = true;
      this.pauses++;
    },
    resume: () => {
      this.paused = false;
      this.feed();
    },
    abort: () => void this.aborts++,
  });
  constructor(
    private readonly pieces: Buffer[],
    private readonly end = true,
  ) {}
  feed(): void {
    while (!this.paused && this.sent < this.pieces.length && !this.body.closed) {
      const piece = this.pieces[this.sent++]!;
      this.body.push(piece);
      this.held = Math.max(this.held, this.body.heldBytes);
    }
    if (this.sent === this.pieces.length && this.end) this.body.end();
  }
}

/** readEvents with no clocks and no drained hook; `done`: [DONE] needed. */
const readBody = (body: HeldBody, onEvent: (c: Record<string, unknown>) => Promise<void> | undefined, done = false) =>
  readEvents(
    body,
    { baseUrl: "http://unused", idleTimeoutMs: 60_000, signal: new AbortController().signal, done },
    done,
    onEvent,
    undefined,
    { refresh: () => undefined, hold: () => undefined, clocks: () => null },
  );

describe("readEvents against a body that comes faster than it is read", () => {
  it("every HTTP chunk of a body that comes faster than it is read, in order, and undici held back at the high-water mark meanwhile", async () => {
    const N = 20_000;
    const events = Array.from({ length: N }, (_, i) => Buffer.from(`data: {"i":${i},"choices":[{"index":0,"token_ids":[${i}]}]}\n\n`));
    const feeder = new Feeder(events);
    const seen: number[] = [];
    let holds = 0;
    const reading = readBody(feeder.body, (c) => {
      seen.push(c.i as number);
      // a consumer behind every 100th event (a turn of its own): the body is left unread meanwhile
      if ((c.i as number) % 100 !== 99) return undefined;
      holds++;
      return new Promise<void>((r) => setImmediate(r));
    });
    feeder.feed();
    await reading;
    expect(seen).toEqual(events.map((_, i) => i));
    expect(holds).toBe(N / 100);
    // ~60 bytes an event, 1.2 MB in all, pushed at once: paused at 64 KiB unread, again each time it is read and resumed
    expect(feeder.pauses).toBeGreaterThanOrEqual(Math.floor((N * 60) / BODY_HIGH_WATER_BYTES) - 1);
    // and resumed once what it held was read whole, not once an HTTP chunk (~N pauses: undici parsing the socket's
    // buffer again for each ~60-byte chunk, bench/hostile (k))
    expect(feeder.pauses).toBeLessThan(N / 100);
    // never more held than the high-water mark and the piece that passed it
    expect(feeder.held).toBeLessThan(BODY_HIGH_WATER_BYTES + 100);
    expect(feeder.aborts).toBe(0);
  });

  it("splits a piece of megabytes a slice at a time: the consumer holds the body back inside the piece, and the end waits for the rest", async () => {
    // one piece of ~2.6 MB (a body that held everything the engine ran ahead by), then the end
    const N = 40_000;
    const text = Array.from({ length: N }, (_, i) => `data: {"i":${i},"choices":[{"index":0,"token_ids":[${i}]}]}\n\n`).join("");
    const feeder = new Feeder([Buffer.from(text)]);
    const seen: number[] = [];
    // which events were given in the same turn as the one before (no hold between them)
    let runs = 0;
    let inTurn = false;
    const reading = readBody(feeder.body, (c) => {
      seen.push(c.i as number);
      if (!inTurn) {
        inTurn = true;
        runs++;
      }
      // a consumer behind every 1,000th event: the reading of the piece stops there and resumes after
      if ((c.i as number) % 1000 !== 999) return undefined;
      return new Promise<void>((r) =>
        setImmediate(() => {
          inTurn = false;
          r();
        }),
      );
    });
    feeder.feed();
    await reading;
    // every event, in order, none after the end was read too early
    expect(seen).toEqual(Array.from({ length: N }, (_, i) => i));
    expect(runs).toBeGreaterThanOrEqual(N / 1000);
  });

  it("an engine that writes faster than the consumer takes its events is held back through TCP (its write answers false), and nothing is lost", async () => {
    // the consumer takes nothing after its first event until the engine's socket is full
    let full!: () => void;
    const isFull = new Promise<void>((r) => (full = r));
    const N = 200_000;
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const more = () => {
        while (i < N) {
          if (!res.write(`data: {"i":${i++}}\n\n`)) {
            full();
            return void res.once("drain", more);
          }
        }
        res.end("data: [DONE]\n\n");
      };
      more();
    });
    const seen: number[] = [];
    const opts = { baseUrl: base, idleTimeoutMs: 60_000, signal: new AbortController().signal };
    await streamSse("/v1/completions", {}, opts, (c) => {
      seen.push(c.i as number);
      return seen.length === 1 ? isFull : undefined;
    });
    expect(seen.length).toBe(N);
    expect(seen.every((v, i) => v === i)).toBe(true);
  });
});

describe("the body after [DONE]", () => {
  it("a body that ends after [DONE] is read to its end, not destroyed before it (no abort of a finished request)", async () => {
    // [DONE] and the body's end in the same read, as an engine's last write gives them
    const feeder = new Feeder([Buffer.from('data: {"a":1}\n\ndata: [DONE]\n\n')]);
    const seen: Record<string, unknown>[] = [];
    const reading = readBody(feeder.body, (c) => void seen.push(c), true);
    feeder.feed();
    await reading;
    expect(seen).toEqual([{ a: 1 }]);
    expect(feeder.body.closed).toBe(true);
    expect(feeder.aborts).toBe(0);
  });

  it("a body that goes on after [DONE] is read and dropped, and destroyed once it has gone on for AFTER_DONE_MS without its end", async () => {
    const feeder = new Feeder([Buffer.from("data: [DONE]\n\n")], false);
    const seen: Record<string, unknown>[] = [];
    const reading = readBody(feeder.body, (c) => void seen.push(c), true);
    feeder.feed();
    await reading;
    const at = performance.now();
    // what comes after [DONE] is no event, and is not held (an engine's writes do not pile up)
    feeder.body.push(Buffer.from('data: {"late":1}\n\n'));
    expect(feeder.body.read()).toBe(null);
    expect(feeder.aborts).toBe(0);
    await vi.waitFor(() => expect(feeder.aborts).toBe(1), { timeout: 30_000, interval: 50 });
    // (a timer never fires early; 5 ms for the clocks' rounding)
    expect(performance.now() - at).toBeGreaterThanOrEqual(AFTER_DONE_MS - 5);
    expect(seen).toEqual([]);
  });

  it("an engine that keeps its answer open after [DONE]: the stream is done at once, the connection cut later", async () => {
    let cut!: () => void;
    const closed = new Promise<void>((r) => (cut = r));
    const base = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"ok":1}\n\ndata: [DONE]\n\n');
      res.on("close", cut);
    });
    const r = await collect(base);
    expect(r).toEqual({ chunks: [{ ok: 1 }], error: null });
    await closed;
  });

  it("streams that end cleanly leave their connection to the next request (two connections for eight, in turn)", async () => {
    const sockets = new Set<unknown>();
    const base = await serve((req, res) => {
      sockets.add(req.socket);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end('data: {"ok":1}\n\ndata: [DONE]\n\n');
    });
    for (let i = 0; i < 8; i++) expect(await collect(base)).toEqual({ chunks: [{ ok: 1 }], error: null });
    // a stream is done at [DONE], before undici has read its body's end and freed the connection: the next
    // request takes another; a destroyed one would be a new connection each time
    expect(sockets.size).toBeLessThanOrEqual(2);
  });
});
