/**
 * A deployment under load (issue #36): the engine simulator, the sidecar's
 * OpenAI front in front of it (`serve --upstream`), and the real binary's
 * `loadtest --openai` against the front and, for comparison, against the
 * simulator's own raw endpoints. Through the sidecar no intended tool call
 * is lost and nothing is a 5xx; straight at the simulator a parser-less
 * client loses the calls and sees control tokens. The report's figures agree
 * with its JSON, its HTML, and with counts this test takes itself from the
 * simulator's records and metrics.
 *
 * The fault kinds are the simulator's default: every kind an engine can
 * emit, the three argument shapes of rule 12 (args_over_escaped,
 * args_fenced, args_trailing_junk) included. Those were lost in streamed
 * Chat until the adapters streamed the repair (issue #36,
 * src/openai/streamed-arguments.ts); a test of their own drives every API
 * with nothing but them.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openaiOptions, type LoadtestFlags } from "../../src/commands/loadtest.js";
import { simulateOptions, type SimulateFlags } from "../../src/commands/simulate.js";
import { ENGINE_FAULT_KINDS, type FaultKind } from "../../src/loadtest/generate.js";
import type { OpenAIReport, TargetReport } from "../../src/loadtest/openai-run.js";
import { runOpenAILoadtest } from "../../src/loadtest/openai-run.js";
import { startSimulator, type Simulator } from "../../src/simulate/server.js";
import type { Server } from "../../src/server.js";
import { harmony, runProcess, type Json, type Ran } from "../helpers.js";
import { startTestServer } from "./test-server.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { enc, vocab } = harmony();
const ARGUMENT_SHAPES: FaultKind[] = ["args_over_escaped", "args_fenced", "args_trailing_junk"];

type Obj = Record<string, Json>;

function run(args: string[]): Promise<Ran> {
  return runProcess(process.execPath, [CLI, ...args]);
}

/** The console table's cell for `label` in the target's column (1: the first target). */
function cell(text: string, label: string, column = 1): string {
  const line = text.split("\n").find((l) => l.startsWith(`| ${label} |`));
  expect(line, label).toBeDefined();
  return line!.split(" | ")[column]!.replace(/ \|$/, "");
}

describe("loadtest --openai: simulator, sidecar, load tester", () => {
  let sim: Simulator;
  let server: Server;
  let front: string;
  let dir: string;

  beforeAll(async () => {
    sim = await startSimulator(
      {
        port: 0,
        tokensPerSecond: 4000,
        stepTokens: 2,
        seed: 11,
        faultRate: 0.1,
        faults: ENGINE_FAULT_KINDS,
      },
      enc,
      vocab,
    );
    const s = await startTestServer({ grpcPort: -1, upstream: { url: sim.url, idleTimeoutMs: 30_000, reasoningField: "reasoning" } });
    server = s.server;
    front = s.http;
    dir = mkdtempSync(path.join(tmpdir(), "loadtest-openai-"));
  });

  afterAll(async () => {
    await server.stop();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("200 requests at 16 concurrent, 10% faults: through the sidecar nothing lost and no 5xx; straight at the engine the losses, counted", async () => {
    const json = path.join(dir, "report.json");
    const html = path.join(dir, "report.html");
    const out = await run([
      "loadtest",
      "--openai",
      front,
      "--compare",
      sim.url,
      "--requests",
      "200",
      "--concurrency",
      "16",
      "--seed",
      "5",
      "--run-id",
      "e2e",
      "--json",
      json,
      "--html",
      html,
      "--no-progress",
    ]);
    expect(out.stderr).toBe("");
    const r = JSON.parse(readFileSync(json, "utf8")) as OpenAIReport;
    expect(out.code).toBe(r.ok ? 0 : 1);
    const [side, raw] = r.targets as [TargetReport, TargetReport];

    // through the sidecar
    expect(side.requests).toBe(200);
    expect(side.reports_injections).toBe(true);
    expect(side.status).toEqual({ "200": 200 });
    expect(side.http_5xx).toBe(0);
    expect(side.tool_calls.intended).toBeGreaterThan(50);
    expect(side.tool_calls.lost).toBe(0);
    expect(side.tool_calls.recovered).toBe(side.tool_calls.intended);
    expect(side.failures.undeclared_tool ?? 0).toBe(0);
    expect(side.failures.arguments_invalid ?? 0).toBe(0);
    expect(side.ttft_ms.count).toBeGreaterThan(50);
    expect(side.itl_ms.count).toBeGreaterThan(side.ttft_ms.count);
    expect(Object.keys(side.recoveries).length).toBeGreaterThan(0);

    // straight at the simulator: what a client with no Harmony parser gets
    expect(raw.requests).toBe(200);
    expect(raw.http_5xx).toBe(0);
    expect(raw.tool_calls.intended).toBe(side.tool_calls.intended); // the same generations, by key
    expect(raw.tool_calls.recovered).toBe(0);
    expect(raw.tool_calls.lost).toBe(raw.tool_calls.intended);
    expect(raw.control_tokens.requests).toBe(200);
    expect(raw.failures.reasoning_missing).toBeGreaterThan(0);

    // the test's own count, from the simulator: its records of the run (both passes sent the same keys) and its metrics
    const recs = (await (await fetch(`${sim.url}/simulate/requests?run=e2e`)).json()) as Obj;
    expect(recs.data).toHaveLength(200);
    const choices = (recs.data as Obj[]).map((d) => d.choices[0]);
    expect(choices.every((c) => c.exact)).toBe(true);
    const intended = choices.reduce((n, c) => n + c.intent.calls.length, 0);
    expect(side.tool_calls.intended).toBe(intended);
    const faults: Record<string, number> = {};
    for (const c of choices) faults[c.fault ?? "none"] = (faults[c.fault ?? "none"] ?? 0) + 1;
    expect(side.faults_injected).toEqual(faults);
    expect(raw.faults_injected).toEqual(faults);
    const injected = 200 - (faults.none ?? 0);
    expect(injected).toBeGreaterThan(5);
    expect(injected).toBeLessThan(50);
    const metrics = await (await fetch(`${sim.url}/metrics`)).text();
    const counter = (endpoint: string) =>
      Number(new RegExp(`^simulator_requests_total\\{endpoint="${endpoint}",status="200"\\} (\\d+)$`, "m").exec(metrics)?.[1] ?? 0);
    expect(counter("completions")).toBe(200); // one upstream request per front request
    expect(counter("chat") + counter("responses")).toBe(200);
    expect(Object.values(side.by_mode).reduce((n, m) => n + m.requests, 0)).toBe(200);

    // the console report says what the JSON says
    const text = out.stdout;
    expect(cell(text, "requests")).toBe("200");
    expect(cell(text, "HTTP 5xx")).toBe(String(side.http_5xx));
    expect(cell(text, "requests failed")).toBe(`${side.failed_requests} (${((100 * side.failed_requests) / 200).toFixed(2)}%)`);
    expect(cell(text, "intended tool calls recovered")).toBe(`${side.tool_calls.recovered} of ${side.tool_calls.intended}`);
    expect(cell(text, "intended tool calls lost", 2)).toBe(String(raw.tool_calls.lost));
    expect(cell(text, "calls returned (valid arguments)")).toBe(`${side.tool_calls.returned} (${side.tool_calls.valid})`);
    for (const [kind, n] of Object.entries(side.failures)) expect(cell(text, kind)).toBe(String(n));
    // and so does the page
    const page = readFileSync(html, "utf8");
    expect(page).toContain(
      `<div class="tile-value">${side.tool_calls.recovered.toLocaleString("en-US")} / ${side.tool_calls.intended.toLocaleString("en-US")}</div>`,
    );
    expect(page).toContain("Side by side: the same requests");
    expect(page).not.toMatch(/<script/i);
  });

  it("recovers the argument shapes of rule 12 on every API, streamed Chat included", async () => {
    sim.script(); // the generator again
    const shapes = await startSimulator({ port: 0, tokensPerSecond: 0, seed: 12, faultRate: 1, faults: ARGUMENT_SHAPES }, enc, vocab);
    const s = await startTestServer({ grpcPort: -1, upstream: { url: shapes.url, idleTimeoutMs: 30_000, reasoningField: "reasoning" } });
    try {
      const base = { url: s.http, requests: 60, concurrency: 8, seed: 3, timeoutMs: 30_000, progress: false };
      const r = await runOpenAILoadtest({ ...base, apis: ["responses"], stream: "both", runId: "shapes-r" });
      const c = await runOpenAILoadtest({ ...base, apis: ["chat"], stream: "on", runId: "shapes-c" });
      const n = await runOpenAILoadtest({ ...base, apis: ["chat"], stream: "off", runId: "shapes-n" });
      for (const t of [r.targets[0]!, c.targets[0]!, n.targets[0]!]) {
        expect(t.faults_injected.none ?? 0).toBeLessThan(t.requests);
        for (const kind of ARGUMENT_SHAPES) expect(t.faults_injected[kind], kind).toBeGreaterThan(0);
        expect(t.tool_calls.intended).toBeGreaterThan(20);
        expect(t.tool_calls.lost, JSON.stringify(t.examples.slice(0, 2))).toBe(0);
        expect(t.tool_calls.recovered).toBe(t.tool_calls.intended);
        expect(t.failures.arguments_invalid ?? 0).toBe(0);
        expect(t.failed_requests, JSON.stringify(t.examples.slice(0, 2))).toBe(0);
        expect(t.recoveries.arguments_repaired).toBeGreaterThan(0);
      }
      // every request of the streamed Chat run was streamed Chat
      expect(Object.keys(c.targets[0]!.by_mode)).toEqual(["chat stream"]);
    } finally {
      await s.server.stop();
      await shapes.close();
    }
  });

  it("says a usage error in one line, with exit 2", async () => {
    const flags = {
      streams: "1",
      streamsPerFrame: "1",
      chunking: "random",
      stepTokens: "1",
      faultRate: "0.1",
      faults: "all",
      seed: "1",
      duration: "0",
    } as const;
    const lt = (over: Partial<LoadtestFlags>): LoadtestFlags => ({
      ...flags,
      mode: "resilient",
      window: "8",
      compareStrict: false,
      handles: false,
      progress: false,
      requests: "10",
      apis: "chat,responses",
      stream: "both",
      timeoutMs: "1000",
      openai: "http://127.0.0.1:1",
      ...over,
    });
    expect(() => openaiOptions(lt({ openai: "ftp://x" }))).toThrow(/--openai must be an http\(s\) URL/);
    expect(() => openaiOptions(lt({ openai: undefined, compare: "http://x" }))).toThrow(/--compare needs --openai/);
    expect(() => openaiOptions(lt({ apis: "completions" }))).toThrow(/--apis/);
    expect(() => openaiOptions(lt({ url: "ws://127.0.0.1:1/v1/stream" }))).toThrow(/--url drives the parser service/);
    expect(() => openaiOptions(lt({ requests: "0" }))).toThrow(/--requests/);
    const sim = { host: "127.0.0.1", port: "0", servedModelName: "m", maxModelLen: "1000", tokensPerSecond: "0", stepTokens: "1" };
    const so = (over: Partial<SimulateFlags>): SimulateFlags => ({
      ...sim,
      streamInterval: "1",
      maxNumSeqs: "8",
      seed: "1",
      faultRate: "0.1",
      faults: "engine",
      records: "10",
      chat: "raw",
      ...over,
    });
    expect(simulateOptions(so({})).faults).toEqual(ENGINE_FAULT_KINDS);
    expect(() => simulateOptions(so({ faultRate: "2" }))).toThrow(/--fault-rate/);
    expect(() => simulateOptions(so({ faults: "nope" }))).toThrow(/unknown fault kind "nope"/);
    // the binary: exit 2, nothing on stdout, one line on stderr
    for (const args of [
      ["loadtest", "--openai", "ftp://x"],
      ["loadtest", "--openai", "http://127.0.0.1:1"], // nothing listens: no report to give
      ["simulate-engine", "--faults", "nope"],
    ]) {
      const out = await run(args);
      expect(out.code, args.join(" ")).toBe(2);
      expect(out.stdout).toBe("");
      expect(out.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
    }
  });
});
