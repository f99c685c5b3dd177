/**
 * The inspector page and the load test's HTML report in a real browser:
 * Debian's Chromium, driven headless by playwright-core (which downloads
 * nothing). When /usr/bin/chromium is missing the test installs Debian's
 * `chromium` package if it runs as root, and fails naming the package
 * otherwise: it never skips.
 *
 * Screenshots go to dist/screenshots/; with UPDATE_SCREENSHOTS=1 the ones
 * the docs show are copied to docs/inspect.png and docs/loadtest-report.png.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadtest } from "../../src/commands/loadtest.js";
import { chunksUpTo, eventsAtStep, type ParseAnswer } from "../../src/inspect/logic.js";
import { answerParse } from "../../src/inspect/parse.js";
import { machineInfo, renderLoadtestHtml } from "../../src/loadtest/html.js";
import type { LoadtestOptions, Report } from "../../src/loadtest/run.js";
import { harmony, loadtestOptions } from "../helpers.js";
import { startInspectServer, type InspectServer } from "./server.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SHOTS = path.join(root, "dist/screenshots");
const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Debian's Chromium, installed here when missing and possible. */
function chromiumPath(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  if (root && existsSync("/usr/bin/apt-get")) {
    try {
      execFileSync("sh", ["-c", "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium"], {
        stdio: "inherit",
        timeout: 15 * 60_000,
      });
    } catch (e) {
      throw new Error(`installing Debian's chromium package failed (${(e as Error).message}); install it: apt-get install -y chromium`);
    }
    if (existsSync(CHROMIUM)) return CHROMIUM;
  }
  throw new Error(
    `the browser tests need Chromium at ${CHROMIUM}: install Debian's \`chromium\` package (as root: apt-get update && apt-get install -y chromium)`,
  );
}

const SPLICED =
  '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|><|start|>assistant<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>';
const README =
  '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>';

const { enc, vocab } = harmony();
let server: InspectServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  const executablePath = chromiumPath();
  server = await startInspectServer();
  browser = await chromium.launch({ executablePath, args: ARGS });
}, 20 * 60_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => undefined);
  await browser?.close();
  await server?.close();
});

/** A page at `width`×`height` in a colour scheme, failing the test on any script error or request elsewhere. */
async function open(scheme: "light" | "dark" = "light", width = 1280, height = 800): Promise<{ page: Page; problems: string[] }> {
  const ctx = await browser.newContext({ viewport: { width, height }, colorScheme: scheme });
  contexts.push(ctx);
  const page = await ctx.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(server.url) && !u.startsWith("file:") && !u.startsWith("data:")) problems.push(`request elsewhere: ${u}`);
  });
  return { page, problems };
}

const pane = (mode: "resilient" | "strict") => `#pane-${mode}`;

async function parsed(page: Page): Promise<void> {
  await page.waitForFunction(
    () =>
      document.querySelectorAll("#results .pane .summary").length === 2 &&
      /Parsed in/.test(document.getElementById("status")!.textContent ?? ""),
  );
}

describe("the inspector page", () => {
  it("shows the spliced call, the recoveries and the strict error for a /inspect#text= link (light, dark, phone)", async () => {
    for (const [scheme, width, height] of [
      ["light", 1280, 800],
      ["dark", 1280, 800],
      ["light", 390, 844],
    ] as const) {
      const { page, problems } = await open(scheme, width, height);
      await page.goto(`${server.url}/inspect#text=${encodeURIComponent(SPLICED)}`);
      await parsed(page);
      const r = page.locator(pane("resilient"));
      const s = page.locator(pane("strict"));
      // resilient: one call to get_weather, its arguments pretty-printed and valid
      await expect.poll(() => r.locator(".msg .call").innerText()).toContain("tool call call_0 → get_weather");
      expect(await r.locator(".msg .call .json").innerText()).toBe("valid_json: true");
      expect(await r.locator(".msg .args").innerText()).toBe('{\n  "city": "Oslo"\n}');
      expect(await r.locator(".msg .msg-head").innerText()).toContain("to functions.get_weather");
      // every recovery marked at its token
      const marks = await r.locator(".tok.mark-recovery").evaluateAll((els) => els.map((e) => [e.id, e.getAttribute("title")]));
      expect(marks.map(([id]) => id)).toEqual(["r-t0", "r-t10", "r-t17"]);
      expect(marks[2]![1]).toContain("recovery recipient_spliced");
      expect(await r.locator(".marks").innerText()).toMatch(/abandoned_header[\s\S]*recipient_spliced/);
      // strict: the reference's error at token 17, and no message
      const err = s.locator(".tok.mark-error").first();
      expect(await err.getAttribute("id")).toBe("s-t17");
      expect(await err.getAttribute("title")).toContain("error header_trailing_tokens");
      expect(await s.locator(".marks li.error").first().innerText()).toContain("token 17");
      expect(await s.locator(".summary").innerText()).toContain("finish error");
      // colours: control tokens, header words, tool arguments
      expect(await r.locator(".tok.c-control").count()).toBe(7);
      expect(await r.locator(".tok.c-header").first().innerText()).toBe("assistant");
      expect(await r.locator(".tok.tool").allInnerTexts()).toEqual(['{"', "city", '":"', "Os", "lo", '"}']);
      expect(problems).toEqual([]);
      const name = width < 500 ? "inspect-phone" : `inspect-${scheme}`;
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: width < 500 });
      if (width < 500) {
        // nothing wider than the screen
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      }
    }
  });

  it("is keyboard-usable: Tab reaches the controls, a recovery's button takes focus to its token", async () => {
    const { page, problems } = await open();
    await page.goto(`${server.url}/inspect#text=${encodeURIComponent(SPLICED)}`);
    await parsed(page);
    const jump = page.locator(`${pane("resilient")} .marks button.jump`).nth(2);
    await jump.focus();
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("r-t17");
    // the controls are reached with Tab, in order, from the input
    await page.locator("#input").focus();
    const order: string[] = [];
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press("Tab");
      order.push(await page.evaluate(() => document.activeElement?.id || document.activeElement?.tagName || ""));
    }
    expect(order).toEqual(["role", "after-stop", "tools", "calls", "parse", "copy-link", "file", "example"]);
    expect(problems).toEqual([]);
  });

  it("parses pasted ids and an SSE log through the page's controls, and a dropped file", async () => {
    const { page, problems } = await open();
    await page.goto(`${server.url}/inspect`);
    const ids = enc.encode(README);
    // ids, typed and parsed with Ctrl+Enter
    await page.locator("#input").fill(ids.join(", "));
    await page.locator("#input").press("Control+Enter");
    await parsed(page);
    expect(await page.evaluate(() => location.hash)).toBe(`#ids=${ids.join(",")}`);
    expect(await page.locator(`${pane("resilient")} .msg .call`).innerText()).toContain("get_weather");
    expect(await page.locator(`${pane("strict")} .summary`).innerText()).toContain("0 errors");

    // a vLLM /v1/completions stream with token_ids, as pasted from a log; the kind chosen by hand
    const chunks = [];
    for (let i = 0; i < ids.length; i += 3) {
      const part = ids.slice(i, i + 3);
      chunks.push(
        `data: ${JSON.stringify({ id: "cmpl-9", object: "text_completion", model: "gpt-oss-20b", choices: [{ index: 0, text: "", token_ids: part, finish_reason: null }] })}`,
      );
    }
    chunks.push("data: [DONE]");
    await page.locator('input[name="kind"][value="sse"]').check();
    await page.locator("#input").fill(chunks.join("\n\n"));
    await page.locator("#parse").click();
    await parsed(page);
    expect(await page.locator("#notes").innerText()).toContain(
      `SSE log: ${Math.ceil(ids.length / 3)} chunks (vllm-completions): ${ids.length} token ids`,
    );
    expect(await page.locator(`${pane("resilient")} .messages > li`).count()).toBe(2);

    // an OpenAI chat stream (no ids): detected, and written back as Harmony text
    const chat = (delta: object) =>
      `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }] })}`;
    await page.locator('input[name="kind"][value="auto"]').check();
    await page
      .locator("#input")
      .fill(
        [
          chat({ role: "assistant", reasoning_content: "Need the weather." }),
          chat({ tool_calls: [{ index: 0, id: "call_x", type: "function", function: { name: "get_weather", arguments: '{"city":' } }] }),
          chat({ tool_calls: [{ index: 0, function: { arguments: '"Bergen"}' } }] }),
          "data: [DONE]",
        ].join("\n\n"),
      );
    await page.locator("#parse").click();
    await parsed(page);
    expect(await page.locator("#notes").innerText()).toContain("openai-chat");
    expect(await page.locator(`${pane("resilient")} .msg .args`).innerText()).toContain('"city": "Bergen"');

    // a file, opened through the file control (what a drop does too)
    await page.locator("#file").setInputFiles({ name: "stream.txt", mimeType: "text/plain", buffer: Buffer.from(SPLICED + "\n") });
    await parsed(page);
    await expect.poll(() => page.locator("#status").innerText()).toMatch(/Parsed in/);
    expect(await page.locator(`${pane("strict")} .tok.mark-error`).count()).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });

  it("copies a link that reproduces the view", async () => {
    const { page, problems } = await open();
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
    await page.goto(`${server.url}/inspect`);
    await page.locator("#input").fill(README);
    await page.locator("#role").selectOption("none");
    await page.locator("#copy-link").click();
    await expect.poll(() => page.locator("#status").innerText()).toMatch(/Link copied|Copy the link/);
    const link = (await page.locator("#status").innerText()).startsWith("Link copied")
      ? await page.evaluate(() => navigator.clipboard.readText())
      : await page.locator("#link").inputValue();
    expect(link).toBe(`${server.url}/inspect#text=${encodeURIComponent(README)}&role=none`);
    const other = await open();
    await other.page.goto(link);
    await parsed(other.page);
    expect(await other.page.locator("#role").inputValue()).toBe("none");
    expect(await other.page.locator(`${pane("resilient")} .messages > li`).count()).toBe(2);
    expect([...problems, ...other.problems]).toEqual([]);
  });
});

/** What POST /v1/parse answers for `text` with the page's options (the test's own reading, off the page). */
function parseAnswer(text: string, mode: "resilient" | "strict", extra: Record<string, unknown> = {}): ParseAnswer {
  const r = answerParse(vocab, enc.encode, new TextEncoder().encode(JSON.stringify({ text, mode, tokens: true, ...extra })), 262144);
  expect(r.status).toBe(200);
  return JSON.parse(r.json) as ParseAnswer;
}

describe("the inspector's events and chunks, stepping, and what it says", () => {
  it("shows the events of both modes and the chunks the front would send, and steps through them token by token", async () => {
    const { page, problems } = await open();
    await page.goto(`${server.url}/inspect#text=${encodeURIComponent(SPLICED)}`);
    await parsed(page);
    const r = parseAnswer(SPLICED, "resilient", { chunks: true });
    const s = parseAnswer(SPLICED, "strict");
    const n = r.tokens!.length;
    // the events tab: one row per event, its JSON, the token that emitted it
    await page.locator("#tab-events").click();
    expect(await page.locator("#view-events").isVisible()).toBe(true);
    expect(await page.locator("#results").isVisible()).toBe(false);
    const rows = await page.locator("#events-resilient .row code").allInnerTexts();
    expect(rows).toEqual(r.events.map((e) => JSON.stringify(e)));
    expect(await page.locator("#events-strict .row").count()).toBe(s.events.length);
    expect(await page.locator("#events-resilient .row .row-at").first().innerText()).toBe("@0");
    // the chunks tab, reached with the arrow key: Chat chunks as data: lines, then [DONE]; Responses events
    await page.locator("#tab-events").press("ArrowRight");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("tab-chunks");
    expect(await page.locator("#tab-chunks").getAttribute("aria-selected")).toBe("true");
    const chat = await page.locator("#chunks-chat .row code").allInnerTexts();
    expect(chat).toEqual([...r.chunks!.chat.map((c) => `data: ${JSON.stringify(c.data)}`), "data: [DONE]"]);
    const responses = await page.locator("#chunks-responses .row code").allInnerTexts();
    expect(responses).toEqual(r.chunks!.responses.map((c) => `event: ${String(c.data.type)}\ndata: ${JSON.stringify(c.data)}`));
    expect(chat[1]).toContain(
      '"tool_calls":[{"index":0,"id":"call_inspect_0","type":"function","function":{"name":"get_weather","arguments":""}}]',
    );
    // stepping: to the start, one token on, then to token 18 with the slider
    await page.locator("#step-first").click();
    expect(await page.locator("#step-label").innerText()).toBe(`0 of ${n} tokens written`);
    expect(await page.locator("#chunks-chat .row:visible").count()).toBe(0);
    await page.locator("#step-next").click();
    expect(await page.locator("#step-label").innerText()).toBe(`1 of ${n} tokens written`);
    await page.locator("#tab-events").click();
    expect(await page.locator("#events-resilient .row:visible code").allInnerTexts()).toEqual([JSON.stringify(r.events[0])]);
    await page.locator("#step").fill("18");
    const c18 = eventsAtStep(r, 18);
    expect(await page.locator("#events-resilient .row:visible").count()).toBe(c18);
    expect(await page.locator("#events-strict .row:visible").count()).toBe(eventsAtStep(s, 18));
    await page.locator("#tab-chunks").click();
    expect(await page.locator("#chunks-chat .row:visible").count()).toBe(chunksUpTo(r.chunks!.chat, c18));
    await page.locator("#tab-parse").click();
    // tokens not yet written are dimmed; the messages and marks are those so far (the call's header read, its arguments open)
    expect(await page.locator("#pane-resilient .tok.future").count()).toBe(n - 18);
    expect(await page.locator("#pane-resilient .msg .call").innerText()).toBe("tool call call_0 → get_weather (arguments so far)");
    expect(await page.locator("#pane-resilient .marks li").count()).toBe(3);
    expect(await page.locator("#pane-resilient .summary").innerText()).toContain(`${c18} of ${r.events.length} events so far`);
    // and the end: everything, done included
    await page.locator("#step-last").click();
    expect(await page.locator("#pane-resilient .tok.future").count()).toBe(0);
    expect(await page.locator("#pane-resilient .summary").innerText()).toContain("finish tool_calls");
    expect(await page.locator("#step-label").innerText()).toBe(`all ${n} tokens and the end of the stream`);
    expect(problems).toEqual([]);
    await page.locator("#tab-chunks").click();
    await page.screenshot({ path: path.join(SHOTS, "inspect-chunks.png"), fullPage: true });
  });

  it("groups repeated errors with a count, keeps badges readable, says what Detect found, and replaces stale results with the error", async () => {
    const { page, problems } = await open();
    await page.goto(`${server.url}/inspect#text=${encodeURIComponent(SPLICED)}`);
    await parsed(page);
    // strict: eight errors, seven of them the same but for the token: two rows
    const strictMarks = page.locator(`${pane("strict")} .marks li`);
    expect(await strictMarks.count()).toBe(2);
    expect(await strictMarks.nth(1).innerText()).toMatch(/^tokens 18, 19, 20, 21, 22, 23, 24 error unexpected_token ×7 Unexpected token/);
    expect(
      await page
        .locator(`${pane("strict")} h3`)
        .nth(1)
        .innerText(),
    ).toBe("Recoveries and errors (8; 2 different)");
    // every badge at least 11 px, in control tokens too
    const sizes = await page.locator(".tok .badge").evaluateAll((els) => els.map((e) => parseFloat(getComputedStyle(e).fontSize)));
    expect(sizes.length).toBeGreaterThan(5);
    for (const px of sizes) expect(px).toBeGreaterThanOrEqual(11);
    // Detect says what it found, as the input changes and when it parses
    await page.locator('input[name="kind"][value="auto"]').check();
    await page.locator("#input").fill(enc.encode(README).join(", "));
    expect(await page.locator("#detected").innerText()).toBe("(found token ids)");
    await page.locator("#parse").click();
    await parsed(page);
    expect(await page.locator("#status").innerText()).toMatch(/^Parsed in \d+ ms: found token ids\.$/);
    await page.locator("#input").fill('data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}');
    expect(await page.locator("#detected").innerText()).toBe("(found an SSE log)");
    // an input that cannot be read: every view says so, nothing of the last parse stays
    await page.locator('input[name="kind"][value="ids"]').check();
    await page.locator("#input").fill("200005, x");
    await page.locator("#parse").click();
    const message = 'Could not read the input: not a token id at position 1: "x"';
    for (const sel of ["#pane-resilient", "#pane-strict", "#events-resilient", "#events-strict", "#chunks-chat", "#chunks-responses"])
      expect(await page.locator(`${sel} .pane-body`).innerText(), sel).toBe(message);
    const legend = await page.locator(".legend .tok").count();
    expect(await page.locator(".tok").count()).toBe(legend);
    expect(await page.locator("#stepper").isVisible()).toBe(false);
    expect(problems).toEqual([]);
  });
});

describe("the load test's HTML report", () => {
  let report: Report;
  let opts: LoadtestOptions;

  beforeAll(async () => {
    opts = loadtestOptions({ streams: 300, compareStrict: true });
    report = await loadtest(opts, enc, vocab); // a real run against an in-process server
  });

  it("draws a real run's numbers and charts, with no network, light and dark", async () => {
    const file = path.join(SHOTS, "loadtest-report.html");
    writeFileSync(file, renderLoadtestHtml(report, { settings: { ...opts }, machine: machineInfo() }));
    const p = report.resilient;
    for (const scheme of ["light", "dark"] as const) {
      const { page, problems } = await open(scheme, 1280, 800);
      await page.goto(pathToFileURL(file).href);
      const tiles = await page
        .locator("#pass-resilient .tile")
        .evaluateAll((els) =>
          Object.fromEntries(els.map((e) => [e.querySelector(".tile-label")!.textContent, e.querySelector(".tile-value")!.textContent])),
        );
      expect(tiles.streams).toBe(p.streams.toLocaleString("en-US"));
      expect(tiles.tokens).toBe(p.tokens.toLocaleString("en-US"));
      expect(tiles["tool calls recovered"]).toBe(
        `${p.tool_calls.recovered.toLocaleString("en-US")} / ${p.tool_calls.intended.toLocaleString("en-US")}`,
      );
      expect(tiles["failed streams"]).toBe(String(p.failed_streams));
      // the percentile curve: the run's percentiles (50 … 99.99), then max
      expect(await page.locator("#resilient-percentiles circle.dot").count()).toBe(p.latency_percentiles.length + 1);
      expect(await page.locator("#resilient-percentiles circle.dot title").last().textContent()).toBe(
        `max: ${p.latency_ms.max.toLocaleString("en-US", { minimumFractionDigits: 3, maximumFractionDigits: 3 })} ms`,
      );
      // recoveries by kind: one bar per kind, the counts as labelled
      const recoveries = Object.entries(p.recoveries);
      expect(recoveries.length).toBeGreaterThan(3);
      expect(await page.locator("#resilient-recoveries rect.bar").count()).toBe(recoveries.length);
      const top = recoveries.sort((a, b) => b[1] - a[1])[0]!;
      expect(await page.locator("#resilient-recoveries text.row-label").first().textContent()).toBe(top[0]);
      // faults injected against recovered (every faulted stream recovered: no failures)
      const faulted = Object.entries(p.faults_injected).filter(([k]) => k !== "none");
      expect(await page.locator("#resilient-faults rect.bar").count()).toBe(faulted.length * (p.failed_streams === 0 ? 2 : 1));
      // the strict comparison, the settings and the machine
      expect(await page.locator("#cmp-h").count()).toBe(1);
      expect(await page.locator("#pass-strict .verdict").innerText()).toMatch(/streams failed/);
      expect(await page.locator("dl").first().innerText()).toContain("concurrency");
      expect(await page.locator("dl").last().innerText()).toContain(process.version);
      // the run records its latency histogram and throughput: both are drawn, nothing is missing
      expect(p.latency_histogram.length).toBeGreaterThan(0);
      expect(await page.locator("#resilient-histogram rect.bar").count()).toBe(p.latency_histogram.length);
      expect(await page.locator("#resilient-throughput polyline.line").count()).toBe(p.throughput.length > 1 ? 1 : 0);
      // (a run too short for two samples says so: the throughput note and its average, and one note for each chart over time)
      const drawn = (rows: (number | null)[]) => rows.filter((v) => v !== null).length >= 2;
      const notes =
        (p.throughput.length > 1 ? 0 : 2) +
        (drawn(p.over_time.flatMap((o) => [o.latency_p50_ms, o.latency_max_ms])) ? 0 : 1) +
        (drawn(p.over_time.map((o) => o.open_streams)) ? 0 : 1);
      expect(await page.locator("#pass-resilient .missing").count()).toBe(notes);
      // latency over time and open streams over time, p90 and max tiles
      expect(await page.locator("#resilient-open-time polyline.line").count()).toBe(p.over_time.length > 1 ? 1 : 0);
      expect(tiles["frame latency max"]).toBe(
        `${p.latency_ms.max.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ms`,
      );
      expect(tiles["frame latency p90"]).toMatch(/ ms$|^–$/);
      // no percentile above the maximum
      const values = await page
        .locator("#resilient-percentiles circle.dot title")
        .allTextContents()
        .then((t) => t.map((x) => Number(x.replace(/^.*: /, "").replace(/ ms$/, "").replace(/,/g, ""))));
      for (const v of values) expect(v).toBeLessThanOrEqual(p.latency_ms.max);
      // every chart's y-axis label clear of its ticks (the tokens/s one held six-digit ticks)
      const overlaps = await page.locator("svg.chart:not(.bars)").evaluateAll((svgs) =>
        svgs.flatMap((svg) => {
          const label = svg.querySelector("text.axis-label[transform]")?.getBoundingClientRect();
          if (!label) return [];
          return [...svg.querySelectorAll('text.tick[text-anchor="end"]')]
            .map((t) => t.getBoundingClientRect())
            .filter((t) => t.left < label.right)
            .map(() => svg.id);
        }),
      );
      expect(overlaps).toEqual([]);
      expect(problems).toEqual([]);
      await page.screenshot({ path: path.join(SHOTS, `loadtest-report-${scheme}.png`), fullPage: true });
      await page.screenshot({
        path: path.join(SHOTS, `loadtest-report-${scheme}-top.png`),
        clip: { x: 0, y: 0, width: 1280, height: 1300 },
      });
    }
  });

  it("draws the histogram and throughput charts from given data", async () => {
    const p = report.resilient;
    const extended = {
      ...report,
      resilient: {
        ...p,
        latency_histogram: [
          { lower_ms: 0.25, upper_ms: 0.5, count: 120 },
          { lower_ms: 0.5, upper_ms: 1, count: 340 },
          { lower_ms: 1, upper_ms: 2, count: 90 },
          { lower_ms: 2, upper_ms: 4, count: 7 },
        ],
        latency_percentiles: [50, 75, 90, 99, 99.9].map((q) => ({ p: q, ms: q / 40 })),
        throughput: [0, 0.5, 1, 1.5, 2].map((t, i) => ({ t, tokens_per_second: 1000 + 100 * i })),
        faults_failed: {},
      },
    };
    const file = path.join(SHOTS, "loadtest-report-extended.html");
    writeFileSync(file, renderLoadtestHtml(extended, { settings: { ...opts }, machine: machineInfo() }));
    const { page, problems } = await open();
    await page.goto(pathToFileURL(file).href);
    expect(await page.locator("#resilient-histogram rect.bar").count()).toBe(4);
    expect(await page.locator("#resilient-percentiles circle.dot").count()).toBe(6);
    expect(await page.locator("#resilient-throughput polyline.line").getAttribute("points")).toMatch(/^[\d., ]+$/);
    expect(await page.locator("#pass-resilient .missing").count()).toBe(0);
    expect(problems).toEqual([]);
    await page.screenshot({ path: path.join(SHOTS, "loadtest-report-extended.png"), fullPage: true });
    if (process.env.UPDATE_SCREENSHOTS) {
      copyFileSync(path.join(SHOTS, "inspect-light.png"), path.join(root, "docs/inspect.png"));
      copyFileSync(path.join(SHOTS, "loadtest-report-light-top.png"), path.join(root, "docs/loadtest-report.png"));
    }
  });
});
