/**
 * The sessions' door (src/service/door.ts) for a Chat stream on the main
 * thread: a flush of one stream's ids that make a text step is taken alone
 * (src/service/connection.ts `textNow`) and reaches the stream's text
 * listener, with no event object; every other step reaches its event
 * listener, in order. Fed step by step, with and without a text listener,
 * and with two streams' ids in one flush (a batch: text steps then come as
 * `chat_delta` events), the text, the chunks' other fields and the metrics'
 * counts are the same.
 */
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/json.js";
import { HARMONY } from "../../src/core/preset.js";
import { SessionDoor, type DoorEvent } from "../../src/service/door.js";
import { DEFAULT_LIMITS, DEFAULTS, Service } from "../../src/service/service.js";

let svc: Service;

beforeAll(() => {
  svc = new Service({ ...DEFAULTS, workers: 0, limits: DEFAULT_LIMITS, logger: pino({ level: "silent" }) });
  svc.start();
});

afterAll(async () => {
  await svc.close();
});

/** Reasoning, then an answer with a quote, a newline and non-ASCII text, then <|return|>. */
function completion(): number[] {
  const T = HARMONY.tokens;
  const text = (s: string) => svc.encoding.encodeOrdinary(s);
  return [
    T.channel,
    ...text("analysis"),
    T.message,
    ...text("Think about it briefly."),
    T.end,
    T.start,
    ...text("assistant"),
    T.channel,
    ...text("final"),
    T.message,
    ...text('Hello "world",\nété 🦀.'),
    T.return,
  ];
}

/** What one stream's listeners got: each step as "text" (the text listener) or "event" (its event listener), and the fields' text. */
interface Got {
  how: ("text" | "delta" | "event")[];
  fields: Map<string, string>;
  finishes: unknown[];
}

function listenTo(door: SessionDoor, stream: string, withText: boolean): Got {
  const got: Got = { how: [], fields: new Map(), finishes: [] };
  const add = (field: string, text: string) => got.fields.set(field, (got.fields.get(field) ?? "") + text);
  door.listen(stream, (ev: DoorEvent) => {
    const plain = ev.chat_delta as { field: string; text: string } | undefined;
    if (plain !== undefined) {
      got.how.push("delta");
      return add(plain.field, plain.text);
    }
    got.how.push("event");
    const choice = ((ev.openai as JsonObject | undefined)?.choices as JsonObject[] | undefined)?.[0];
    // a chunk without a choice (the last, with the harmony stats) or a stream's own event: its keys
    if (choice === undefined) return void got.finishes.push(Object.keys((ev.openai as JsonObject | undefined) ?? ev).sort());
    for (const [k, v] of Object.entries((choice.delta as JsonObject | undefined) ?? {})) if (typeof v === "string") add(k, v);
    if (choice.finish_reason) got.finishes.push(choice.finish_reason);
  });
  if (withText)
    door.listenText(stream, (field, text) => {
      got.how.push("text");
      add(field, text);
    });
  return got;
}

const OPEN = { format: "openai.chat", model: "gpt-oss-20b", tools: [], calls: "any" } as const;

/** The metrics' token and delta counts so far. */
async function counts(): Promise<{ tokens: number; deltas: number }> {
  const m = svc.metrics;
  const tokens = (await m.tokens.get()).values[0]?.value ?? 0;
  const deltas = (await m.events.get()).values.find((v) => v.labels.type === "delta")?.value ?? 0;
  return { tokens, deltas };
}

/** One stream fed a step (an id) a flush; `streams` streams fed in step in one flush each step. */
async function run(withText: boolean, streams: number): Promise<{ got: Got[]; tokens: number; deltas: number }> {
  const before = await counts();
  const door = new SessionDoor(svc, "t");
  const names = Array.from({ length: streams }, () => door.name("gen"));
  const got = names.map((name) => listenTo(door, name, withText));
  for (const name of names) door.open(name, OPEN);
  door.flush();
  for (const id of completion()) {
    for (const name of names) door.tokens(name, [id]);
    door.flush();
  }
  for (const name of names) door.close(name, "eos");
  door.flush();
  door.leave();
  const after = await counts();
  return { got, tokens: after.tokens - before.tokens, deltas: after.deltas - before.deltas };
}

describe("the door's text steps", () => {
  it("one stream's text step is taken alone and reaches the text listener; the rest are events, in order", async () => {
    const { got } = await run(true, 1);
    const g = got[0]!;
    expect(g.how).not.toContain("delta");
    const texts = g.how.filter((h) => h === "text").length;
    // every id inside the two messages' text but each message's first (whose chunk opens the role or field) is a text step
    expect(texts).toBeGreaterThan(10);
    expect(g.fields.get("reasoning")).toBe("Think about it briefly.");
    expect(g.fields.get("content")).toBe('Hello "world",\nété 🦀.');
    expect(g.finishes).toContain("stop");
  });

  it("without a text listener, or two streams' ids in one flush, the same steps come as chat_delta events, with the same text and counts", async () => {
    const alone = await run(true, 1);
    const plain = await run(false, 1);
    const two = await run(true, 2);
    const want = alone.got[0]!;
    for (const g of [plain.got[0]!, ...two.got]) {
      expect(g.how).not.toContain("text");
      expect(g.how.map((h) => (h === "delta" ? "text" : h))).toEqual(want.how);
      expect(g.fields).toEqual(want.fields);
      expect(g.finishes).toEqual(want.finishes);
    }
    const ids = completion().length;
    expect(alone.tokens).toBe(ids);
    expect(plain.tokens).toBe(ids);
    expect(two.tokens).toBe(2 * ids);
    expect(alone.deltas).toBe(plain.deltas);
    expect(two.deltas).toBe(2 * alone.deltas);
  });

  it("however the ops are grouped into flushes (steps in one, a stream's last ids with its close, another stream's open between), the same text, fields and finish", async () => {
    const ids = completion();
    /** One stream fed `per` ids a flush, its close with its last ids or in a flush of its own, another stream opened and closed in its second flush or not. */
    const feed = async (per: number, closeWithLast: boolean, openBetween: boolean) => {
      const door = new SessionDoor(svc, "t");
      const name = door.name("gen");
      const got = listenTo(door, name, true);
      door.open(name, OPEN);
      door.flush();
      for (let at = 0; at < ids.length; at += per) {
        // a step an id each, `per` of them before the flush (several engine chunks read at once)
        for (const id of ids.slice(at, at + per)) door.tokens(name, [id]);
        if (openBetween && at === per) {
          const other = door.name("gen");
          door.open(other, OPEN);
          door.close(other, "eos");
        }
        if (closeWithLast && at + per >= ids.length) door.close(name, "eos");
        door.flush();
      }
      if (!closeWithLast) {
        door.close(name, "eos");
        door.flush();
      }
      door.leave();
      return got;
    };
    const want = await feed(1, false, false);
    for (const [per, closeWithLast, openBetween] of [
      [1, true, false],
      [3, false, false],
      [3, true, true],
      [ids.length, true, false],
    ] as const) {
      const g = await feed(per, closeWithLast, openBetween);
      expect(g.fields).toEqual(want.fields);
      expect(g.finishes).toEqual(want.finishes);
    }
    expect(want.fields.get("content")).toBe('Hello "world",\nété 🦀.');
    expect(want.finishes).toContain("stop");
  });

  it("two streams' steps in flushes of their own, taking turns: each text step reaches its own stream's text listener, and a stream closed and another opened under a new name is found anew", async () => {
    const ids = completion();
    const door = new SessionDoor(svc, "t");
    const names = [door.name("gen"), door.name("gen")];
    const got = names.map((name) => listenTo(door, name, true));
    for (const name of names) door.open(name, OPEN);
    door.flush();
    for (const id of ids) {
      // (each flush one stream's ids alone: the connection's textNow, the door's and the stream book's last stream switching)
      for (const name of names) {
        door.tokens(name, [id]);
        door.flush();
      }
    }
    for (const name of names) door.close(name, "eos");
    door.flush();
    // a third stream after the first two closed: its steps are its own
    const third = door.name("gen");
    const late = listenTo(door, third, true);
    door.open(third, OPEN);
    door.flush();
    for (const id of ids) {
      door.tokens(third, [id]);
      door.flush();
    }
    door.close(third, "eos");
    door.flush();
    door.leave();
    for (const g of [...got, late]) {
      expect(g.fields.get("content")).toBe('Hello "world",\nété 🦀.');
      expect(g.fields.get("reasoning")).toBe("Think about it briefly.");
      expect(g.how.filter((h) => h === "text").length).toBeGreaterThan(10);
      expect(g.finishes).toContain("stop");
    }
  });
});
