/** POST /v1/parse and GET /inspect over real HTTP, with a real Service (src/transport/inspect.ts). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerParse, type ParseAnswer } from "../../src/inspect/parse.js";
import { parseOnWorker } from "../../src/transport/inspect.js";
import { harmony } from "../helpers.js";
import { startInspectServer, type InspectServer } from "./server.js";

const TEXT =
  '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>';

let open: InspectServer;
let locked: InspectServer;

beforeAll(async () => {
  open = await startInspectServer();
  locked = await startInspectServer({ token: "s3cret", limits: { maxFrameBytes: 4096, maxIdsPerFrame: 100 } });
});
afterAll(async () => {
  await open?.close();
  await locked?.close();
});

/** What POST /v1/parse answers: the parse (with every part asked for), or the HTTP API's error (docs/errors.md). */
type Answer = Required<ParseAnswer> & { error: { code: string; message: string } };

async function post(s: InspectServer, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}/v1/parse`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get("content-type"), body: (await res.json()) as Answer };
}

describe("POST /v1/parse", () => {
  it("answers the CLI's events for text and for ids", async () => {
    const r = await post(open, { text: TEXT });
    expect(r.status).toBe(200);
    expect(r.type).toBe("application/json");
    expect(r.body.events.map((e: { type: string }) => e.type)).toEqual([
      "message_start",
      "delta",
      "message_end",
      "message_start",
      "tool_call_start",
      "delta",
      "tool_call_end",
      "message_end",
      "done",
    ]);
    expect(r.body.events[6]).toEqual({
      type: "tool_call_end",
      index: 1,
      call_index: 0,
      id: "call_0",
      name: "get_weather",
      arguments: '{"city":"Paris"}',
      valid_json: true,
    });
    const ids = await post(open, { ids: [200005, 17196, 200008, 12194, 0, 200002], mode: "strict", tokens: true });
    expect(ids.status).toBe(200);
    expect(ids.body.tokens[0]).toEqual({ id: 200005, text: "<|channel|>", special: true });
    expect(ids.body.emitted).toHaveLength(ids.body.events.length);
    expect(ids.body.events.at(-1)).toMatchObject({ type: "done", tokens: 6 });
  });

  it("takes the bearer token, the body limit and the id limit of the server", async () => {
    expect((await post(locked, { ids: [1] })).body.error.code).toBe("unauthorized");
    expect((await post(locked, { ids: [1] }, { authorization: "Bearer wrong" })).status).toBe(401);
    const auth = { authorization: "Bearer s3cret" };
    expect((await post(locked, { ids: [1] }, auth)).status).toBe(200);
    const big = await post(locked, { text: "x".repeat(5000) }, auth);
    expect([big.status, big.body.error.code]).toEqual([413, "too_large"]);
    const many = await post(locked, { ids: new Array(101).fill(1) }, auth);
    expect([many.status, many.body.error.code]).toEqual([400, "too_many_ids"]);
    const long = await post(locked, { text: "<|end|>".repeat(101) }, auth);
    expect([long.status, long.body.error.code]).toEqual([400, "too_many_ids"]);
  });

  it("answers coded errors for what it cannot use", async () => {
    const bad = await post(open, "{not json");
    expect([bad.status, bad.body.error.code]).toEqual([400, "bad_json"]);
    expect((await post(open, { ids: [1], mode: "lenient" })).body.error.code).toBe("bad_option");
    expect((await post(open, { ids: [1.5] })).body.error.code).toBe("bad_token_id");
    // hostile nesting: refused by depth before anything walks it, not a 500 from a recursive walk
    const deep = await post(open, `{"ids":${"[".repeat(100000)}${"]".repeat(100000)}}`);
    expect([deep.status, deep.body.error.code]).toEqual([400, "too_deep"]);
    const nestedId = await post(open, { ids: [1, [[[2]]]] });
    expect([nestedId.status, nestedId.body.error.code, nestedId.body.error.message]).toEqual([
      400,
      "bad_token_id",
      "ids[1] is not an integer in 0..2^32-1: an array of 1",
    ]);
    expect((await post(open, { text: "a", ids: [1] })).body.error.code).toBe("bad_request");
    const get = await fetch(`${open.url}/v1/parse`);
    expect([get.status, ((await get.json()) as Answer).error.code]).toEqual([405, "method_not_allowed"]);
  });

  it("keeps the main thread free while it parses the largest input", async () => {
    // the largest request: 262144 ids (--max-ids-per-frame) in a body under 4 MiB, with tokens
    const ids = Array.from({ length: 262144 }, (_, i) => (i % 97 === 0 ? 200007 : 1000 + (i % 5000)));
    const body = JSON.stringify({ ids, tokens: true });
    expect(body.length).toBeLessThan(4 * 1024 * 1024);
    let worst = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 5);
    const t0 = performance.now();
    // until the answer's head arrives, this thread runs the server's side only (the answer's JSON is read after)
    const res = await fetch(`${open.url}/v1/parse`, { method: "POST", body });
    const ms = performance.now() - t0;
    clearInterval(timer);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { tokens: unknown[] }).tokens).toHaveLength(262144);
    // the same parse on this thread, for scale: the stall must be a small part of it (both grow on a slower machine)
    const { vocab, enc } = harmony();
    const t1 = performance.now();
    answerParse(vocab, enc.encode, new TextEncoder().encode(body), 262_144);
    const inline = performance.now() - t1;
    expect(worst).toBeLessThan(Math.max(250, inline / 2));
    console.log(
      `largest /v1/parse: ${Math.round(ms)} ms, event-loop stall ${Math.round(worst)} ms (the parse on this thread: ${Math.round(inline)} ms)`,
    );
  });
});

describe("POST /v1/parse's worker deadline", () => {
  it("a parse past the deadline is a 503 parse_timeout; the next parse runs on a fresh worker", async () => {
    const body = new TextEncoder().encode(JSON.stringify({ text: `<|channel|>final<|message|>${"word ".repeat(200_000)}`, tokens: true }));
    const late = await parseOnWorker(body, 262_144, 1);
    expect(late.status).toBe(503);
    expect(JSON.parse(new TextDecoder().decode(late.body))).toMatchObject({ error: { code: "parse_timeout" } });
    const next = await parseOnWorker(new TextEncoder().encode(JSON.stringify({ text: TEXT })), 262_144);
    expect(next.status).toBe(200);
  });

  it("text with a 120,000-character word is encoded in well under the deadline (no quadratic BPE)", async () => {
    const t0 = performance.now();
    const r = await post(open, { text: `<|channel|>final<|message|>${"abcdefghij".repeat(12_000)}<|return|>` });
    expect(r.status).toBe(200);
    expect(r.body.events.at(-1)).toMatchObject({ type: "done", finish_reason: "stop" });
    console.log(`/v1/parse of a 120,000-character word: ${Math.round(performance.now() - t0)} ms`);
  });
});

describe("GET /inspect", () => {
  it("serves the page and its assets with a closed content security policy", async () => {
    for (const [path, type] of [
      ["/inspect", "text/html"],
      ["/inspect/", "text/html"],
      ["/inspect/app.js", "text/javascript"],
      ["/inspect/app.css", "text/css"],
      ["/inspect/logic.js", "text/javascript"],
    ]) {
      const res = await fetch(open.url + path!);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toContain(type);
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
      const body = await res.text();
      expect(body).not.toMatch(/https?:\/\/(?!localhost)/); // nothing from elsewhere: no CDN, no fonts
      if (path === "/inspect/logic.js") expect(body).toContain("export function segmentTokens");
    }
    expect((await fetch(`${open.url}/inspect/../../package.json`)).status).toBe(404);
    expect((await fetch(`${open.url}/inspect/nope.js`)).status).toBe(404);
    expect((await fetch(`${open.url}/inspect`, { method: "POST" })).status).toBe(405);
    const head = await fetch(`${open.url}/inspect`, { method: "HEAD" });
    expect(head.status).toBe(200);
  });
});
