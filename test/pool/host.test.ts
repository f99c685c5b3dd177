/** The session host shared by worker threads and the main thread's inline slot. */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HarmonyParser } from "../../src/core/parser.js";
import { FLAG_WHOLE } from "../../src/core/vocab.js";
import { MAX_COT_BYTES } from "../../src/store/cot-buffer.js";
import { SessionHost } from "../../src/pool/host.js";
import type { OpenWith, OpsResult } from "../../src/pool/task.js";
import { toWire } from "../../src/protocol/events.js";
import { FrameWriter, handleField, streamField } from "../../src/protocol/frame-writer.js";
import { schema } from "../../src/protocol/schema.js";
import { expectSameBytes, harmony, loadJsonl, fcParams } from "../helpers.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const { enc, vocab } = harmony();

const spec = (name: string, handle = 0): OpenWith => ({
  name,
  handle,
  role: "assistant",
  mode: "resilient",
  wholeMessages: false,
  nonStrict: false,
  callIdPrefix: "call_t_",
  rememberReasoning: true,
  memoScope: "",
  format: { kind: "events" },
  afterStop: "drop",
  tools: null,
  calls: "any",
});

function heldBytes(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/**
 * Feed `ids` to stream 1 of two hosts in the batches `cuts` makes (opened
 * with `open` in the first batch, closed at the end in the last), the first
 * host's batches answered as objects when `objects[0]` (else binary), the
 * second's as JSON (`objects[1]`: objects instead); `check` gets each
 * batch's two answers and its range of ids.
 */
function stepBoth(
  ids: Uint32Array,
  cuts: readonly number[],
  open: OpenWith,
  hosts: [SessionHost, SessionHost],
  objects: [boolean, boolean],
  check: (a: OpsResult, b: OpsResult, at: number, end: number) => void,
): void {
  let at = 0;
  let k = 0;
  for (let step = 0; at <= ids.length; step++) {
    const end = Math.min(ids.length, at + cuts[k++ % cuts.length]!);
    hosts[0].begin(1, objects[0], objects[0]);
    hosts[1].begin(1, true, objects[1]);
    for (const h of hosts) {
      if (step === 0) h.openStream(1, open);
      if (at < ids.length) h.tokens(1, ids, at, end);
      else h.closeStream(1, "eos");
    }
    check(hosts[0].finish(), hosts[1].finish(), at, end);
    if (at === ids.length) break;
    at = end;
  }
}

describe("SessionHost", () => {
  it("a dropped connection's sessions are freed but for the spares kept, including those of the last batch it answered", () => {
    const host = new SessionHost(vocab, schema());
    const ids = Uint32Array.from(enc.encode("<|channel|>analysis<|message|>We need to think about this carefully"));
    const open = (conn: number, n: number) => {
      host.begin(conn, false);
      for (let i = 1; i <= n; i++) {
        host.openStream(i, spec(`s${i}`));
        host.tokens(i, ids, 0, ids.length);
      }
      return host.finish();
    };
    open(1, 200); // warm caches (token strings, code)
    host.drop(1);
    const before = heldBytes();
    expect(open(2, 5000).sessions).toBe(5000);
    const full = heldBytes();
    expect(full - before).toBeGreaterThan(4 * 2 ** 20); // the sessions are really held (~1.7 KiB each)
    expect(host.drop(2)).toBe(0);
    const after = heldBytes();
    // what may stay is the host's reusable answer buffer (at most 1 MiB) and 1,024 of the sessions kept as
    // spares (emptied: ~1.7 KiB each, their windows), not the other 3,976
    expect((host as unknown as { spare: unknown[] }).spare).toHaveLength(1024);
    expect(after - before).toBeLessThan(1.5 * 2 ** 20 + 1024 * 2 * 1024);
    expect(full - after).toBeGreaterThan(3976 * 1024);
  });

  it("answers a batch in op order and counts what it did", () => {
    const host = new SessionHost(vocab, schema());
    const ids = Uint32Array.from(enc.encode("<|channel|>final<|message|>Hello<|return|>"));
    const r = host.run({
      t: "ops",
      conn: 7,
      json: true,
      kinds: [1, 2, 3],
      sids: [1, 1, 1],
      offs: [0, 0, 0, ids.length, 0, 0],
      ids,
      extra: [
        [0, spec("a")],
        [2, "eos"],
      ],
    });
    const types = r.json!.map((t) => Object.keys(JSON.parse(t) as object).find((k) => k !== "stream"));
    expect(types).toEqual(["message_start", "delta", "message_end", "done"]);
    expect(r.counts.tokens).toBe(ids.length);
    expect(r.counts.events).toMatchObject({ delta: 1, done: 1 });
    expect(r.sessions).toBe(0);
  });

  it("text steps written straight from the vocabulary's bytes are the bytes the events would encode to, for any chunking", () => {
    const wire = schema();
    const cases = [...loadJsonl("wellformed.jsonl"), ...loadJsonl("malformed.jsonl")].filter((_, i) => i % 3 === 0);
    const long = enc.encode(
      `<|channel|>analysis<|message|>${"Deep thought, ünïcode 思考 🙂. ".repeat(1400)}<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>`,
    );
    const all = [...cases.map((c) => ({ tokens: c.tokens, role: c.role })), { tokens: long, role: "assistant" as string | null }];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: all.length - 1 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 20 }),
        fc.boolean(),
        (which, cuts, byHandle) => {
          const { tokens, role } = all[which]!;
          const ids = Uint32Array.from(tokens);
          const open = { ...spec("s", byHandle ? 9 : 0), role };
          const fast = new SessionHost(vocab, wire);
          const slow = new SessionHost(vocab, wire); // JSON answers: every op through write()
          const parser = new HarmonyParser(vocab, { role, callIdPrefix: "call_t_" });
          const field = byHandle ? handleField(9) : streamField("s");
          const ref = byHandle ? { handle: 9 } : { stream: "s" };
          const w = new FrameWriter();
          const expectBatch = (events: ReturnType<HarmonyParser["write"]>) => {
            for (const ev of events) {
              if (ev.type === "delta") w.deltaOf(field, ev);
              else w.event(wire.Event.encode(toWire(ref, ev)).finish());
            }
            return Buffer.from(w.take());
          };
          // binary answers (text steps from the bytes) against JSON ones (every op through write())
          stepBoth(ids, cuts, open, [fast, slow], [false, false], (a, b, at, end) => {
            const want = expectBatch(at < ids.length ? parser.write(ids, at, end) : parser.end("eos"));
            expectSameBytes(a.bin!, want);
            expect(a.memos).toEqual(b.memos);
            expect(a.counts).toEqual(b.counts);
          });
        },
      ),
      fcParams(150),
    );
  });

  it("a Chat stream's text steps for an in-process client are its text alone, the chunks the events would make, for any chunking", () => {
    const wire = schema();
    const cases = [...loadJsonl("wellformed.jsonl"), ...loadJsonl("malformed.jsonl")].filter((_, i) => i % 3 === 0);
    const format = { kind: "openai.chat" as const, id: "chatcmpl-t", model: "m", created: 1, reasoningField: "reasoning" as const };
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: cases.length - 1 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 20 }),
        // calls "none": a call the model makes anyway is read as text and dropped (the text step must not carry it)
        fc.constantFrom<"any" | "none">("any", "none"),
        (which, cuts, calls) => {
          const { tokens, role } = cases[which]!;
          const ids = Uint32Array.from(tokens);
          const open = { ...spec("s"), role, format, calls, tools: calls === "none" ? null : ["f", "get_weather"] };
          const fast = new SessionHost(vocab, wire); // objects: the door's answers
          const slow = new SessionHost(vocab, wire); // JSON: every event through the adapter
          stepBoth(ids, cuts, open, [fast, slow], [true, false], (a, b) => {
            // a text step as the chunk the adapter makes of its delta
            const got = a.objects!.map((o) => {
              const plain = o.chat_delta as { field: string; text: string } | undefined;
              if (plain === undefined) return JSON.stringify(o);
              const delta = { [plain.field]: plain.text };
              const chunk = {
                id: format.id,
                object: "chat.completion.chunk",
                created: 1,
                model: "m",
                choices: [{ index: 0, delta, finish_reason: null, logprobs: null }],
              };
              return JSON.stringify({ stream: o.stream, openai: chunk });
            });
            expect(got).toEqual(b.json);
            expect(a.memos).toEqual(b.memos);
            expect(a.counts).toEqual(b.counts);
          });
        },
      ),
      fcParams(150),
    );
    // and text steps are taken at all: a plain answer goes as its text alone after its first chunk
    const host = new SessionHost(vocab, wire);
    const ids = Uint32Array.from(enc.encode("<|channel|>final<|message|>Hello there, how are you today?<|return|>"));
    host.begin(1, true, true);
    host.openStream(1, { ...spec("s"), format });
    for (let i = 0; i < ids.length; i++) host.tokens(1, ids, i, i + 1);
    const objects = host.finish().objects!;
    expect(objects.filter((o) => (o as { chat_delta?: unknown }).chat_delta !== undefined).length).toBeGreaterThan(3);
  });

  it("a closed stream's session serves a later open, whose answers are those of a new host", () => {
    const wire = schema();
    const cases = [...loadJsonl("wellformed.jsonl"), ...loadJsonl("malformed.jsonl")].filter((_, i) => i % 5 === 0);
    const formats: OpenWith["format"][] = [
      { kind: "events" },
      { kind: "openai.chat", id: "chatcmpl-t", model: "m", created: 1, reasoningField: "reasoning_content" },
      { kind: "openai.responses", id: "resp_t", model: "m", created: 1 },
    ];
    const open = fc.record({
      byHandle: fc.boolean(),
      remember: fc.boolean(),
      json: fc.boolean(),
      mode: fc.constantFrom<"resilient" | "strict">("resilient", "strict"),
      nonStrict: fc.boolean(),
      wholeMessages: fc.boolean(),
      prefix: fc.constantFrom("call_t_", "call_u_"),
      format: fc.constantFrom(...formats),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: cases.length - 1 }),
        fc.integer({ min: 0, max: cases.length - 1 }),
        open,
        open,
        fc.integer({ min: 1, max: 7 }),
        (first, second, a, b, step) => {
          const openOf = (c: (typeof cases)[number], o: typeof a, name: string) => ({
            ...spec(name, o.byHandle ? 7 : 0),
            role: c.role,
            mode: o.mode,
            nonStrict: o.nonStrict,
            wholeMessages: o.wholeMessages,
            callIdPrefix: o.prefix,
            rememberReasoning: o.remember,
            format: o.format,
          });
          /** Each batch's answer for stream `sid`, fed `c` `step` ids at a time, then closed. */
          const play = (host: SessionHost, sid: number, c: (typeof cases)[number], o: typeof a, name: string) => {
            const ids = Uint32Array.from(c.tokens);
            const out: unknown[] = [];
            const batch = (op: () => void) => {
              host.begin(1, o.json);
              op();
              const r = host.finish();
              // bytes as hex: expect compares strings natively, buffers element by element
              out.push({
                bin: r.bin ? Buffer.from(r.bin).toString("hex") : null,
                json: r.json,
                memos: r.memos.map((m) => [m.id, Buffer.from(m.bytes).toString("hex")]),
                counts: r.counts,
                sessions: r.sessions,
              });
            };
            batch(() => host.openStream(sid, openOf(c, o, name)));
            for (let at = 0; at < ids.length; at += step) batch(() => host.tokens(sid, ids, at, Math.min(ids.length, at + step)));
            batch(() => host.closeStream(sid, "eos"));
            return out;
          };
          const used = new SessionHost(vocab, wire);
          play(used, 1, cases[first]!, a, "first");
          expect(play(used, 2, cases[second]!, b, "second")).toEqual(play(new SessionHost(vocab, wire), 2, cases[second]!, b, "second"));
        },
      ),
      fcParams(120),
    );
  });

  /** A host with 1,100 strict streams open on connection 1 in a batch begun (`json`), the first holding a huge header. */
  const heldSessions = (json: boolean) => {
    const host = new SessionHost(vocab, schema());
    const text = Uint32Array.from(enc.encodeOrdinary("a strict header that never ends ".repeat(500)));
    const sessions = [];
    host.begin(1, json);
    for (let sid = 1; sid <= 1100; sid++) sessions.push(host.openStream(sid, { ...spec(`s${sid}`), mode: "strict" }));
    // one huge strict header (no size limit in strict mode)
    host.tokens(1, text, 0, text.length);
    expect(sessions[0]!.parser.heldBytes()).toBeGreaterThan(10_000);
    return { host, sessions };
  };

  it("keeps at most 1024 closed sessions, and none holds what its stream held beyond small buffers", () => {
    const { host, sessions } = heldSessions(false);
    for (let sid = 1; sid <= 1100; sid++) host.closeStream(sid, "abort");
    host.finish();
    expect((host as unknown as { spare: unknown[] }).spare).toHaveLength(1024);
    expect(sessions[0]!.parser.heldBytes()).toBeLessThan(4096);
    // the spares serve the next opens, the last closed first
    host.begin(2, false);
    expect(host.openStream(1, spec("again"))).toBe(sessions[1023]);
    host.finish();
  });

  it("keeps a dropped connection's sessions as spares too, emptied, and they parse the next streams as new ones do", () => {
    const { host, sessions } = heldSessions(true);
    host.finish();
    // the client went away without closing anything (bench/hostile (n)): its streams are forgotten, their sessions kept
    expect(host.drop(1)).toBe(0);
    expect((host as unknown as { spare: unknown[] }).spare).toHaveLength(1024);
    expect(sessions[0]!.parser.heldBytes()).toBeLessThan(4096);
    // a reused session answers as a fresh host's does
    const answer = (h: SessionHost) => {
      h.begin(2, true);
      h.openStream(7, spec("again"));
      const ids = Uint32Array.from(enc.encode("<|channel|>final<|message|>Hi<|return|>"));
      h.tokens(7, ids, 0, ids.length);
      h.closeStream(7, "eos");
      return h.finish().json;
    };
    expect(answer(host)).toEqual(answer(new SessionHost(vocab, schema())));
    expect((host as unknown as { spare: unknown[] }).spare).toHaveLength(1024);
  });

  it("reasoning kept from token bytes stops at the limit on a character boundary, as from text", () => {
    const wire = schema();
    // a token of one 3-byte character, repeated past the limit (32 KiB is not a multiple of 3: the limit falls inside one)
    let cjk = -1;
    for (let id = 0; id < vocab.size && cjk < 0; id++) {
      const b0 = vocab.byteStart(id);
      if (vocab.byteEnd(id) - b0 === 3 && vocab.bytes[b0]! >= 0xe4 && vocab.bytes[b0]! <= 0xe9 && (vocab.flags[id]! & FLAG_WHOLE) !== 0)
        cjk = id;
    }
    expect(cjk).toBeGreaterThanOrEqual(0);
    const ids = Uint32Array.from([
      ...enc.encode("<|channel|>analysis<|message|>"),
      ...new Array<number>(Math.ceil(MAX_COT_BYTES / 3) + 50).fill(cjk),
      ...enc.encode("<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>"),
    ]);
    const memoOf = (json: boolean, step: number, sink = false) => {
      let memos: { id: string; text: string }[] = [];
      // with a sink (the main thread's host) memos go there as found, and none come back in results
      const remember = sink
        ? (id: string, bytes: Uint8Array, s: number, e: number) => memos.push({ id, text: new TextDecoder().decode(bytes.subarray(s, e)) })
        : null;
      const host = new SessionHost(vocab, wire, remember);
      host.begin(1, json);
      host.openStream(1, spec("s"));
      host.finish();
      for (let at = 0; at < ids.length; at += step) {
        host.begin(1, json);
        host.tokens(1, ids, at, Math.min(ids.length, at + step));
        const r = host.finish();
        if (sink) expect(r.memos).toEqual([]);
        memos = memos.concat(r.memos.map((m) => ({ id: m.id, text: new TextDecoder().decode(m.bytes) })));
      }
      return memos;
    };
    const fromBytes = memoOf(false, 1);
    expect(fromBytes).toHaveLength(1);
    expect(Buffer.byteLength(fromBytes[0]!.text)).toBeLessThanOrEqual(MAX_COT_BYTES);
    expect(fromBytes[0]!.text).toBe(vocab.text(cjk).repeat(Math.floor(MAX_COT_BYTES / 3)));
    expect(fromBytes).toEqual(memoOf(true, 1));
    expect(fromBytes).toEqual(memoOf(false, 7));
    expect(fromBytes).toEqual(memoOf(false, 1, true));
    expect(fromBytes).toEqual(memoOf(true, 7, true));
  });
});
