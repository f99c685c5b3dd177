/**
 * bench/front/inproc: the front's own work per token, in one process, with
 * no engine or client process beside it: what the same code costs run in a
 * tight loop and run in bursts an engine step apart, as a paced engine
 * drives it (issue #35).
 *
 * Three set-ups, each fed the bench's completion (./completion.ts) one id per
 * stream per step, every stream in each step:
 * - `write`: one write a token of a fixed Chat delta, as one HTTP/1.1 chunk,
 *   to a socket (what a relay does per token, less its read): the baseline;
 * - `host`: the service's session host alone (the parser and its Chat
 *   adapter), a batch per stream per step as the door's connection feeds it;
 * - `path`: src/service/generate.ts with a stand-in engine (its chunks handed
 *   over already read and checked), through the sessions' door, connection
 *   and host (the parser and its Chat adapter), into a sink that counts the
 *   deltas: the sidecar's layers between the engine's reader and the answer;
 * - `answer`: the same into the front's ChatAnswer (src/transport/front/), its
 *   chunks written to a socket as the front writes them.
 * The sockets' other end is a child process that reads and drops, so this
 * process's CPU (user + system, every thread) is the front's alone. Each
 * set-up runs `tight` (the steps back to back, a turn of the event loop
 * between them) and `paced` (`--pace` ms between steps), in every round, the
 * order rotated. "busy" is the wall time of the steps' own work.
 *
 * The engine's HTTP body, its SSE split, JSON.parse and chunk checks are not
 * in it (bench/front's `chat` set-up has them, with the processes beside it).
 *
 *     node dist/bench/front/inproc.js [--streams 64] [--tokens 2048] [--pace 10] [--rounds 3] [--json FILE]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import net from "node:net";
import { createInterface } from "node:readline";
import { Command } from "commander";
import { pino } from "pino";
import type { JsonObject } from "../../src/core/json.js";
import type { OpsResult } from "../../src/pool/task.js";
import { planChat, type ChatPlan } from "../../src/openai/plan.js";
import { generate, type GenerationSink } from "../../src/service/generate.js";
import { DEFAULT_LIMITS, DEFAULTS, Service } from "../../src/service/service.js";
import { ChatAnswer } from "../../src/transport/front/chat-answer.js";
import { chatOpen } from "../../src/transport/front/chat.js";
import { chunkOf } from "../../src/transport/client-flow.js";
import type { Engine, EventAnswer, OnChunk } from "../../src/upstream/engine.js";
import { bodyChars, completionIds } from "./completion.js";
import { median } from "./report.js";
import { responseOn } from "./response-on.js";

const opts = new Command()
  .description("the front's own work per token in one process, tight and paced (issue #35)")
  .option("--streams <n>", "concurrent streams", (v) => Number(v), 64)
  .option("--tokens <n>", "ids per completion", (v) => Number(v), 2048)
  .option("--pace <ms>", "milliseconds between engine steps in the paced runs", (v) => Number(v), 10)
  .option("--rounds <n>", "rounds of every set-up and mode (medians over them)", (v) => Number(v), 3)
  .option("--json <file>", "also write every run's figures and the medians as JSON")
  .parse()
  .opts<{ streams: number; tokens: number; pace: number; rounds: number; json?: string }>();

const SETUPS = ["write", "host", "path", "answer"] as const;
type Setup = (typeof SETUPS)[number];
type Mode = "tight" | "paced";

/** A child process that takes connections, reads them and drops what it reads; its port. */
async function startDrain(): Promise<{ proc: ChildProcess; port: number }> {
  const code = `const s=require("node:net").createServer((c)=>c.resume()).listen(0,"127.0.0.1",()=>console.log(s.address().port));`;
  const proc = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once("line", resolve);
    proc.once("exit", (c) => reject(new Error(`the drain process exited (${c}) before it listened`)));
  });
  return { proc, port: Number(line) };
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s));
    s.setNoDelay(true);
    s.once("error", reject);
  });
}

/** One stream's step: its next id (a promise while something holds it back). */
type Feed = (step: number) => Promise<void> | void;

/** A stand-in engine: each stream() a feed the driver steps, its last id ending the completion with `stop`. */
function feedEngine(ids: readonly number[], feeds: Feed[]): Engine {
  const stream = (_r: unknown, _s: AbortSignal, onChunk: OnChunk, onDrained?: () => EventAnswer): Promise<void> =>
    new Promise((resolve) => {
      feeds.push(async (step) => {
        const last = step === ids.length - 1;
        const a = onChunk({ choices: [{ index: 0, token_ids: [ids[step]!], finish_reason: last ? "stop" : null }], usage: null });
        if (a !== undefined && a !== "stop") await a;
        const b = onDrained?.();
        if (b !== undefined && b !== "stop") await b;
        if (last) resolve();
      });
    });
  return { stream } as unknown as Engine;
}

/** The deltas' text of a Chat chunk. */
function deltaChars(obj: JsonObject): number {
  const choices = obj.choices as { delta?: { content?: string; reasoning?: string } }[] | undefined;
  let n = 0;
  for (const c of choices ?? []) n += (c.delta?.content?.length ?? 0) + (c.delta?.reasoning?.length ?? 0);
  return n;
}

interface Run {
  setup: Setup;
  mode: Mode;
  round: number;
  usPerToken: number;
  busyUsPerToken: number;
  /** The deltas' text that reached the sink or the answer (0 for write). */
  chars: number;
  /** Bytes handed to the sockets (0 for path). */
  written: number;
}

const REQUEST = { model: "openai/gpt-oss-20b", messages: [{ role: "user", content: "Write a few sentences about relays." }], stream: true };
const LINE = `data: ${JSON.stringify({ id: "chatcmpl-0123456789ab", object: "chat.completion.chunk", created: 1765080000, model: REQUEST.model, choices: [{ index: 0, delta: { content: " relay" }, finish_reason: null, logprobs: null }] })}\n\n`;

/** How the door's connection opens a Chat stream (src/service/connection.ts openSpec), but for its format and name. */
const HOST_OPEN = {
  role: "assistant",
  mode: "resilient",
  wholeMessages: false,
  nonStrict: false,
  callIdPrefix: "call_0123456789ab_",
  rememberReasoning: true,
  memoScope: "",
  afterStop: "drop",
  tools: null,
  calls: "any",
} as const;
/** The host set-up's connection numbers (one a run, never a real connection's). */
let hostConns = 1_000_000;

async function runOnce(svc: Service, ids: readonly number[], drainPort: number, setup: Setup, mode: Mode, round: number): Promise<Run> {
  const n = opts.streams;
  const socks = await Promise.all(Array.from({ length: n }, () => connect(drainPort)));
  const feeds: Feed[] = [];
  const ends: Promise<unknown>[] = [];
  /** What is undone once the run is measured. */
  const afterwards: (() => void)[] = [];
  let chars = 0;
  if (setup === "write") {
    for (const s of socks)
      feeds.push(() => {
        if (!s.write(chunkOf(LINE))) return new Promise<void>((r) => s.once("drain", r));
      });
  } else if (setup === "host") {
    // the service's inline session host alone, fed as the door's connection feeds it: a batch per stream per step
    const host = svc.pool.inlineHost!;
    const conn = ++hostConns;
    const take = (r: OpsResult) => {
      for (const o of r.objects ?? []) {
        const plain = o.chat_delta as { text: string } | undefined;
        chars += plain !== undefined ? plain.text.length : deltaChars((o.openai ?? {}) as JsonObject);
      }
    };
    const u32 = Uint32Array.from(ids);
    const format = {
      kind: "openai.chat",
      id: "chatcmpl-0123456789ab",
      model: REQUEST.model,
      created: 1,
      reasoningField: "reasoning",
    } as const;
    host.begin(conn, true, true);
    const sessions = socks.map((_, k) => host.openStream(k + 1, { ...HOST_OPEN, format, name: `gen-${k + 1}`, handle: 0 }));
    take(host.finish());
    sessions.forEach((session, k) =>
      feeds.push((step) => {
        host.begin(conn, true, true);
        host.tokensOf(session, u32, step, step + 1);
        if (step === ids.length - 1) host.closeStream(k + 1, "eos");
        take(host.finish());
      }),
    );
    afterwards.push(() => host.drop(conn));
  } else {
    const engine = feedEngine(ids, feeds);
    const plan = planChat(REQUEST, "reasoning") as ChatPlan;
    const open = chatOpen(plan);
    for (const s of socks) {
      const answer = setup === "answer" ? new ChatAnswer(svc, responseOn(s), plan) : null;
      const sink: GenerationSink = {
        event: (choice, obj) => {
          chars += deltaChars(obj);
          answer?.event(choice, obj);
        },
        text: (choice, field, text) => {
          chars += text.length;
          answer?.text(choice, field, text);
        },
        ids: (choice, got, lps) => answer?.ids(choice, got, lps),
        wait: () => answer?.wait() ?? null,
      };
      const gen = generate(svc, engine, { ...plan.engine, prompt: [1], n: 1 }, open, "bench", sink);
      if (answer !== null) answer.endChoice = gen.endChoice;
      ends.push(gen.done.then((d) => answer?.finish(d)));
    }
  }
  await new Promise((r) => setImmediate(r));
  const steps = ids.length;
  let busy = 0;
  const t0 = process.cpuUsage();
  for (let step = 0; step < steps; step++) {
    const w0 = performance.now();
    for (const f of feeds) {
      const p = f(step);
      if (p) await p;
    }
    busy += performance.now() - w0;
    if (mode === "paced") await new Promise((r) => setTimeout(r, opts.pace));
    // (a turn a step: the answer's writes go at a turn's end, src/transport/client-flow.ts)
    else await new Promise((r) => setImmediate(r));
  }
  await Promise.all(ends);
  const c = process.cpuUsage(t0);
  let written = 0;
  for (const s of socks) {
    written += s.bytesWritten;
    s.destroy();
  }
  for (const f of afterwards) f();
  const tokens = n * steps;
  return { setup, mode, round, usPerToken: (c.user + c.system) / tokens, busyUsPerToken: (busy * 1000) / tokens, chars, written };
}

/**
 * Whether a run did its whole work: every delta's text reached the sink,
 * and the sockets got every write (the baseline's chunks byte for byte; the
 * answer's chunks carry the text and their JSON around it).
 */
function delivered(r: Run, expectedChars: number): boolean {
  if (r.setup === "write") return r.written === opts.streams * opts.tokens * Buffer.byteLength(chunkOf(LINE));
  if (r.chars !== expectedChars) return false;
  return r.setup === "answer" ? r.written > expectedChars : r.written === 0;
}

/** A set-up's medians in one mode. */
interface Row {
  mode: Mode;
  setup: Setup;
  usPerToken: number;
  xWrite: number;
  busyUsPerToken: number;
  xTight: number;
  chars: number;
  delivered: boolean;
}

async function main(): Promise<void> {
  const svc = new Service({ ...DEFAULTS, workers: 0, limits: DEFAULT_LIMITS, logger: pino({ level: "silent" }) });
  svc.start();
  const ids = completionIds(opts.tokens, (t) => svc.encoding.encodeOrdinary(t));
  const vocab = svc.vocabulary();
  const expectedChars = opts.streams * bodyChars(ids, (id) => vocab.text(id));
  const drain = await startDrain();
  const runs: Run[] = [];
  try {
    for (let round = 0; round < opts.rounds + 1; round++) {
      for (const mode of ["tight", "paced"] as const) {
        const order = SETUPS.map((_, i) => SETUPS[(i + round) % SETUPS.length]!);
        for (const setup of order) {
          const r = await runOnce(svc, ids, drain.port, setup, mode, round);
          // round 0 warms every set-up and is not reported
          if (round > 0) runs.push(r);
          process.stderr.write(`${round === 0 ? "warm-up" : `round ${round}`}, ${mode}, ${setup}: ${r.usPerToken.toFixed(2)} µs a token\n`);
        }
      }
    }
  } finally {
    drain.proc.kill();
    await svc.close();
  }
  const rows: Row[] = [];
  const of = (mode: Mode, setup: Setup) => runs.filter((r) => r.mode === mode && r.setup === setup);
  for (const mode of ["tight", "paced"] as const)
    for (const setup of SETUPS) {
      const mine = of(mode, setup);
      // ratios round by round: this set-up over the write baseline, and paced over tight, in the same round
      const xWrite = median(mine.map((r) => r.usPerToken / of(mode, "write").find((w) => w.round === r.round)!.usPerToken));
      const xTight = median(mine.map((r) => r.usPerToken / of("tight", setup).find((t) => t.round === r.round)!.usPerToken));
      rows.push({
        mode,
        setup,
        usPerToken: median(mine.map((r) => r.usPerToken)),
        xWrite,
        busyUsPerToken: median(mine.map((r) => r.busyUsPerToken)),
        xTight,
        chars: Math.min(...mine.map((r) => r.chars)),
        delivered: mine.every((r) => delivered(r, expectedChars)),
      });
    }
  const lines = [
    `## bench/front/inproc: ${new Date().toISOString()}`,
    "",
    `Node ${process.version}; ${opts.streams} streams × ${opts.tokens} ids, one id per stream per step; paced: ${opts.pace} ms between steps; ${opts.rounds} rounds after a warm-up (medians; ratios round by round).`,
    "",
    "| mode | set-up | CPU µs/token | × write | busy µs/token | paced ÷ tight | all delivered |",
    "|---|---|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${r.mode} | ${r.setup} | ${r.usPerToken.toFixed(2)} | ${r.xWrite.toFixed(2)}× | ${r.busyUsPerToken.toFixed(2)} | ${r.mode === "paced" ? `${r.xTight.toFixed(2)}×` : "–"} | ${r.delivered ? "yes" : "**no**"} |`,
    ),
  ];
  console.log(lines.join("\n"));
  if (opts.json)
    writeFileSync(
      opts.json,
      JSON.stringify({ streams: opts.streams, tokens: opts.tokens, pace: opts.pace, expectedChars, runs, rows }, null, 2),
    );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
