/**
 * The clients' share of an event-loop turn (src/service/turn.ts). libuv reads
 * a socket up to 32 times before it looks at another, and ws emits every
 * frame of those reads at once: a client that writes faster than its frames
 * are parsed held the main thread for 250–330 ms (bench/hostile (l)), with
 * /healthz unread. Here a connection's frames are given as ws gives them, all
 * in one callback, through a transport that records what is asked of it.
 */
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { CloseCode } from "../../src/core/errors.js";
import type { Transport } from "../../src/service/connection.js";
import { DEFAULT_LIMITS } from "../../src/service/service.js";
import { TurnBudget } from "../../src/service/turn.js";
import { Server } from "../../src/server.js";
import { harmony } from "../helpers.js";

const { enc } = harmony();
const running: Server[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

async function start(turn?: TurnBudget): Promise<Server> {
  const svc = new Server({
    host: "127.0.0.1",
    port: 0,
    grpcPort: 0,
    workers: 1,
    drainTimeoutMs: 5000,
    logger: pino({ level: "silent" }),
    limits: { ...DEFAULT_LIMITS },
  });
  running.push(svc);
  // a budget of 0 ms: every look at it past the first in a turn finds it spent (reading split as finely as it can be)
  if (turn !== undefined) Object.assign(svc.service, { turn });
  await svc.start();
  return svc;
}

/** A transport that keeps what it was asked, in order: the answers' JSON, and "pause" / "resume". */
function recording(log: string[], sent: string[] = [], name = ""): Transport {
  return {
    kind: "ws",
    send(frame, done) {
      log.push(typeof frame === "string" ? frame : `bytes ${frame.length}`);
      sent.push(name);
      done();
    },
    pause: () => void log.push("pause"),
    resume: () => void log.push("resume"),
    end: (code: CloseCode) => void log.push(`end ${code}`),
  };
}

const answers = (log: string[]) => log.filter((l) => l !== "pause" && l !== "resume");

/** The text deltas of every answer, in order. */
function deltaText(log: string[]): string {
  let text = "";
  for (const a of answers(log)) {
    const frameOut = JSON.parse(a) as { events?: { delta?: { text?: string } }[] };
    for (const ev of frameOut.events ?? []) text += ev.delta?.text ?? "";
  }
  return text;
}

async function until(f: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await f())) await new Promise((r) => setTimeout(r, 5));
}

describe("the turn budget", () => {
  it("ends a turn at the loop's check phase", async () => {
    const turn = new TurnBudget(5);
    expect(turn.spent(100)).toBe(false); // the first call starts the turn
    expect(turn.spent(104)).toBe(false);
    expect(turn.spent(105)).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(turn.spent(200)).toBe(false); // a new turn
    expect(turn.spent(205)).toBe(true);
  });

  it("defers a connection's frames past the turn's budget, pauses its reading, and answers every frame in order", async () => {
    const svc = await start();
    const log: string[] = [];
    // which connection each answer went to, in the order they went
    const sent: string[] = [];
    const conn = svc.service.newConnection(recording(log, sent, "a"), "t");
    // 200 frames of 5,000 content tokens: far more than TURN_MS of decoding and parsing on any machine
    const word = enc.encode(" lorem")[0]!;
    const head = JSON.stringify({
      ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids: enc.encode("<|channel|>final<|message|>") } }],
    });
    const frame = JSON.stringify({ ops: [{ tokens: { stream: "a", ids: new Array<number>(5000).fill(word) } }] });
    const FRAMES = 200;
    conn.onFrame(head);
    for (let i = 0; i < FRAMES; i++) conn.onFrame(frame);
    // the frames given in this one callback past the budget wait: the transport was paused, not all were answered
    expect(log).toContain("pause");
    expect(answers(log).length).toBeLessThan(FRAMES + 1);
    // a second connection's frame given now is answered before the first's last: each waiting connection moves every turn
    const log2: string[] = [];
    const other = svc.service.newConnection(recording(log2, sent, "b"), "t");
    other.onFrame(
      JSON.stringify({ ops: [{ open: { stream: "b" } }, { tokens: { stream: "b", ids: enc.encode("<|channel|>final<|message|>Hi") } }] }),
    );
    await until(() => answers(log).length === FRAMES + 1 && answers(log2).length === 1);
    const beforeOther = sent.indexOf("b");
    expect(beforeOther).toBeGreaterThan(0);
    expect(beforeOther).toBeLessThan(FRAMES + 1);
    // all read, reading resumed: every pause was followed by its resume
    expect(log.lastIndexOf("resume")).toBeGreaterThan(log.lastIndexOf("pause"));
    expect(log.filter((l) => l === "pause").length).toBe(log.filter((l) => l === "resume").length);
    // in order: every content token of every frame, as the answers' text deltas
    const text = deltaText(log);
    expect(text).toBe(" lorem".repeat(FRAMES * 5000));
    conn.close();
    other.close();
  });

  it("reads a frame of thousands of ops over several turns, answers it as the same one frame, and serves others between its parts", async () => {
    // 2,000 streams opened, fed and closed in one frame, with a refused open among them (its error in the answer)
    const ops: unknown[] = [];
    for (let i = 0; i < 2000; i++) {
      ops.push({ open: { stream: `s${i}` } });
      ops.push({ tokens: { stream: `s${i}`, ids: enc.encode(`<|channel|>final<|message|>Hi ${i}<|return|>`) } });
      if (i === 1000) ops.push({ open: { stream: "s1000" } });
      ops.push({ close: { stream: `s${i}` } });
    }
    const big = JSON.stringify({ ops });
    const small = JSON.stringify({
      ops: [{ open: { stream: "b" } }, { tokens: { stream: "b", ids: enc.encode("<|channel|>final<|message|>Hi") } }],
    });
    const read = async (turn: TurnBudget) => {
      const svc = await start(turn);
      const sent: string[] = [];
      const log: string[] = [];
      const log2: string[] = [];
      const a = svc.service.newConnection(recording(log, sent, "a"), "t");
      const b = svc.service.newConnection(recording(log2, sent, "b"), "t");
      a.onFrame(big);
      b.onFrame(small);
      await until(() => answers(log).length === 1 && answers(log2).length === 1);
      a.close();
      b.close();
      return { answer: answers(log)[0]!, small: answers(log2)[0]!, order: sent.join(""), paused: log.includes("pause") };
    };
    const whole = await read(new TurnBudget(60_000));
    const split = await read(new TurnBudget(0));
    // one turn for all of it: the big frame answered first, its connection never paused
    expect(whole.order).toBe("ab");
    expect(whole.paused).toBe(false);
    // read in parts: the other connection's frame answered between them, the big one's reading paused meanwhile
    expect(split.order).toBe("ba");
    expect(split.paused).toBe(true);
    // and the same answers, event for event
    expect(split.answer).toBe(whole.answer);
    expect(split.small).toBe(whole.small);
    const events = (JSON.parse(split.answer) as { events: { stream: string; delta?: { text: string }; error?: { code: string } }[] })
      .events;
    expect(events.filter((e) => e.error?.code === "duplicate_stream").map((e) => e.stream)).toEqual(["s1000"]);
    expect(
      events
        .filter((e) => e.stream === "s1999" && e.delta)
        .map((e) => e.delta!.text)
        .join(""),
    ).toBe("Hi 1999");
  });

  it("reads none of a congested connection's waiting frames until its client reads its answers, then all of them in order", async () => {
    const svc = await start(new TurnBudget(0));
    const log: string[] = [];
    // answers the client has not read yet: their `done` is called when it reads them
    const unread: (() => void)[] = [];
    const conn = svc.service.newConnection(
      {
        ...recording(log),
        send(frame, done) {
          log.push(typeof frame === "string" ? frame : `bytes ${frame.length}`);
          unread.push(done);
        },
      },
      "t",
    );
    const word = enc.encode(" lorem")[0]!;
    conn.onFrame(
      JSON.stringify({ ops: [{ open: { stream: "a" } }, { tokens: { stream: "a", ids: enc.encode("<|channel|>final<|message|>") } }] }),
    );
    // frames of 20,000 content tokens, ~120 KB of answer each: the 8 MiB bound is past after ~70 answers, and up to
    // maxInflightFrames (64) more may have been read by then, waiting on the worker; 160 leave some unread on any machine
    const FRAMES = 160;
    const frame = JSON.stringify({ ops: [{ tokens: { stream: "a", ids: new Array<number>(20_000).fill(word) } }] });
    for (let i = 0; i < FRAMES; i++) conn.onFrame(frame);
    // the frames the service has read (harmony_frames_total{transport="ws"})
    const framesRead = async () => {
      const text = await svc.service.metrics.registry.getSingleMetricAsString("harmony_frames_total");
      return Number(/transport="ws"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    // congested by its unread answers (not only paused by the turn's budget or by frames in flight, which the
    // worker's answers relieve), and every frame read so far answered: nothing of it is still on its way
    await until(async () => conn.stalledMs > 0 && answers(log).length === (await framesRead()));
    expect(log).toContain("pause");
    // turn after turn: a congested connection's waiting frames stay unread
    const before = await framesRead();
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    expect(await framesRead()).toBe(before);
    expect(before).toBeLessThan(FRAMES + 1);
    // the client reads: the rest are read and answered, in order
    while (answers(log).length < FRAMES + 1) {
      for (const done of unread.splice(0)) done();
      await new Promise((r) => setImmediate(r));
    }
    const text = deltaText(log);
    expect(text).toBe(" lorem".repeat(FRAMES * 20_000));
    conn.close();
  });
});
