/**
 * Property tests (fast-check) for the streaming parser: arbitrary id streams,
 * arbitrary chunkings, bounded memory, event-stream invariants, "lose
 * nothing" in resilient mode, and round trips of generated conversations.
 *
 * Runs are random (fast-check prints the seed and a shrunk counterexample on
 * failure); set FC_SEED=<n> to replay a run, FC_SCALE=<k> for k times the runs.
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import type { DeltaKind, HarmonyEvent, MessageStartEvent, ReferenceMessage } from "../../src/core/events.js";
import { HeaderMemo, MAX_MEMO_ROLES, parseHeaderReference, threadHeaderMemo } from "../../src/core/header.js";
import { HarmonyParser, MAX_ARGUMENT_BYTES, MAX_HEADERLESS_CHARS, REPEAT_LIMIT, type ParserOptions } from "../../src/core/parser.js";
import { HARMONY } from "../../src/core/preset.js";
import { FLAG_WHOLE, type Vocabulary } from "../../src/core/vocab.js";
import type { HarmonyEncoding } from "../../src/vocab/index.js";
import { fcParams as params, harmony, mutatedJson, parsesAsJson } from "../helpers.js";

// ---------------------------------------------------------------- fixtures

const T = {
  startoftext: 199998,
  endoftext: 199999,
  return: 200002,
  constrain: 200003,
  channel: 200005,
  start: 200006,
  end: 200007,
  message: 200008,
  call: 200012,
} as const;
const HARMONY_SPECIALS = [T.return, T.constrain, T.channel, T.start, T.end, T.message, T.call, T.endoftext];
/** Ids that are not tokens at all. */
const NOT_TOKENS = [
  201089,
  201090,
  300000,
  -1,
  -200006,
  0.5,
  200006.5,
  NaN,
  Infinity,
  -Infinity,
  2 ** 31,
  4294967295,
  2 ** 32,
  Number.MAX_SAFE_INTEGER,
];

let enc: HarmonyEncoding;
let vocab: Vocabulary;
/** Text ids whose bytes are not whole UTF-8 (pieces of emoji, CJK, …). */
let partialIds: number[] = [];
/** Short id runs that look like header pieces, so random streams hit header paths. */
let fragments: number[][] = [];

/**
 * Regression cases: minimal counterexamples of parser bugs these properties
 * found (all fixed). Each is replayed first by the properties that found it.
 */
const BUGS = {
  /** Resilient, role "assistant": "日本語のテキストです" + <|end|>: write() threw RangeError. */
  crashAtStop: () => [...enc.encodeOrdinary("日本語のテキストです"), T.end],
  /** Resilient, role "assistant": a long CJK header cut by end(): end() threw RangeError. */
  crashAtEnd: () => enc.encodeOrdinary("これは日本語の文章です とても"),
  /** Resilient, role "assistant": "日本語" + <|end|> gave content "日本語本語". */
  duplicatedTail: () => [...enc.encodeOrdinary("日本語"), T.end],
  /** Resilient, role "assistant": <|message|> "!" 201089 — recovery was emitted before the "!" delta in one write. */
  recoveryBeforeDelta: () => [T.message, 0, 201089],
  /** Resilient, role "assistant": <|message|> "!" <|start|> — missing_end before the "!" delta in one write. */
  missingEndBeforeDelta: () => [T.message, 0, T.start],
};

beforeAll(() => {
  ({ enc, vocab } = harmony());
  const samples = ["😀🎉👍🏽 家族 👨‍👩‍👧 中文字符 日本語のテキスト 한국어 𝄞 🤖🧠", "ẞ ǅ ﷺ 𒀀 🏳️‍🌈 🦀🐍 ☕️ Ωμέγα"];
  const partial = new Set<number>();
  for (const s of samples) for (const id of enc.encodeOrdinary(s)) if ((vocab.flags[id]! & FLAG_WHOLE) === 0) partial.add(id);
  partialIds = [...partial];
  expect(partialIds.length).toBeGreaterThan(10);
  fragments = [
    "assistant",
    "user",
    "tool",
    " to=functions.get_weather",
    "to=functions.lookup",
    "functions.get_weather",
    "analysis",
    "commentary",
    "final",
    " json",
    "json",
    " code",
    " ",
    "\n",
    "  \n\n",
    "Hello, world! ",
    "The answer is 42.",
    "<|end|>",
    "to=",
    "😀",
    "日本語",
  ].map((s) => enc.encodeOrdinary(s));
  fragments.push(
    enc.encode("<|start|>assistant<|channel|>final<|message|>"),
    enc.encode("<|start|>assistant<|channel|>analysis<|message|>"),
    enc.encode("<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>"),
    enc.encode("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>"),
    enc.encode("<|channel|>commentary to=functions.f"),
    enc.encode("<|start|>user<|message|>"),
    enc.encode("<|start|>functions.f to=assistant<|channel|>commentary<|message|>"),
  );
}, 60_000);

// ---------------------------------------------------------------- arbitraries

const reservedId = fc.oneof(
  fc.constantFrom(T.startoftext, T.endoftext, 200000, 200001, 200004, 200009, 200010, 200011, 201088),
  fc.integer({ min: 200013, max: 201088 }),
);
const notTokenId = fc.oneof(
  fc.constantFrom(...NOT_TOKENS),
  fc.integer({ min: 201089, max: 2 ** 40 }),
  fc.integer({ min: -(2 ** 40), max: -1 }),
  fc.double({ noInteger: true }),
);
const textId = fc.integer({ min: 0, max: 199997 });
/** Lazily read: `partialIds` is filled in beforeAll. */
const partialId = fc.nat().map((n) => partialIds[n % partialIds.length]!);

/** One id of any sort. */
const anyId: fc.Arbitrary<number> = fc.oneof(
  { arbitrary: fc.constantFrom(...HARMONY_SPECIALS), weight: 6 },
  { arbitrary: reservedId, weight: 1 },
  { arbitrary: notTokenId, weight: 1 },
  { arbitrary: partialId, weight: 3 },
  { arbitrary: textId, weight: 5 },
);

/** A piece of a stream: one id, a header-ish fragment, or a run of text. */
const piece: fc.Arbitrary<number[]> = fc.oneof(
  { arbitrary: anyId.map((id) => [id]), weight: 6 },
  { arbitrary: fc.nat().map((n) => fragments[n % fragments.length]!), weight: 3 },
  { arbitrary: fc.array(fc.oneof(textId, partialId), { minLength: 1, maxLength: 12 }), weight: 1 },
);

const idStream = (maxPieces: number): fc.Arbitrary<number[]> =>
  fc.array(piece, { maxLength: maxPieces, size: "medium" }).map((ps) => ps.flat());

/** Chunk sizes, used cyclically (0: an empty write). */
const chunking = fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 12 });

const options: fc.Arbitrary<ParserOptions> = fc.record(
  {
    mode: fc.constantFrom<"resilient" | "strict">("resilient", "strict"),
    nonStrict: fc.boolean(),
    role: fc.constantFrom<"assistant" | null>("assistant", null),
    wholeMessages: fc.boolean(),
    // small windows and header limits reach the "left the window" and "header is text" paths
    windowSize: fc.constantFrom(1, 4, 16, 512),
    maxHeaderBytes: fc.constantFrom(0, 8, 40, 256),
    // rules 8 and 11
    afterStop: fc.constantFrom<"drop" | "parse">("drop", "parse"),
    tools: fc.constantFrom(null, ["a"], ["get_weather", "Web Search", "a"]),
  },
  { requiredKeys: ["mode", "nonStrict", "role", "wholeMessages"] },
);

// ---------------------------------------------------------------- helpers

/** Split `ids` by `sizes` (cyclic); an all-zero cycle flushes the rest in one write. */
function chunks(ids: readonly number[], sizes: readonly number[]): number[][] {
  const out: number[][] = [];
  let i = 0;
  let k = 0;
  let idle = 0;
  while (i < ids.length) {
    let n = sizes[k++ % sizes.length]!;
    if (n === 0 && ++idle > sizes.length) n = ids.length - i;
    if (n > 0) idle = 0;
    out.push(ids.slice(i, i + n));
    i += n;
  }
  return out;
}

/** Feed `ids` in chunks (as plain arrays or typed arrays), then end(). */
function run(
  ids: readonly number[],
  opts: ParserOptions,
  sizes: readonly number[] = [ids.length || 1],
): {
  events: HarmonyEvent[];
  endEvents: HarmonyEvent[];
  parser: HarmonyParser;
} {
  const parser = new HarmonyParser(vocab, opts);
  const events: HarmonyEvent[] = [];
  let n = 0;
  for (const c of chunks(ids, sizes)) {
    // exercise ArrayLike inputs too: a Float64Array holds NaN, fractions, negatives
    const input: ArrayLike<number> = n++ % 3 === 2 ? Float64Array.from(c) : c;
    for (const e of parser.write(input)) events.push(e);
  }
  const endEvents = parser.end();
  events.push(...endEvents);
  return { events, endEvents, parser };
}

/** Merge consecutive deltas of the same message (chunk boundaries split deltas). */
/** Events with consecutive deltas merged, and counted recoveries written out one per repair (chunking-independent forms). */
function mergeDeltas(events: readonly HarmonyEvent[]): HarmonyEvent[] {
  const out: HarmonyEvent[] = [];
  for (const e of events) {
    if (e.type === "recovery" && e.count !== undefined) {
      const { count, ...one } = e;
      for (let k = 0; k < count; k++) out.push({ ...one, at: e.at + k });
      continue;
    }
    const last = out[out.length - 1];
    if (e.type === "delta" && last?.type === "delta" && last.index === e.index && last.kind === e.kind) {
      out[out.length - 1] = { ...last, text: last.text + e.text };
    } else out.push(e);
  }
  return out;
}

/** A message with no header at all (rule 13): no channel, no recipient; its deltas are reasoning. */
function isHeaderless(s: MessageStartEvent): boolean {
  return s.role === "assistant" && s.channel === null && s.recipient === null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function expectedKind(s: MessageStartEvent): DeltaKind {
  if (s.role !== "assistant") return "other";
  if (s.recipient !== null) return "tool_args";
  if (s.channel === "analysis") return "reasoning";
  if (s.channel === "commentary") return "commentary";
  return "content";
}

/**
 * Check the event-stream invariants; returns the finished messages
 * (index, start event, delta text, message_end.message).
 */
function checkEventStream(events: readonly HarmonyEvent[], whole: boolean) {
  const finished: { start: MessageStartEvent; text: string; message?: ReferenceMessage }[] = [];
  /** `answer`: rule 13's text given again as the answer (content deltas after reasoning ones, in a message with no channel). */
  let open: { start: MessageStartEvent; text: string; kind?: DeltaKind; answer?: string } | null = null;
  let started = 0;
  let recoveries = 0;
  let calls = 0;
  let lastAt = 0;
  let prev: HarmonyEvent | undefined;
  const tokens = events[events.length - 1]?.type === "done" ? (events[events.length - 1] as { tokens: number }).tokens : Infinity;
  for (const e of events) {
    if (e.type === "recovery" || e.type === "error") {
      // positions are stream positions, reported in stream order
      expect(Number.isInteger(e.at) && e.at >= 0 && e.at <= tokens, `position ${e.at} of ${tokens}`).toBe(true);
      expect(e.at, `${e.type} ${JSON.stringify(e)} reported out of order`).toBeGreaterThanOrEqual(lastAt);
      lastAt = e.at;
    }
    if (prev?.type === "message_start") {
      // a tool call starts right after its message, and only for assistant messages with a recipient
      const isCall = prev.role === "assistant" && prev.recipient !== null;
      expect(e.type === "tool_call_start", `tool_call_start after ${JSON.stringify(prev)}`).toBe(isCall);
    }
    prev = e;
    switch (e.type) {
      case "message_start":
        expect(open, "message_start while a message is open").toBeNull();
        expect(e.index).toBe(started++);
        open = { start: e, text: "" };
        break;
      case "tool_call_start":
        expect(open, "tool_call_start with no open message").not.toBeNull();
        expect(e.index).toBe(open!.start.index);
        expect(open!.start.recipient).toBe(e.recipient);
        expect(e.call_index).toBe(calls++);
        expect(e.id).toBe(`call_${e.call_index}`);
        expect(e.namespace === null ? e.name : `${e.namespace}.${e.name}`).toBe(e.recipient);
        break;
      case "delta":
        expect(open, "delta with no open message").not.toBeNull();
        expect(e.index).toBe(open!.start.index);
        expect(e.text).not.toBe("");
        expect(LONE_SURROGATE.test(e.text), `delta splits a character: ${JSON.stringify(e.text)}`).toBe(false);
        if (isHeaderless(open!.start) && (e.kind === "reasoning" || (e.kind === "content" && open!.kind === "reasoning"))) {
          // rule 13: reasoning as it arrives; given again, once, as the answer at the end
          if (e.kind === "content") {
            expect(open!.answer, "headerless text given as the answer twice").toBeUndefined();
            expect(open!.text.startsWith(e.text), "the answer is the headerless text").toBe(true);
            open!.answer = e.text;
          } else {
            expect(open!.answer, "reasoning after the headerless text's answer").toBeUndefined();
            open!.text += e.text;
          }
          open!.kind = "reasoning";
          break;
        }
        expect(e.kind).toBe(expectedKind(open!.start));
        open!.text += e.text;
        break;
      case "message_end": {
        expect(open, "message_end with no open message").not.toBeNull();
        expect(e.index).toBe(open!.start.index);
        const s = open!.start;
        if (whole) {
          expect(e.message).toBeDefined();
          const m = e.message!;
          expect(m.content).toBe(open!.text);
          expect(m.role).toBe(s.role);
          if (isHeaderless(s) && open!.kind === "reasoning") {
            // rule 13: reasoning, or the answer too when it was given again
            expect(m.channel).toBe(open!.answer === undefined ? "analysis" : "final");
            if (open!.answer !== undefined) expect(open!.answer).toBe(open!.text);
          } else expect(m.channel ?? null).toBe(s.channel);
          expect(m.recipient ?? null).toBe(s.recipient);
          expect(m.content_type ?? null).toBe(s.content_type);
          expect(m.name ?? null).toBe(s.name);
        } else expect(e.message).toBeUndefined();
        finished.push({ start: s, text: open!.text, message: e.message });
        open = null;
        break;
      }
      case "recovery":
        // done.recoveries counts repairs: an event with count stands for that many
        if (e.count !== undefined) expect(e.count).toBeGreaterThan(1);
        recoveries += e.count ?? 1;
        expect(typeof e.at).toBe("number");
        break;
      case "error":
        break;
      case "done":
        expect(e, "done is the last event").toBe(events[events.length - 1]);
        expect(open, "a message still open at done").toBeNull();
        expect(e.messages).toBe(finished.length);
        expect(e.recoveries).toBe(recoveries);
        if (e.finish_reason === "stop" || e.finish_reason === "tool_calls") {
          const last = finished[finished.length - 1]?.start;
          const call = last !== undefined && last.role === "assistant" && last.recipient !== null;
          expect(e.finish_reason).toBe(call ? "tool_calls" : "stop");
        }
        break;
    }
  }
  return finished;
}

// ---------------------------------------------------------------- 1. robustness

describe("property: any id sequence, any chunking", () => {
  it("no delta, content or argument ever carries a special token's text, whatever the ids (rule 9)", () => {
    // ordinary ids that could spell a marker are left out: only the ids say which is which
    const spells = (id: number) => {
      if (!(id >>> 0 === id && id < T.startoftext)) return false;
      for (let b = vocab.byteStart(id); b < vocab.byteEnd(id); b++) {
        const c = vocab.bytes[b]!;
        if (c === 0x3c || c === 0x7c || c === 0x3e) return true;
      }
      return false;
    };
    const marker = /<\|[a-z_0-9]+\|>/;
    fc.assert(
      fc.property(idStream(80), options, chunking, (all, opts, sizes) => {
        const ids = all.filter((id) => !spells(id));
        const { events } = run(ids, { ...opts, mode: "resilient", wholeMessages: true }, sizes);
        for (const e of events) {
          if (e.type === "delta") expect(e.text, JSON.stringify(ids)).not.toMatch(marker);
          if (e.type === "tool_call_end") expect(e.arguments, JSON.stringify(ids)).not.toMatch(marker);
          if (e.type === "message_end") expect(e.message!.content, JSON.stringify(ids)).not.toMatch(marker);
        }
      }),
      params(400),
    );
  });

  it("never throws, ends with done, counts every id, and refuses input after the end", () => {
    fc.assert(
      fc.property(
        idStream(60),
        options,
        chunking,
        fc.constantFrom<"eos" | "length" | "abort" | undefined>(undefined, "eos", "length", "abort"),
        (ids, opts, sizes, reason) => {
          const parser = new HarmonyParser(vocab, opts);
          for (const c of chunks(ids, sizes)) {
            const evs = parser.write(c);
            expect(Array.isArray(evs)).toBe(true);
            expect(evs.some((e) => e.type === "done")).toBe(false);
          }
          expect(parser.tokens).toBe(ids.length);
          const endEvents = parser.end(reason);
          const done = endEvents[endEvents.length - 1]!;
          expect(done.type).toBe("done");
          expect(endEvents.filter((e) => e.type === "done")).toHaveLength(1);
          if (done.type !== "done") return;
          expect(done.tokens).toBe(ids.length);
          if (reason === "abort") expect(done.finish_reason).toBe("abort");
          else if (reason === "length") expect(done.finish_reason).toBe("length");
          else expect(["stop", "tool_calls", "error"]).toContain(done.finish_reason);
          if (opts.mode !== "strict") expect(done.finish_reason).not.toBe("error");
          expect(parser.finished).toBe(true);

          const after = parser.write([T.start, 1, 2]);
          expect(after).toHaveLength(1);
          expect(after[0]).toMatchObject({ type: "error", code: "stream_finished", token: null });
          expect(parser.tokens).toBe(ids.length);
          const again = parser.end();
          expect(again).toHaveLength(1);
          expect(again[0]).toMatchObject({ type: "error", code: "stream_finished" });
        },
      ),
      params(400, [
        [
          BUGS.crashAtStop(),
          { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true },
          [1],
          undefined,
        ],
        [BUGS.crashAtEnd(), { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true }, [3], "eos"],
      ]),
    );
  });

  it("the end reason changes only done.finish_reason, and a call it cuts short gets no tool_call_end", () => {
    fc.assert(
      fc.property(idStream(40), options, chunking, fc.constantFrom<"length" | "abort">("length", "abort"), (ids, opts, sizes, reason) => {
        const feed = (p: HarmonyParser) => chunks(ids, sizes).flatMap((c) => p.write(c));
        const pa = new HarmonyParser(vocab, opts);
        const writesA = feed(pa);
        const endA = pa.end("eos");
        const pb = new HarmonyParser(vocab, opts);
        const writesB = feed(pb);
        const endB = pb.end(reason);
        // same chunking, so the same events, one for one
        expect(writesB).toEqual(writesA);
        const done = endB[endB.length - 1]!;
        expect(done).toMatchObject({ type: "done", finish_reason: reason });
        expect({ ...done, finish_reason: "x" }).toEqual({ ...endA[endA.length - 1]!, finish_reason: "x" });
        // a call open at the end is complete at an eos (its tool_call_end, maybe repaired), cut short otherwise (rule 12)
        const callEnd = (e: HarmonyEvent) => e.type === "tool_call_end" || (e.type === "recovery" && e.kind === "arguments_repaired");
        expect(endB.slice(0, -1)).toEqual(endA.slice(0, -1).filter((e) => !callEnd(e)));
        expect(endB.some(callEnd)).toBe(false);
      }),
      params(150),
    );
  });

  it("accepts odd ArrayLike inputs (typed arrays, array-likes, sparse arrays) without throwing", () => {
    fc.assert(
      fc.property(idStream(30), options, (ids, opts) => {
        const parser = new HarmonyParser(vocab, opts);
        const third = Math.floor(ids.length / 3);
        const a = ids.slice(0, third);
        const b = ids.slice(third, 2 * third);
        const c = ids.slice(2 * third);
        parser.write(Float64Array.from(a));
        parser.write({ length: b.length, ...Object.fromEntries(b.map((v, i) => [i, v])) });
        const sparse: number[] = [];
        c.forEach((v, i) => (sparse[i] = v));
        parser.write(sparse);
        expect(parser.tokens).toBe(ids.length);
        const end = parser.end();
        expect(end[end.length - 1]).toMatchObject({ type: "done", tokens: ids.length });
      }),
      params(100),
    );
  });
});

// ---------------------------------------------------------------- 2. memory

describe("property: a restarted parser is a new parser", () => {
  it("after any stream, finished or not, restart(options) gives exactly the events of new HarmonyParser(options)", () => {
    fc.assert(
      fc.property(
        idStream(80),
        options,
        fc.boolean(),
        idStream(60),
        options,
        fc.constantFrom(undefined, "call_", "x_"),
        chunking,
        (before, optsBefore, ended, ids, optsAfter, prefix, sizes) => {
          const opts = prefix === undefined ? optsAfter : { ...optsAfter, callIdPrefix: prefix };
          const reused = new HarmonyParser(vocab, { ...optsBefore, callIdPrefix: "before_" });
          for (const c of chunks(before, sizes)) reused.write(c);
          if (ended) reused.end("eos");
          reused.restart(opts);
          const fresh = new HarmonyParser(vocab, opts);
          // every field but the kept buffers is as new, room by room (src/core/parser/stream.ts lists them)
          const state = (p: HarmonyParser) => {
            const r = p as unknown as Record<string, Record<string, unknown>>;
            // what the rooms share (the vocabulary's tables, the settings, the window, the policy's reporter) is the same objects
            const SHARED = ["vocab", "flags", "scratch", "settings", "window", "report"];
            const fields = (o: Record<string, unknown>, kept: string[]) =>
              Object.fromEntries(Object.entries(o).filter(([k]) => !kept.includes(k) && !SHARED.includes(k)));
            const settings = r.settings!;
            const shared = [r.vocab, r.flags, r.scratch, settings.preset].every(
              (x, i) =>
                x ===
                [vocab, vocab.flags, vocab.scratch, (fresh as unknown as Record<string, Record<string, unknown>>).settings!.preset][i],
            );
            const sharedByRooms = [r.head, r.args, r.policy, r.afterStop].every((room) => room!.vocab === vocab);
            // (a kept window may be larger than a new one: its mask then is too)
            const window = r.window as unknown as { ids: Uint8Array; mask: number; maxMask: number };
            return {
              stream: fields(r, ["pendingBytes", "head", "args", "policy", "afterStop"]),
              settings: { ...settings, preset: undefined },
              head: fields(r.head!, ["bytes"]),
              args: fields(r.args!, ["bytes"]),
              policy: fields(r.policy!, []),
              afterStop: fields(r.afterStop!, []),
              window: { maxMask: window.maxMask, fits: window.ids.length / 3 - 1 === window.mask },
              shared,
              sharedByRooms,
            };
          };
          expect(state(reused)).toEqual(state(fresh));
          for (const c of chunks(ids, sizes)) expect(reused.write(c)).toEqual(fresh.write(c));
          expect(reused.end("eos")).toEqual(fresh.end("eos"));
        },
      ),
      params(300, [
        // found in CI: a call whose arguments were one long run of tokens left its JSON verdict behind
        [
          [
            200006, 173781, 200005, 12606, 815, 316, 28, 44580, 1196, 220, 200003, 4108, 200008, 13225, 11, 2375, 0, 220, 0, 173781, 173781,
            0,
          ],
          { mode: "resilient", nonStrict: false, role: "assistant", wholeMessages: false },
          false,
          [],
          { mode: "resilient", nonStrict: false, role: "assistant", wholeMessages: false },
          undefined,
          [0],
        ],
      ]),
    );
  });

  it("a header memo shared across streams (one small enough to keep clearing, the thread's default) changes no event", () => {
    const shared = new HeaderMemo(HARMONY);
    const tiny = new HeaderMemo(HARMONY, 2, 24);
    fc.assert(
      fc.property(fc.array(fc.tuple(idStream(60), options), { minLength: 1, maxLength: 4 }), chunking, (streams, sizes) => {
        for (const [ids, opts] of streams) {
          const plain = new HarmonyParser(vocab, { ...opts, headers: null });
          const memoised = [shared, tiny, undefined].map((headers) => new HarmonyParser(vocab, { ...opts, headers }));
          for (const c of chunks(ids, sizes)) {
            const want = plain.write(c);
            for (const p of memoised) expect(p.write(c)).toEqual(want);
          }
          const end = plain.end("eos");
          for (const p of memoised) expect(p.end("eos")).toEqual(end);
        }
      }),
      params(300),
    );
  });

  it("a header memo of another preset is not used", () => {
    const other = new HeaderMemo({ ...HARMONY });
    const ids = [T.channel, ...enc.encodeOrdinary("analysis"), T.message];
    const p = new HarmonyParser(vocab, { headers: other });
    p.write(ids);
    expect((p as unknown as { settings: { headerMemo: unknown } }).settings.headerMemo).toBeNull();
    expect(other.staysHeader(0, "<|channel|>analysis", "assistant")).toBe(false);
  });

  it("a parser given no memo uses the thread's (HARMONY's only); given null, none", () => {
    const memoOf = (p: HarmonyParser) => (p as unknown as { settings: { headerMemo: HeaderMemo | null } }).settings.headerMemo;
    const byDefault = new HarmonyParser(vocab);
    expect(memoOf(byDefault)).toBe(threadHeaderMemo(HARMONY));
    expect(memoOf(new HarmonyParser(vocab, { mode: "strict" }))).toBe(threadHeaderMemo(HARMONY));
    expect(memoOf(new HarmonyParser(vocab, { headers: null }))).toBeNull();
    expect(memoOf(new HarmonyParser(vocab, { preset: { ...HARMONY } }))).toBeNull();
    expect(threadHeaderMemo({ ...HARMONY })).toBeNull();
    byDefault.write([...enc.encode("<|channel|>analysis<|message|>hi"), T.end]);
    expect(threadHeaderMemo(HARMONY)!.reference("<|channel|>analysis", "assistant")).toBe(
      threadHeaderMemo(HARMONY)!.reference("<|channel|>analysis", "assistant"),
    );
  });

  it("a header memo keeps tables for a few roles only, and none for a role longer than its texts", () => {
    const memo = new HeaderMemo(HARMONY, 8, 24);
    const tables = (m: HeaderMemo) => (m as unknown as { readings: Map<unknown, unknown> }).readings;
    const roles = Array.from({ length: 3 * MAX_MEMO_ROLES }, (_, k) => `role${k}`);
    for (const role of roles) {
      expect(memo.reference("<|channel|>final", role).ok).toBe(true);
      memo.noteStaysHeader(0, "<|channel|>fi", role);
      expect(tables(memo).size).toBeLessThanOrEqual(MAX_MEMO_ROLES);
    }
    // the last role's tables are there, and a reading is still the reference's
    expect(memo.staysHeader(0, "<|channel|>fi", roles.at(-1)!)).toBe(true);
    const long = "r".repeat(25);
    expect(memo.reference("<|channel|>final", long)).toEqual(parseHeaderReference("<|channel|>final", long, HARMONY, true));
    memo.noteStaysHeader(0, "<|channel|>fi", long);
    expect(memo.staysHeader(0, "<|channel|>fi", long)).toBe(false);
    expect(tables(memo).has(long)).toBe(false);
  });

  it("keeps its grown window across restarts; a splice that reads far back in it gives what a new parser gives", () => {
    // an abandoned header whose restart comes a hundred ids later (past a new
    // parser's first window): the splice reads the window that a long earlier
    // stream grew to full size and filled with its own ids (the text between is
    // reasoning with no header, rule 13: never the call's arguments, rule 14)
    const junk = enc.encodeOrdinary("lorem ipsum dolor ".repeat(120));
    const call = [
      ...enc.encode("<|start|>assistant to=functions.lookup<|channel|>commentary<|end|><|return|>"),
      ...enc.encodeOrdinary(" filler".repeat(100)),
      ...enc.encode("<|start|>assistant<|channel|>commentary json<|message|>{}<|call|>"),
    ];
    const reused = new HarmonyParser(vocab);
    reused.write([...enc.encode("<|channel|>analysis<|message|>"), ...junk]);
    expect(reused.heldBytes()).toBeGreaterThanOrEqual(3 * 512);
    reused.restart();
    expect(reused.heldBytes()).toBeGreaterThanOrEqual(3 * 512);
    const fresh = new HarmonyParser(vocab);
    const a = [...reused.write(call), ...reused.end("eos")];
    expect(a).toEqual([...fresh.write(call), ...fresh.end("eos")]);
    expect(a.find((e) => e.type === "tool_call_start")).toMatchObject({ name: "lookup" });
    // a smaller window size than the one held: a new window of that size
    reused.restart({ windowSize: 16 });
    expect(reused.heldBytes()).toBeLessThan(3 * 512);
    // a strict stream's header has no size limit: restart does not keep a huge one
    const strict = new HarmonyParser(vocab, { mode: "strict" });
    strict.write(enc.encodeOrdinary("header text without end ".repeat(2000)));
    expect(strict.heldBytes()).toBeGreaterThan(40_000);
    strict.restart({ mode: "strict" });
    expect(strict.heldBytes()).toBeLessThan(3 * 512 + 2 * 1024);
  });
});

describe("property: bounded memory (resilient)", () => {
  const LIMIT = 16 * 1024;
  /** Runs with no <|message|>: text, partial UTF-8, header markers, junk specials. */
  const longRun: fc.Arbitrary<number[]> = fc.oneof(
    fc.array(textId, { minLength: 200, maxLength: 800 }),
    fc.array(partialId, { minLength: 200, maxLength: 800 }),
    fc.array(fc.oneof(partialId, textId, fc.constantFrom(T.channel, T.constrain)), { minLength: 200, maxLength: 800 }),
    fc.array(fc.constantFrom(T.channel, T.constrain), { minLength: 100, maxLength: 400 }),
    fc
      .tuple(fc.nat(), fc.integer({ min: 50, max: 300 }))
      .map(([n, k]) => Array.from({ length: k }, () => fragments[n % fragments.length]!).flat()),
  );
  const longStream = fc
    .array(fc.oneof({ arbitrary: piece, weight: 4 }, { arbitrary: longRun, weight: 1 }), { minLength: 5, maxLength: 30 })
    .map((ps) => ps.flat());

  it("heldBytes() stays under 16 KiB at every step, besides a tool call's arguments (at most 1 MiB) and headerless text kept for the answer (rule 13, at most 1 MiB)", () => {
    fc.assert(
      fc.property(
        longStream,
        fc.constantFrom<"assistant" | null>("assistant", null),
        fc.integer({ min: 1, max: 64 }),
        (ids, role, size) => {
          const parser = new HarmonyParser(vocab, { role });
          let max = parser.heldBytes();
          for (let i = 0; i < ids.length; i += size) {
            parser.write(ids.slice(i, i + size));
            const held = parser.heldBytes() - parser.argumentBytes - parser.headerlessBytes;
            if (held > max) max = held;
            expect(held, `after ${i + size} of ${ids.length} ids`).toBeLessThanOrEqual(LIMIT);
            expect(parser.argumentBytes).toBeLessThanOrEqual(MAX_ARGUMENT_BYTES + 1);
            expect(parser.headerlessBytes).toBeLessThanOrEqual(2 * MAX_HEADERLESS_CHARS);
          }
          parser.end();
          expect(parser.heldBytes()).toBeLessThanOrEqual(LIMIT);
        },
      ),
      params(40),
    );
  });
});

// ---------------------------------------------------------------- 3. event invariants

describe("property: event-stream invariants", () => {
  it("resilient: deltas add up to message content, indexes match, one end per start, no split characters", () => {
    fc.assert(
      fc.property(idStream(60), fc.constantFrom<"assistant" | null>("assistant", null), chunking, (ids, role, sizes) => {
        const { events } = run(ids, { role, wholeMessages: true }, sizes);
        checkEventStream(events, true);
        expect(events.some((e) => e.type === "error")).toBe(false);
      }),
      params(400, [
        [BUGS.crashAtStop(), "assistant", [2]],
        [BUGS.crashAtEnd(), "assistant", [1]],
      ]),
    );
  });

  it("strict: the same structural invariants hold", () => {
    fc.assert(
      fc.property(
        idStream(60),
        fc.constantFrom<"assistant" | null>("assistant", null),
        fc.boolean(),
        chunking,
        (ids, role, nonStrict, sizes) => {
          const { events } = run(ids, { mode: "strict", nonStrict, role, wholeMessages: true }, sizes);
          checkEventStream(events, true);
          expect(events.some((e) => e.type === "recovery")).toBe(false);
        },
      ),
      params(300),
    );
  });

  it("without wholeMessages, message_end carries no message and the deltas are the same", () => {
    fc.assert(
      fc.property(idStream(40), options, (ids, opts) => {
        const a = run(ids, { ...opts, wholeMessages: true }).events;
        const b = run(ids, { ...opts, wholeMessages: false }).events;
        checkEventStream(b, false);
        const strip = (evs: HarmonyEvent[]) =>
          evs.map((e) => (e.type === "message_end" ? { type: e.type, index: e.index, stop: e.stop } : e));
        expect(strip(b)).toEqual(strip(a));
      }),
      params(150),
    );
  });

  it("tool_call_end: the call's deltas joined (or, repaired, its recovery's raw), through write() or takeText; valid_json is JSON.parse's verdict", () => {
    // the arguments are kept as UTF-8 (copied from the vocabulary by takeText and write's
    // text loop, encoded elsewhere) and decoded once: they must be exactly the deltas' text
    fc.assert(
      fc.property(
        idStream(60),
        fc.constantFrom<"assistant" | null>("assistant", null),
        fc.constantFrom<"resilient" | "strict">("resilient", "strict"),
        fc.boolean(),
        chunking,
        (ids, role, mode, take, sizes) => {
          const parser = new HarmonyParser(vocab, { role, mode });
          const events: HarmonyEvent[] = [];
          for (const c of chunks(ids, sizes)) {
            if (take && parser.takeText(c, 0, c.length)) {
              const text = c.map((id) => vocab.text(id)).join("");
              events.push({ type: "delta", index: parser.messageIndex, kind: parser.textKind, text });
            } else events.push(...parser.write(c));
          }
          events.push(...parser.end());
          const generated = new Map<number, string>();
          for (const e of events) if (e.type === "delta") generated.set(e.index, (generated.get(e.index) ?? "") + e.text);
          let raw: string | null = null;
          for (const e of events) {
            if (e.type === "recovery" && e.kind === "arguments_repaired") raw = e.raw ?? "";
            if (e.type !== "tool_call_end") continue;
            const text = generated.get(e.index) ?? "";
            if (raw === null) expect(e.arguments, JSON.stringify(ids)).toBe(text);
            else expect(raw, JSON.stringify(ids)).toBe(text);
            expect(e.valid_json, JSON.stringify(ids)).toBe(parsesAsJson(e.arguments));
            raw = null;
          }
        },
      ),
      params(400),
    );
  });

  it("tool_call_end of JSON-like arguments: the same from one write (a long run, checked token by token), one token a write, or takeText", () => {
    // a run of more than 8 whole tokens that begins a call's arguments is checked by isJsonTokens as
    // it arrives; other paths check the text or the bytes at the call's end: all must agree with JSON.parse
    const mutated = mutatedJson(["", ",", "]", "}", "{", '"', ":", " ", "1", "\\", "```", "json "]);
    fc.assert(
      fc.property(
        fc.oneof(
          fc.json(),
          fc.json({ stringUnit: "grapheme" }),
          fc.jsonValue().map((v) => JSON.stringify(v, null, 1)),
          mutated,
          fc.string({ unit: "grapheme", minLength: 1 }),
        ),
        fc.constantFrom(T.call, T.end, null),
        (text, stop) => {
          const head = enc.encode("<|channel|>commentary to=functions.f <|constrain|>json<|message|>");
          const ids = [...head, ...enc.encodeOrdinary(text), ...(stop === null ? [] : [stop])];
          const ends = (events: HarmonyEvent[]) => events.filter((e) => e.type === "tool_call_end" || e.type === "recovery");
          const one = new HarmonyParser(vocab);
          const whole = ends([...one.write(ids), ...one.end()]);
          const each = new HarmonyParser(vocab);
          const perToken = ends([...ids.flatMap((id) => each.write([id])), ...each.end()]);
          const taker = new HarmonyParser(vocab);
          const taken = [...taker.write(head)];
          const last = ids.length - (stop === null ? 0 : 1);
          if (!taker.takeText(ids, head.length, last)) taken.push(...taker.write(ids, head.length, last));
          if (stop !== null) taken.push(...taker.write([stop]));
          taken.push(...taker.end());
          expect(perToken, text).toEqual(whole);
          expect(ends(taken), text).toEqual(whole);
          const end = whole.find((e) => e.type === "tool_call_end");
          expect(end, text).toBeDefined();
          if (end?.type === "tool_call_end") {
            expect(end.valid_json, text).toBe(parsesAsJson(end.arguments));
            if (parsesAsJson(text)) expect(end.arguments).toBe(text);
          }
        },
      ),
      params(1500),
    );
  });
});

// ---------------------------------------------------------------- 4. chunking independence

describe("property: chunking independence", () => {
  it("two chunkings give the same events once consecutive deltas are merged", () => {
    fc.assert(
      fc.property(idStream(60), options, chunking, chunking, (ids, opts, s1, s2) => {
        const a = mergeDeltas(run(ids, opts, s1).events);
        const b = mergeDeltas(run(ids, opts, s2).events);
        expect(b).toEqual(a);
      }),
      params(300, [
        [
          BUGS.recoveryBeforeDelta(),
          { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true },
          [3],
          [1],
        ],
        [
          BUGS.missingEndBeforeDelta(),
          { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true },
          [3],
          [1],
        ],
      ]),
    );
  });

  it("one write per id equals one write for everything (merged deltas)", () => {
    fc.assert(
      fc.property(idStream(60), options, (ids, opts) => {
        const a = mergeDeltas(run(ids, opts, [1]).events);
        const b = mergeDeltas(run(ids, opts).events);
        expect(b).toEqual(a);
      }),
      params(200, [
        [BUGS.recoveryBeforeDelta(), { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true }],
        [BUGS.missingEndBeforeDelta(), { mode: "resilient" as const, nonStrict: false, role: "assistant" as const, wholeMessages: true }],
      ]),
    );
  });
});

describe("property: a long write's text", () => {
  it("a run of text past 64 KiB in one write is the tokens' texts joined, as one token a write gives it", () => {
    // whole-UTF-8 text tokens: a BOM, a newline, multi-byte and 4-byte characters among them
    const texts = ["\ufeff", "a", " the", "\n", "—", "“x”", "😀", "é", "\t", "\\", '"'];
    const pool = [...new Set(texts.flatMap((t) => enc.encode(t)))].filter((id) => (vocab.flags[id]! & FLAG_WHOLE) !== 0);
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pool), { minLength: 30_000, maxLength: 60_000 }), fc.boolean(), (text, whole) => {
        const ids = [T.channel, ...enc.encode("final"), T.message, ...text, T.return];
        const opts: ParserOptions = { wholeMessages: whole };
        const one = run(ids, opts);
        const content = text.map((id) => vocab.text(id)).join("");
        const deltas = one.events.filter((e) => e.type === "delta").map((e) => (e as { text: string }).text);
        expect(deltas.join("")).toBe(content);
        if (whole) expect(one.events.find((e) => e.type === "message_end")).toMatchObject({ message: { content } });
        expect(mergeDeltas(one.events)).toEqual(mergeDeltas(run(ids, opts, [1]).events));
      }),
      params(8),
    );
  });
});

describe("property: writing a range of a larger array", () => {
  it("write(ids, start, end) gives exactly the events of write(ids.slice(start, end)), whatever the bounds", () => {
    fc.assert(
      fc.property(idStream(60), options, chunking, fc.nat(5), fc.nat(5), (ids, opts, sizes, padL, padR) => {
        const want = run(ids, opts, sizes).events;
        // the same chunks, each read out of one shared array with junk around it
        const buf = new Float64Array(padL + ids.length + padR).fill(T.start); // keeps odd ids as they are
        buf.set(ids, padL);
        const parser = new HarmonyParser(vocab, opts);
        const got: HarmonyEvent[] = [];
        let at = padL;
        for (const c of chunks(ids, sizes)) {
          got.push(...parser.write(buf, at, at + c.length));
          at += c.length;
        }
        got.push(...parser.end());
        expect(got).toEqual(want);
      }),
      params(200),
    );
  });

  it("bounds outside the array are clamped, never thrown on", () => {
    const parser = new HarmonyParser(vocab, { role: "assistant" });
    const ids = [T.channel];
    for (const [s, e] of [
      [-3, 1],
      [0, 99],
      [NaN, NaN],
      [2, 1],
      [0, -1],
    ] as const)
      expect(() => parser.write(ids, s, e)).not.toThrow();
    expect(parser.tokens).toBe(3); // [-3, 1), [0, 99) and [NaN, NaN) (the whole array) read the one id; the rest read none
  });
});

describe("the token window grows with the stream", () => {
  it("an abandoned header is spliced into its restart wherever the stream is, before and after the window doubles", () => {
    const enc = harmony().enc;
    const head = enc.encode("<|channel|>analysis<|message|>");
    const word = enc.encode(" x")[0]!;
    const tail = enc.encode(
      '<|end|><|start|>assistant to=functions.get_weather<|start|>assistant<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>',
    );
    for (const filler of [
      0, 20, 25, 28, 29, 30, 31, 32, 33, 60, 61, 62, 63, 64, 125, 126, 127, 128, 250, 254, 255, 256, 500, 505, 510, 600,
    ]) {
      const ids = [...head, ...Array(filler).fill(word), ...tail];
      for (const sizes of [[ids.length], [1], [7]]) {
        const { events } = run(ids, { role: "assistant" }, sizes);
        const call = events.find((e) => e.type === "tool_call_start");
        expect(call, `filler ${filler}, chunks ${sizes}`).toMatchObject({ name: "get_weather" });
        expect(
          events.some((e) => e.type === "recovery" && e.kind === "recipient_spliced"),
          `filler ${filler}`,
        ).toBe(true);
      }
    }
  });
});

describe("property: parsers on one thread share spare windows, never a window in use", () => {
  it("streams interleaved write by write, each ended and followed by a new or restarted parser, give the events each gives alone", () => {
    // each stream abandons a header and restarts it after some filler, so its
    // events depend on ids read back from its window: a window that another
    // parser also writes into (a spare handed out while still in use) changes them
    const head = enc.encode("<|channel|>analysis<|message|>");
    const word = enc.encode(" x")[0]!;
    const tail = enc.encode(
      '<|end|><|start|>assistant to=functions.get_weather<|start|>assistant<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>',
    );
    const stream = fc
      .tuple(fc.integer({ min: 0, max: 600 }), idStream(20), fc.constantFrom(16, 512))
      .map(([filler, noise, windowSize]) => ({ ids: [...noise, ...head, ...Array<number>(filler).fill(word), ...tail], windowSize }));
    fc.assert(
      fc.property(fc.array(stream, { minLength: 2, maxLength: 10 }), fc.integer({ min: 2, max: 4 }), chunking, (streams, lanes, sizes) => {
        const alone = streams.map((st) => run(st.ids, { role: null, windowSize: st.windowSize }, sizes).events);
        const got: HarmonyEvent[][] = streams.map(() => []);
        // lanes take the streams in turn; a lane's parser is reused (restart) every other stream
        type Lane = { p: HarmonyParser | null; k: number; parts: number[][]; at: number };
        const lane: Lane[] = [];
        let next = 0;
        const begin = (l: Lane) => {
          const k = next++;
          const opts: ParserOptions = { role: null, windowSize: streams[k]!.windowSize };
          if (l.p !== null && k % 2 === 0) l.p.restart(opts);
          else l.p = new HarmonyParser(vocab, opts);
          l.k = k;
          l.parts = chunks(streams[k]!.ids, sizes);
          l.at = 0;
        };
        for (let i = 0; i < lanes && next < streams.length; i++) {
          const l: Lane = { p: null, k: 0, parts: [], at: 0 };
          begin(l);
          lane.push(l);
        }
        let busy = lane.length;
        while (busy > 0) {
          busy = 0;
          for (const l of lane) {
            if (l.p === null) continue;
            busy++;
            if (l.at < l.parts.length) got[l.k]!.push(...l.p.write(l.parts[l.at++]!));
            else {
              got[l.k]!.push(...l.p.end());
              if (next < streams.length) begin(l);
              else l.p = null;
            }
          }
        }
        expect(got).toEqual(alone);
      }),
      params(150),
    );
  });
});

// ---------------------------------------------------------------- 5. lose nothing

/** Text for contents and junk: ASCII words, emoji, CJK, punctuation, look-alike markers. */
const contentText: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      fc.stringMatching(/^[a-z]{1,10}$/),
      fc.constantFrom(" ", " ", "\n", ", ", ". ", '{"a": 1}', "<|end|>", "😀", "👨‍👩‍👧", "日本語", "中文", "한국어", "🏳️‍🌈", "é", "𝄞"),
      fc.string({ unit: "grapheme", maxLength: 4 }),
    ),
    { maxLength: 15 },
  )
  .map((parts) => parts.join(""));

const junkIds: fc.Arbitrary<number[]> = fc
  .array(
    fc.oneof(
      { arbitrary: anyId.map((id) => [id]), weight: 4 },
      { arbitrary: fc.nat().map((n) => fragments[n % fragments.length]!), weight: 2 },
      { arbitrary: contentText.map((s) => enc.encodeOrdinary(s)), weight: 2 },
    ),
    { maxLength: 12 },
  )
  .map((ps) => ps.flat());

interface GenMessage {
  role: "assistant" | "user" | "system" | "developer" | "tool";
  channel: string | null;
  recipient: string | null;
  contentType: string | null;
  /** Header text after the role word, with specials written out. */
  headerRest: string;
  name: string | null;
  content: string;
  stop: number;
}

const toolName = fc.stringMatching(/^[a-z][a-z_]{0,11}$/).map((s) => `functions.${s}`);

const assistantMessage: fc.Arbitrary<GenMessage> = fc
  .record({
    channel: fc.constantFrom("analysis", "commentary", "final"),
    recipient: fc.option(toolName, { nil: null }),
    before: fc.boolean(),
    ctype: fc.constantFrom(null, " json", " <|constrain|>json", "<|constrain|>json", " code"),
    content: contentText,
    stop: fc.constantFrom(T.end, T.call, T.return),
  })
  .map(({ channel, recipient, before, ctype, content, stop }) => {
    // a content type is only unambiguous after a recipient (a lone word is the recipient in v0.0.8)
    const ct = recipient === null ? null : ctype;
    let rest: string;
    if (recipient === null) rest = `<|channel|>${channel}`;
    else if (before) rest = ` to=${recipient}<|channel|>${channel}${ct ?? ""}`;
    else rest = `<|channel|>${channel} to=${recipient}${ct ?? ""}`;
    return {
      role: "assistant" as const,
      channel,
      recipient,
      contentType: ct === null ? null : ct.trim(),
      headerRest: rest,
      name: null,
      content,
      stop,
    };
  });

const otherMessage: fc.Arbitrary<GenMessage> = fc.oneof(
  fc
    .record({
      role: fc.constantFrom<"user" | "system" | "developer">("user", "system", "developer"),
      content: contentText,
    })
    .map(({ role, content }) => ({
      role,
      channel: null,
      recipient: null,
      contentType: null,
      headerRest: "",
      name: null,
      content,
      stop: T.end,
    })),
  fc.record({ tool: toolName, content: contentText }).map(({ tool, content }) => ({
    role: "tool" as const,
    channel: "commentary",
    recipient: "assistant",
    contentType: null,
    headerRest: ` to=assistant<|channel|>commentary`,
    name: tool,
    content,
    stop: T.end,
  })),
);

/** Messages of the known-bug examples. */
const BUGS_MSG: Record<"user" | "tool", GenMessage> = {
  user: { role: "user", channel: null, recipient: null, contentType: null, headerRest: "", name: null, content: "hi", stop: T.end },
  tool: {
    role: "tool",
    channel: "commentary",
    recipient: "assistant",
    contentType: null,
    headerRest: " to=assistant<|channel|>commentary",
    name: "functions.f",
    content: "{}",
    stop: T.end,
  },
};

function expectedMessage(m: GenMessage): ReferenceMessage {
  const r: Partial<ReferenceMessage> = { role: m.role };
  if (m.name !== null) r.name = m.name;
  if (m.recipient !== null) r.recipient = m.recipient;
  r.content = m.content;
  if (m.channel !== null) r.channel = m.channel;
  if (m.contentType !== null) r.content_type = m.contentType;
  return r as ReferenceMessage;
}

/** Render a message; `primedFirst`: the header has no `<|start|>role` (a completion). */
function render(m: GenMessage, primedFirst: boolean): number[] {
  const head = primedFirst ? m.headerRest : `<|start|>${m.role === "tool" ? m.name : m.role}${m.headerRest}`;
  return [...enc.encode(`${head}<|message|>`), ...enc.encodeOrdinary(m.content), m.stop];
}

function messagesOf(events: readonly HarmonyEvent[]): ReferenceMessage[] {
  return events.flatMap((e) => (e.type === "message_end" && e.message ? [e.message] : []));
}

describe("property: resilient mode loses nothing", () => {
  it("well-formed <|start|>…<|message|>…<stop> messages survive any junk around and between them", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(junkIds, fc.oneof(assistantMessage, otherMessage)), { minLength: 1, maxLength: 4 }),
        junkIds,
        fc.constantFrom<"assistant" | null>("assistant", null),
        chunking,
        (pairs, after, role, sizes) => {
          // <|endoftext|> ends a completion (rule 9), and a primed completion parses on past its
          // closing stop only when asked (rule 8): both have properties of their own
          const noEos = (junk: number[]) => junk.filter((id) => id !== T.endoftext);
          const ids = [...pairs.flatMap(([junk, msg]) => [...noEos(junk), ...render(msg, false)]), ...noEos(after)];
          const { events } = run(ids, { role, wholeMessages: true, afterStop: "parse" }, sizes);
          const finished = checkEventStream(events, true).map((f) => f.message!);
          // each message comes out, in order, with exactly its content and header fields (a
          // recipient from an abandoned junk header may be spliced into a header that has none)
          let k = 0;
          for (const [, msg] of pairs) {
            const want = expectedMessage(msg);
            const matches = (m: ReferenceMessage): boolean =>
              m.content === want.content &&
              m.role === want.role &&
              m.name === want.name &&
              m.channel === want.channel &&
              m.content_type === want.content_type &&
              (want.recipient === undefined || m.recipient === want.recipient);
            while (k < finished.length && !matches(finished[k]!)) k++;
            expect(k < finished.length, `${JSON.stringify(want)} missing from ${JSON.stringify(finished)}`).toBe(true);
            k++;
          }
        },
      ),
      params(250, [
        // "!" fills the primed header, <|start|> restarts it: the new header must not keep the primed role
        [[[[0], { ...BUGS_MSG.user }]], [], "assistant", [8]],
        [[[[0], { ...BUGS_MSG.tool }]], [], "assistant", [8]],
        [[[[], { ...BUGS_MSG.user }]], BUGS.crashAtEnd(), "assistant", [8]],
      ]),
    );
  });

  it("every word of junk text between specials reaches a delta, a recovery's raw, or a header field", () => {
    // words that the header grammar can consume as fields are left out: roles, channels,
    // content types, anything with '=' or '.' (recipients, tool names)
    const word = fc
      .stringMatching(/^[a-z]{3,9}$/)
      .filter((w) => !["assistant", "user", "system", "developer", "tool", "analysis", "commentary", "final", "json", "code"].includes(w));
    const segment = fc.array(word, { minLength: 1, maxLength: 6 }).map((ws) => ws.join(" "));
    const special = fc.oneof(fc.constantFrom(...HARMONY_SPECIALS), reservedId, notTokenId);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.array(special, { maxLength: 3 }), segment, fc.boolean()), { minLength: 1, maxLength: 8 }),
        fc.constantFrom<"assistant" | null>("assistant", null),
        chunking,
        (parts, role, sizes) => {
          // a segment is glued to the specials before it or set off by a space
          const ids = parts.flatMap(([sp, seg, glued]) => [...sp, ...enc.encodeOrdinary(glued ? `${seg} ` : ` ${seg} `)]);
          const { events } = run(ids, { role }, sizes);
          // places text can go, kept apart so words cannot be glued across them
          const texts: string[] = [];
          for (const e of events) {
            if (e.type === "delta") texts[e.index] = (texts[e.index] ?? "") + e.text;
          }
          const places = [...texts.filter((t) => t !== undefined)];
          for (const e of events) {
            if (e.type === "recovery" && e.raw !== undefined) places.push(e.raw);
            else if (e.type === "message_start") places.push(`${e.name} ${e.channel} ${e.recipient} ${e.content_type}`);
          }
          const seen = places.join("\u0000");
          for (const [, seg] of parts) {
            for (const w of seg.split(" ")) expect(seen, `word ${JSON.stringify(w)} was lost`).toContain(w);
          }
        },
      ),
      params(300, [
        // <|channel|>aaa <|channel|>bbb ccc ddd — "aaa" is dropped without a trace
        [
          [
            [[T.channel], "aaa", true],
            [[T.channel], "bbb ccc ddd", true],
          ],
          "assistant",
          [20],
        ],
        [
          [
            [[T.constrain], "aaa", false],
            [[T.constrain], "bbb ccc ddd", false],
          ],
          "assistant",
          [20],
        ],
      ]),
    );
  });
});

describe("property: resilient mode gives back text that has no header at all", () => {
  /** Text with no header syntax: no `to=`, no marker look-alikes, no leading role word. */
  const plainText: fc.Arbitrary<string> = fc
    .array(
      fc.oneof(
        fc.stringMatching(/^[a-z]{1,10}$/),
        fc.constantFrom(" ", " ", "  ", "\n", "\n\n", "\t", ", ", ". ", "café", "crème brûlée", "naïve", "😀", "👨‍👩‍👧", "🏳️‍🌈"),
        fc.constantFrom("日本語", "テキスト", "中文字符", "한국어", "𝄞", "Ωμέγα", "ẞ", "𒀀", "\u00a0", "\u3000"),
        fc.string({ unit: "grapheme", maxLength: 3 }).filter((t) => !t.includes("=") && !t.includes("<")),
      ),
      { minLength: 1, maxLength: 30 },
    )
    .map((parts) => parts.join(""))
    .filter((t) => !/^\s*assistant(\s|$)/.test(t));

  it("the deltas and recovery raws, in order, are exactly the text fed (its answer, rule 13, given again at the end)", () => {
    fc.assert(
      fc.property(
        plainText,
        fc.constantFrom<number | null>(null, T.end, T.call, T.return),
        fc.constantFrom<"assistant" | null>("assistant", null),
        chunking,
        (text, stop, role, sizes) => {
          const ids = [...enc.encodeOrdinary(text), ...(stop === null ? [] : [stop])];
          const { events } = run(ids, { role, wholeMessages: true }, sizes);
          checkEventStream(events, true);
          let out = "";
          const reasoning = new Map<number, string>();
          for (const e of events) {
            if (e.type === "delta" && e.kind === "content" && reasoning.has(e.index)) {
              // rule 13: the headerless text, given again as the answer
              expect(e.text).toBe(reasoning.get(e.index));
              continue;
            }
            if (e.type === "delta") {
              out += e.text;
              if (e.kind === "reasoning") reasoning.set(e.index, (reasoning.get(e.index) ?? "") + e.text);
            } else if (e.type === "recovery" && e.raw !== undefined) out += e.raw;
          }
          expect(out).toBe(text);
        },
      ),
      params(300, [
        ["日本語", T.end, "assistant", [8]],
        ["café crème", T.end, null, [8]],
        ["日本語のテキストです", T.end, "assistant", [8]],
        ["これは日本語の文章です とても", null, "assistant", [8]],
      ]),
    );
  });
});

// ---------------------------------------------------------------- 6. generated conversations

describe("property: well-formed conversations", () => {
  // unprimed, a conversation may begin with another author's message (then it is no completion, rule 8)
  const conversation = fc
    .record({
      primed: fc.boolean(),
      lead: fc.option(otherMessage, { freq: 3 }),
      first: assistantMessage,
      rest: fc.array(fc.oneof({ arbitrary: assistantMessage, weight: 3 }, { arbitrary: otherMessage, weight: 1 }), {
        maxLength: 5,
      }),
    })
    .map(({ primed, lead, first, rest }) =>
      primed || lead === null ? { primed, first, rest } : { primed, first: lead, rest: [first, ...rest] },
    );

  it("parse identically in strict and resilient mode and give back the generated messages", () => {
    fc.assert(
      fc.property(conversation, chunking, ({ primed, first, rest }, sizes) => {
        const msgs = [first, ...rest];
        const ids = msgs.flatMap((m, i) => render(m, primed && i === 0));
        const role = primed ? "assistant" : null;
        const strict = run(ids, { mode: "strict", role, wholeMessages: true }, sizes).events;
        // (parsing on past a closing stop, as the reference does: rule 8 has its own property)
        const resilient = run(ids, { mode: "resilient", role, wholeMessages: true, afterStop: "parse" }, sizes).events;
        const want = msgs.map(expectedMessage);
        expect(strict.filter((e) => e.type === "error")).toEqual([]);
        // no repair of the format; a call's arguments (random text here) may get a JSON repair in tool_call_end
        expect(resilient.filter((e) => e.type === "recovery" && e.kind !== "arguments_repaired")).toEqual([]);
        expect(messagesOf(strict)).toEqual(want);
        expect(messagesOf(resilient)).toEqual(want);
        // the same events, but for the JSON repair of arguments that are not JSON (rule 12)
        const unrepaired = (evs: HarmonyEvent[]) =>
          mergeDeltas(evs)
            .filter((e) => !(e.type === "recovery" && e.kind === "arguments_repaired"))
            .map((e) =>
              e.type === "tool_call_end" ? { ...e, arguments: "", valid_json: false } : e.type === "done" ? { ...e, recoveries: 0 } : e,
            );
        expect(unrepaired(resilient)).toEqual(unrepaired(strict));
        const repairs = resilient.filter((e) => e.type === "recovery").length;
        expect(resilient.at(-1)).toMatchObject({ type: "done", recoveries: repairs });
        checkEventStream(resilient, true);
        const stops = resilient.flatMap((e) => (e.type === "message_end" ? [e.stop] : []));
        expect(stops).toEqual(msgs.map((m) => (m.stop === T.end ? "end" : m.stop === T.call ? "call" : "return")));
        // tool calls: one per assistant message with a recipient, numbered in order
        const calls = resilient.filter((e) => e.type === "tool_call_start");
        const wantCalls = msgs.filter((m) => m.role === "assistant" && m.recipient !== null);
        expect(calls.map((c) => (c.type === "tool_call_start" ? c.recipient : null))).toEqual(wantCalls.map((m) => m.recipient));
        // every call is completed by its tool_call_end, with its arguments as generated when they are JSON
        const ends = resilient.filter((e) => e.type === "tool_call_end");
        expect(ends.map((e) => (e.type === "tool_call_end" ? e.call_index : -1))).toEqual(wantCalls.map((_, i) => i));
        for (const [i, e] of ends.entries()) {
          if (e.type !== "tool_call_end") continue;
          const content = wantCalls[i]!.content;
          let json = true;
          try {
            JSON.parse(content);
          } catch {
            json = false;
          }
          if (json) expect(e).toMatchObject({ arguments: content, valid_json: true });
        }
      }),
      params(300),
    );
  });

  it("a completion (primed, or whose first message is the assistant's) ends at the stop that closes a tool call or a final answer (rule 8)", () => {
    fc.assert(
      fc.property(conversation, chunking, ({ primed, first, rest }, sizes) => {
        const msgs = [first, ...rest];
        const ids = msgs.flatMap((m, i) => render(m, primed && i === 0));
        const role = primed ? "assistant" : null;
        const events = run(ids, { role, wholeMessages: true }, sizes).events;
        const closes = (m: GenMessage) =>
          m.role === "assistant" &&
          ((m.stop === T.call && m.recipient !== null) || (m.stop === T.return && m.recipient === null && m.channel === "final"));
        // unprimed, a stream whose first message is the assistant's is a completion too
        const cut = primed || msgs[0]!.role === "assistant" ? msgs.findIndex(closes) : -1;
        const kept = cut < 0 ? msgs : msgs.slice(0, cut + 1);
        expect(messagesOf(events)).toEqual(kept.map(expectedMessage));
        const after = events.filter((e) => e.type === "recovery" && e.kind === "after_stop");
        expect(after.length).toBe(cut >= 0 && cut < msgs.length - 1 ? 1 : 0);
        expect(events.at(-1)).toMatchObject({ type: "done" });
      }),
      params(300),
    );
  });
});

// ---------------------------------------------------------------- 7. rules 13-16

describe("property: rules 13–16 (docs/resilience.md)", () => {
  it("rule 13: text with no header is never content before the end: given as the answer once, last, and only when no final or call came", () => {
    fc.assert(
      fc.property(idStream(60), options, chunking, (ids, opts, sizes) => {
        const { events } = run(ids, { ...opts, mode: "resilient", wholeMessages: true }, sizes);
        const starts = new Map<number, MessageStartEvent>();
        const firstKind = new Map<number, DeltaKind>();
        let answeredBefore = false;
        const answered = new Map<number, boolean>();
        for (const [k, e] of events.entries()) {
          if (e.type === "message_start") {
            starts.set(e.index, e);
            answered.set(e.index, answeredBefore);
            if (e.role === "assistant" && (e.recipient !== null || e.channel === "final")) answeredBefore = true;
          }
          if (e.type !== "delta") continue;
          if (!firstKind.has(e.index)) firstKind.set(e.index, e.kind);
          const s = starts.get(e.index)!;
          const headerless = s.role === "assistant" && s.channel === null && s.recipient === null && firstKind.get(e.index) === "reasoning";
          if (!headerless || e.kind !== "content") continue;
          // the answer: right before its message's end, with nothing after it but that end, recoveries and done
          expect(events[k + 1], JSON.stringify(ids)).toMatchObject({ type: "message_end", index: e.index });
          expect(events.slice(k + 1).some((x) => x.type === "message_start" || x.type === "delta")).toBe(false);
          expect(answered.get(e.index), "headerless text was the answer after a final or a call").toBe(false);
        }
      }),
      params(400),
    );
  });

  /** A line's ids: text with no line feed, then a line feed (encoded alone, as a model repeats a line's tokens). */
  const line = fc.stringMatching(/^[A-Za-z][A-Za-z .,!?'-]{0,40}$/).map((t) => [...enc.encodeOrdinary(t), ...enc.encodeOrdinary("\n")]);

  it("rule 16: a line repeated more than 16 times is cut after the 16th, with one repetition recovery carrying the count; what follows is kept", () => {
    fc.assert(
      fc.property(line, fc.integer({ min: 1, max: 60 }), chunking, fc.boolean(), (l, n, sizes, analysis) => {
        const head = enc.encode(analysis ? "<|channel|>analysis<|message|>" : "<|channel|>final<|message|>");
        const after = enc.encodeOrdinary("Done: 42.");
        const ids = [...head, ...Array.from({ length: n }, () => l).flat(), ...after, T.end];
        const { events } = run(ids, { wholeMessages: true }, sizes);
        checkEventStream(events, true);
        const text = (id: number[]) => id.map((x) => vocab.text(x)).join("");
        const message = events.find((e) => e.type === "message_end")!;
        expect(message.type === "message_end" && message.message?.content).toBe(text(l).repeat(Math.min(n, REPEAT_LIMIT)) + "Done: 42.");
        const cuts = events.filter((e) => e.type === "recovery" && e.kind === "repetition");
        if (n <= REPEAT_LIMIT) expect(cuts).toEqual([]);
        else {
          expect(cuts).toHaveLength(1);
          expect(cuts[0]).toMatchObject({ at: head.length + REPEAT_LIMIT * l.length });
          expect((cuts[0] as { detail: string }).detail).toContain(`the same line ${n} times in a row`);
        }
        // bounded: nothing held past the window
        expect(events.at(-1)).toMatchObject({ type: "done" });
        // the same through takeText (a service's fast path), where it takes the chunk
        const taker = new HarmonyParser(vocab, { wholeMessages: false });
        const taken: HarmonyEvent[] = [];
        for (const c of chunks(ids, sizes)) {
          if (taker.takeText(c, 0, c.length)) taken.push({ type: "delta", index: taker.messageIndex, kind: taker.textKind, text: text(c) });
          else taken.push(...taker.write(c));
        }
        taken.push(...taker.end());
        const plain = run(ids, { wholeMessages: false }, sizes).events;
        expect(mergeDeltas(taken)).toEqual(mergeDeltas(plain));
      }),
      params(200),
    );
  });

  it("rule 16: a whole message repeated more than 16 times is cut after the 16th; the message after the loop is kept", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), contentText, chunking, (n, content, sizes) => {
        const first = enc.encode("<|channel|>analysis<|message|>Think.<|end|>");
        const copy = [...enc.encode("<|start|>assistant<|channel|>analysis<|message|>"), ...enc.encodeOrdinary(content), T.end];
        const last = enc.encode("<|start|>assistant<|channel|>final<|message|>Done.<|return|>");
        const ids = [...first, ...Array.from({ length: n }, () => copy).flat(), ...last];
        const { events } = run(ids, { wholeMessages: true }, sizes);
        checkEventStream(events, true);
        const kept = messagesOf(events);
        expect(kept.length).toBe(1 + Math.min(n, REPEAT_LIMIT) + 1);
        expect(kept.at(-1)).toEqual({ role: "assistant", content: "Done.", channel: "final" });
        const cuts = events.filter((e) => e.type === "recovery" && e.kind === "repetition");
        expect(cuts.length).toBe(n > REPEAT_LIMIT ? 1 : 0);
      }),
      params(150),
    );
  });

  it("rule 14: a completion cut anywhere inside a header gives no text and the messages before it", () => {
    const convo = fc.record({ first: assistantMessage, rest: fc.array(assistantMessage, { minLength: 1, maxLength: 3 }) });
    fc.assert(
      fc.property(convo, fc.nat(), chunking, ({ first, rest }, pick, sizes) => {
        const msgs = [first, ...rest];
        const parts = msgs.map((m, i) => render(m, i === 0));
        // the headers of the later messages: from their <|start|> to their <|message|>
        const heads: [number, number][] = [];
        let at = parts[0]!.length;
        for (const p of parts.slice(1)) {
          heads.push([at, at + p.indexOf(T.message)]);
          at += p.length;
        }
        const ids = parts.flat();
        const [from, to] = heads[pick % heads.length]!;
        const cut = from + 1 + (pick % (to - from));
        const opts = { wholeMessages: true, afterStop: "parse" as const };
        const a = run(ids.slice(0, cut), opts, sizes).events;
        const b = run(ids.slice(0, from), opts, sizes).events;
        const deltas = (evs: HarmonyEvent[]) => mergeDeltas(evs).filter((e) => e.type === "delta");
        expect(deltas(a), JSON.stringify(ids.slice(from, cut))).toEqual(deltas(b));
        expect(messagesOf(a)).toEqual(messagesOf(b));
      }),
      params(300),
    );
  });

  it("rule 15: a final channel spelled another way is the final channel, with channel_repaired; strict mode keeps the name as written", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("FINAL", "Final", "final_answer", "final>", "finalAnswer", "FINAL_ANSWER", "Final:"),
        contentText.filter((t) => t.trim() !== "" && !t.includes("<|")),
        (name, content) => {
          const ids = [...enc.encode(`<|channel|>${name}<|message|>`), ...enc.encodeOrdinary(content), T.return];
          const r = run(ids, { wholeMessages: true }).events;
          expect(messagesOf(r)).toEqual([{ role: "assistant", content, channel: "final" }]);
          expect(r.filter((e) => e.type === "recovery").map((e) => (e as { kind: string }).kind)).toEqual(["channel_repaired"]);
          expect(r.some((e) => e.type === "delta" && e.kind !== "content")).toBe(false);
          const s = run(ids, { mode: "strict", wholeMessages: true }).events;
          expect(messagesOf(s)).toEqual([{ role: "assistant", content, channel: name }]);
        },
      ),
      params(150),
    );
  });
});
