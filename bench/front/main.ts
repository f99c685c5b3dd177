/**
 * What the OpenAI front costs per token, beside a plain relay, in one run
 * (issue #35). Set-ups, alternated in rounds (the order rotated each round):
 *
 * - `engine`: the clients read the engine stand-in (./engine.ts) directly;
 * - `relay`: through a plain node:http SSE pass-through (./relay.ts);
 * - `floor`: Chat chunks through the least a Node front does to make them
 *   (./floor.ts: the sidecar's parser and chunk adapter, nothing else);
 * - `in-place`: the floor with `--in-place`: ids read from the engine's bytes
 *   where they lie, plain deltas written from a template;
 * - `chat LABEL`, `responses LABEL`: through a sidecar's `/v1/chat/completions`
 *   and `/v1/responses` (`node CLI serve --upstream ENGINE`);
 * - `codex LABEL`: `/v1/responses` asked as Codex CLI asks (carried
 *   reasoning, summaries: ./client.ts);
 * - `ws LABEL`: the sidecar's WebSocket edge, streams opened with
 *   `format: "openai.chat"` through the bundled client, fed the engine's ids
 *   by the client process (./client.ts).
 *
 * The engine, the relay, every sidecar and the clients are separate
 * processes, so each one's CPU (read from /proc) is its own. Each run:
 * `--streams` concurrent streams, each making `--requests` requests of
 * `--tokens` ids, at each pace of `--rate` (engine steps/s, 0: flat out).
 * Reported: tokens/s, TTFT and the gap between token events (p50/p99), CPU
 * µs per token of the engine, the front and the clients, medians over
 * rounds, and ratios against the relay (each round's, then their median).
 *
 * `node dist/bench/front/main.js --help` lists the flags; ./README.md says more.
 */
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import type { Kind, RunCommand, RunResult } from "./client.js";
import {
  awaitReady,
  cpuMicros,
  forkClient,
  post,
  procCounters,
  spawnNode,
  stop,
  type ClientProc,
  type Proc,
  type ProcCounters,
} from "./procs.js";
import { histogramOf, markdown, rows, versusFirst, type Figures } from "./report.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const list = (v: string) =>
  v
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");
const numbers = (v: string) => list(v).map(Number);

const opts = new Command()
  .description("the OpenAI front's cost per token beside a plain SSE relay (issue #35)")
  .option("--streams <list>", "concurrent streams, one run each", numbers, [1, 16, 64, 256])
  .option("--rate <list>", "engine steps per second, one run each (0: flat out)", numbers, [100, 0])
  .option("--step-tokens <n>", "ids per stream per engine step (one SSE event)", (v) => Number(v), 1)
  .option("--tokens <n>", "ids per completion", (v) => Number(v), 256)
  .option("--requests <n>", "requests each stream makes, one after another", (v) => Number(v), 1)
  .option("--rounds <n>", "rounds of every set-up (medians over them)", (v) => Number(v), 3)
  .option("--warmup <n>", "unreported rounds of every set-up at the first pace, 16 streams, before the rest", (v) => Number(v), 1)
  .option("--clients <n>", "client processes sharing each run's streams", (v) => Number(v), 1)
  .option(
    "--sidecar <[label=]cli.js>",
    "a built sidecar to measure (repeatable; default: this build's dist/src/cli.js)",
    (v: string, acc: string[]) => [...acc, v],
    [] as string[],
  )
  .option("--sidecar-args <flags>", "extra `serve` flags for every sidecar, space-separated", "")
  .option("--sidecar-node <flags>", "node flags for every sidecar, space-separated (e.g. --cpu-prof --cpu-prof-dir=DIR)", "")
  .option(
    "--sidecar-node-for <label=flags>",
    "node flags for one sidecar (by its --sidecar label), after --sidecar-node's (repeatable; e.g. a V8 flag A/B'd on one build)",
    (v: string, acc: string[]) => [...acc, v],
    [] as string[],
  )
  .option(
    "--setups <list>",
    "which set-ups: engine, relay, floor, in-place, chat, responses, codex (Responses asked as Codex asks), ws",
    list,
    ["engine", "relay", "floor", "in-place", "chat", "responses", "ws"],
  )
  .option("--json <file>", "also write every run's figures and the medians as JSON")
  .option("--report <file>", "run nothing: print the tables of an earlier run's --json file")
  .parse()
  .opts<{
    streams: number[];
    rate: number[];
    stepTokens: number;
    tokens: number;
    requests: number;
    rounds: number;
    warmup: number;
    clients: number;
    sidecar: string[];
    sidecarArgs: string;
    sidecarNode: string;
    sidecarNodeFor: string[];
    setups: string[];
    json?: string;
    report?: string;
  }>();

const MODEL = "openai/gpt-oss-20b";

interface Setup {
  name: string;
  kind: Kind;
  url: string;
  wsUrl?: string;
  /** the process between the engine and the clients (none for the engine alone; the sidecar for ws) */
  front: Proc | null;
}

function sidecars(): { label: string; cli: string }[] {
  const given = opts.sidecar.length > 0 ? opts.sidecar : [`this=${path.resolve(here, "../../src/cli.js")}`];
  return given.map((s, i) => {
    const eq = s.indexOf("=");
    const label = eq > 0 ? s.slice(0, eq) : opts.sidecar.length > 1 ? `#${i + 1}` : "this";
    return { label, cli: path.resolve(eq > 0 ? s.slice(eq + 1) : s) };
  });
}

/** The --sidecar-node-for flags of the sidecar labelled `label`. */
function nodeFlagsFor(label: string): string[] {
  return opts.sidecarNodeFor.filter((v) => v.startsWith(`${label}=`)).flatMap((v) => v.slice(label.length + 1).split(" "));
}

/** The rows in the order the set-ups were started, within each pace (paced first) and number of streams. */
function ordered(all: Figures[], order: string[]): ReturnType<typeof rows> {
  const rs = rows(all, "relay");
  rs.sort((a, b) => b.rate - a.rate || a.streams - b.streams || order.indexOf(a.setup) - order.indexOf(b.setup));
  return rs;
}

async function main(): Promise<void> {
  if (opts.report) {
    const saved = JSON.parse(readFileSync(opts.report, "utf8")) as { runs: Figures[] };
    const names = [...new Set(saved.runs.map((f) => f.setup))];
    const labels = [...new Set(names.filter((n) => n.includes(" ")).map((n) => n.slice(n.indexOf(" ") + 1)))];
    process.stdout.write(`${markdown(ordered(saved.runs, names))}\n${versusFirst(saved.runs, labels)}`);
    return;
  }
  const started: Proc[] = [];
  const clients: ClientProc[] = [];
  try {
    const engine = await spawnNode(
      "engine",
      [path.join(here, "engine.js"), "--tokens", String(opts.tokens), "--rate", String(opts.rate[0] ?? 0), "--model", MODEL],
      (r) => r.ready === true,
    );
    started.push(engine);
    const engineUrl = `http://127.0.0.1:${engine.port}`;
    const idsPerCompletion = engine.ready.ids as number;
    const charsPerCompletion = engine.ready.chars as number;
    const setups: Setup[] = [];
    if (opts.setups.includes("engine")) setups.push({ name: "engine", kind: "completions", url: engineUrl, front: null });
    if (opts.setups.includes("relay")) {
      const relay = await spawnNode("relay", [path.join(here, "relay.js"), "--upstream", engineUrl], (r) => r.ready === true);
      started.push(relay);
      setups.push({ name: "relay", kind: "completions", url: `http://127.0.0.1:${relay.port}`, front: relay });
    }
    if (opts.setups.includes("floor")) {
      const floor = await spawnNode(
        "floor",
        [path.join(here, "floor.js"), "--upstream", engineUrl, "--model", MODEL],
        (r) => r.ready === true,
      );
      started.push(floor);
      setups.push({ name: "floor", kind: "chat", url: `http://127.0.0.1:${floor.port}`, front: floor });
    }
    if (opts.setups.includes("in-place")) {
      const floor = await spawnNode(
        "in-place",
        [path.join(here, "floor.js"), "--upstream", engineUrl, "--model", MODEL, "--in-place"],
        (r) => r.ready === true,
      );
      started.push(floor);
      setups.push({ name: "in-place", kind: "chat", url: `http://127.0.0.1:${floor.port}`, front: floor });
    }
    for (const { label, cli } of sidecars()) {
      if (!["chat", "responses", "codex", "ws"].some((s) => opts.setups.includes(s))) break;
      const extra = opts.sidecarArgs.split(" ").filter((x) => x !== "");
      const sc = await spawnNode(
        `sidecar ${label}`,
        [
          cli,
          "serve",
          "--upstream",
          engineUrl,
          "--upstream-kind",
          "vllm",
          "--host",
          "127.0.0.1",
          "--port",
          "0",
          "--grpc-port",
          "-1",
          ...extra,
        ],
        (r) => r.msg === "harmony-sidecar serving",
        [...opts.sidecarNode.split(" "), ...nodeFlagsFor(label)].filter((x) => x !== ""),
      );
      started.push(sc);
      const base = `http://127.0.0.1:${sc.port}`;
      await awaitReady(base);
      if (opts.setups.includes("chat")) setups.push({ name: `chat ${label}`, kind: "chat", url: base, front: sc });
      if (opts.setups.includes("responses")) setups.push({ name: `responses ${label}`, kind: "responses", url: base, front: sc });
      if (opts.setups.includes("codex")) setups.push({ name: `codex ${label}`, kind: "codex", url: base, front: sc });
      if (opts.setups.includes("ws"))
        setups.push({ name: `ws ${label}`, kind: "ws", url: engineUrl, wsUrl: `ws://127.0.0.1:${sc.port}/v1/stream`, front: sc });
    }
    for (let i = 0; i < Math.max(1, opts.clients); i++) clients.push(await forkClient(path.join(here, "client.js")));

    const all: Figures[] = [];
    const measure = async (s: Setup, rate: number, streams: number, round: number): Promise<Figures> => {
      const share = (i: number) => Math.floor(streams / clients.length) + (i < streams % clients.length ? 1 : 0);
      const used = clients.filter((_, i) => share(i) > 0);
      const before = {
        engine: cpuMicros(engine.pid),
        front: s.front && procCounters(s.front.pid),
        clients: used.map((c) => cpuMicros(c.pid)),
      };
      const t0 = performance.now();
      const results = await Promise.all(
        used.map((c, i) => {
          const cmd: RunCommand = {
            kind: s.kind,
            url: s.url,
            wsUrl: s.wsUrl,
            streams: share(i),
            requests: opts.requests,
            model: MODEL,
            tag: `r${round}c${i}`,
          };
          return c.request<RunResult>({ run: cmd });
        }),
      );
      const wallMs = performance.now() - t0;
      const engineUs = cpuMicros(engine.pid) - before.engine;
      const front = s.front && before.front !== null ? procCounters(s.front.pid) : null;
      /** What a front counter counted over the run (asked only when there is a front). */
      const since = (pick: (c: ProcCounters) => number) => pick(front!) - pick(before.front!);
      const frontUs = front === null ? null : since((c) => c.userUs + c.sysUs);
      const clientUs = used.reduce((a, c, i) => a + cpuMicros(c.pid) - before.clients[i]!, 0);
      const tokens = results.reduce((a, r) => a + r.tokens, 0);
      const ttft = histogramOf(results.map((r) => r.ttft));
      const gap = histogramOf(results.map((r) => r.gap));
      const perToken = (x: number) => (tokens > 0 ? x / tokens : NaN);
      const f: Figures = {
        setup: s.name,
        rate,
        streams,
        round,
        tokens,
        expectedTokens: streams * opts.requests * idsPerCompletion,
        chars: results.reduce((a, r) => a + r.chars, 0),
        expectedChars: s.kind === "completions" ? null : streams * opts.requests * charsPerCompletion,
        events: results.reduce((a, r) => a + r.events, 0),
        requests: results.reduce((a, r) => a + r.requests, 0),
        errors: results.flatMap((r) => r.errors),
        wallMs,
        tokensPerS: tokens / (wallMs / 1000),
        ttftP50Ms: ttft.getValueAtPercentile(50) / 1000,
        ttftP99Ms: ttft.getValueAtPercentile(99) / 1000,
        gapP50Ms: gap.getValueAtPercentile(50) / 1000,
        gapP99Ms: gap.getValueAtPercentile(99) / 1000,
        engineUsPerToken: perToken(engineUs),
        frontUsPerToken: frontUs === null ? null : perToken(frontUs),
        clientUsPerToken: perToken(clientUs),
        frontCores: frontUs === null ? null : frontUs / 1000 / wallMs,
        frontPerToken:
          front === null
            ? null
            : {
                userUs: perToken(since((c) => c.userUs)),
                sysUs: perToken(since((c) => c.sysUs)),
                reads: perToken(since((c) => c.reads)),
                writes: perToken(since((c) => c.writes)),
                switches: perToken(since((c) => c.switches)),
              },
      };
      ttft.destroy();
      gap.destroy();
      return f;
    };

    const pace = (rate: number) => post(`${engineUrl}/bench/pace?rate=${rate}&step_tokens=${opts.stepTokens}`);
    const load0 = os.loadavg();
    const t0 = Date.now();
    if (opts.warmup > 0) {
      await pace(opts.rate[0] ?? 0);
      for (let w = 0; w < opts.warmup; w++)
        for (const s of setups) await measure(s, opts.rate[0] ?? 0, Math.min(16, Math.max(...opts.streams)), -1);
    }
    for (const rate of opts.rate) {
      await pace(rate);
      for (const streams of opts.streams)
        for (let round = 0; round < opts.rounds; round++)
          for (let k = 0; k < setups.length; k++) {
            const s = setups[(k + round) % setups.length]!;
            const f = await measure(s, rate, streams, round);
            all.push(f);
            process.stderr.write(
              `${rate > 0 ? `${rate} steps/s` : "flat out"}, ${streams} streams, round ${round + 1}: ${s.name}: ${Math.round(f.tokensPerS)} tokens/s` +
                `${f.errors.length > 0 ? `, ${f.errors.length} errors (${f.errors[0]})` : ""}\n`,
            );
          }
    }
    const load1 = os.loadavg();
    const rs = ordered(
      all,
      setups.map((s) => s.name),
    );
    const cpus = os.cpus();
    const header = [
      `## bench/front: ${new Date(t0).toISOString()}`,
      "",
      `${cpus.length} × ${cpus[0]?.model ?? "?"}; Node ${process.version}; load average ${load0[0]!.toFixed(2)} before, ${load1[0]!.toFixed(2)} after; ` +
        `${opts.tokens} ids per completion (${idsPerCompletion} sent), ${opts.stepTokens} per step, ${opts.requests} request(s) per stream, ` +
        `${opts.rounds} rounds (medians), ${clients.length} client process(es); sidecars: ${sidecars()
          .map((s) => `${s.label} = ${s.cli}`)
          .join(", ")}${opts.sidecarArgs ? ` with ${opts.sidecarArgs}` : ""}.`,
      "",
      "Gaps are between consecutive events that carry a token, per stream; CPU is user + system time of each process over the run (all its threads). " +
        "×relay: the median over rounds of this set-up's figure over the pass-through's in the same round (same pace and streams).",
      "",
    ].join("\n");
    const labels = sidecars().map((s) => s.label);
    process.stdout.write(`${header}\n${markdown(rs)}\n${versusFirst(all, labels)}`);
    if (opts.json)
      writeFileSync(
        opts.json,
        JSON.stringify(
          {
            started: new Date(t0).toISOString(),
            options: opts,
            idsPerCompletion,
            charsPerCompletion,
            load: [load0, load1],
            rows: rs,
            runs: all,
          },
          null,
          2,
        ),
      );
  } finally {
    for (const c of clients) c.proc.send({ exit: true });
    await Promise.all([...clients.map((c) => stop(c)), ...started.map((p) => stop(p))]);
  }
}

main().catch((e: Error) => {
  process.stderr.write(`bench/front: ${e.stack ?? e.message}\n`);
  process.exit(1);
});
