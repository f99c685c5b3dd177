/**
 * The mistakes a new user makes, through the real binary: each is one line
 * naming the flag (or the port) and what to do, no stack trace, exit 2
 * (apart from a load test's "found losses", 1). And what a new user sees
 * first: --version, the help's groups and examples, the banner on a
 * terminal (through `script`, util-linux's pseudo-terminal), `parse`
 * saying what it waits for, GET / and a WebSocket URL without its path.
 */
import { spawn } from "node:child_process";
import { runProcess, type Ran } from "../helpers.js";
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import { startTestServer, type TestServer } from "./test-server.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
/** util-linux's `script` gives a command a pseudo-terminal (Debian's bsdutils, an essential package). */
const SCRIPT = "/usr/bin/script";

function run(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  return runProcess(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });
}

/** A usage error: exit 2, nothing on stdout, `lines` lines on stderr, no stack trace; the first line is returned. */
function usageError(r: Ran, lines = 1): string {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe("");
  const out = r.stderr.trimEnd().split("\n");
  expect(out, r.stderr).toHaveLength(lines);
  expect(r.stderr).not.toMatch(/^\s+at |node:internal|Error:/m);
  return out[0]!;
}

/** A port held by another listener for the test's duration. */
async function holdPort(): Promise<{ port: number; close(): Promise<void> }> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as net.AddressInfo).port;
  return { port, close: () => new Promise((resolve) => s.close(() => resolve())) };
}

describe("start-up and argument errors: one line, the flag, what to do, exit 2", () => {
  it("serve on an HTTP port in use", async () => {
    const held = await holdPort();
    try {
      const line = usageError(await run(["serve", "--port", String(held.port), "--grpc-port", "-1"]));
      expect(line).toContain(`port ${held.port} on 127.0.0.1 is in use`);
      expect(line).toContain("--port N (0: any free port)");
    } finally {
      await held.close();
    }
  });

  it("serve on a gRPC port in use (grpc-js's own log line held back)", async () => {
    const held = await holdPort();
    try {
      const line = usageError(await run(["serve", "--port", "0", "--grpc-port", String(held.port)]));
      expect(line).toMatch(new RegExp(`^serve: the gRPC port ${held.port} on 127.0.0.1 is in use .*--grpc-port N`));
    } finally {
      await held.close();
    }
  });

  it("a value out of range or not among the choices names the flag, or the variable it came from", async () => {
    expect(usageError(await run(["serve", "--port", "99999"]))).toBe('serve: --port must be an integer from 0 to 65535, got "99999"');
    expect(usageError(await run(["serve", "--log-level", "verbose"]))).toBe(
      'serve: --log-level must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
    );
    expect(usageError(await run(["serve"], { HARMONY_UPSTREAM_KIND: "vlm" }))).toBe(
      'serve: --upstream-kind (set by HARMONY_UPSTREAM_KIND) must be one of vllm, sglang, trtllm, llamacpp, auto, got "vlm"',
    );
  });

  it("an unknown flag: the message and the usage line, not the whole help", async () => {
    const r = await run(["serve", "--prot", "9000"]);
    expect(usageError(r, 2)).toBe("error: unknown option '--prot' (did you mean --port?)");
    expect(r.stderr.split("\n")[1]).toBe("Usage: harmony-sidecar serve [options]  (npx harmony-sidecar serve --help lists them)");
    const parse = await run(["parse", "--input", "bytes"]);
    expect(usageError(parse, 2)).toMatch(/argument 'bytes' is invalid\. Allowed choices are ids, text/);
    expect(usageError(await run(["serv"]), 2)).toMatch(/unknown command 'serv'/);
  });

  it("loadtest --html into a directory that does not exist: said before the run", async () => {
    const r = await run(["loadtest", "--streams", "100000", "--html", "/missing/dir/r.html"]);
    expect(usageError(r)).toBe(
      "loadtest: --html /missing/dir/r.html: the directory /missing/dir does not exist; create it first, or write somewhere else",
    );
    expect(usageError(await run(["loadtest", "--json", "/missing/r.json", "--openai", "http://127.0.0.1:1"]))).toMatch(
      /^loadtest: --json /,
    );
  });

  it("loadtest --url with an http:// URL: says it wants ws:// (or --grpc), tries nothing", async () => {
    expect(usageError(await run(["loadtest", "--url", "http://127.0.0.1:1"]))).toBe(
      "loadtest: --url http://127.0.0.1:1 is an HTTP URL: --url takes the WebSocket URL (ws://HOST:PORT/v1/stream); for gRPC give --grpc HOST:PORT, for an OpenAI-compatible endpoint --openai http://127.0.0.1:1",
    );
    expect(usageError(await run(["loadtest", "--grpc", "grpc://127.0.0.1:8766"]))).toMatch(/--grpc takes host:port without a scheme/);
  });

  it("loadtest --url without /v1/stream: says where the streams are", async () => {
    expect(usageError(await run(["loadtest", "--url", "ws://127.0.0.1:1"]))).toBe(
      "loadtest: --url ws://127.0.0.1:1 has no path: the sidecar's WebSocket streams are at ws://127.0.0.1:1/v1/stream",
    );
  });

  it("loadtest against nothing: one line, exit 2", async () => {
    const free = await holdPort();
    await free.close();
    const line = usageError(await run(["loadtest", "--url", `ws://127.0.0.1:${free.port}/v1/stream`, "--streams", "1", "--no-progress"]));
    expect(line).toMatch(new RegExp(`^loadtest: ws://127\\.0\\.0\\.1:${free.port}/v1/stream: .*ECONNREFUSED.*npx harmony-sidecar serve`));
  });
});

describe("what a new user sees", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ grpcPort: -1 });
  });
  afterAll(async () => {
    await s.server.stop();
  });

  it("--version, and help with groups, choices and examples", async () => {
    const v = await run(["--version"]);
    expect([v.code, v.stdout]).toEqual([0, `${VERSION}\n`]);
    const help = await run(["loadtest", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Options:[\s\S]*With --openai[\s\S]*Advanced options[\s\S]*Examples:\n/);
    expect(help.stdout.replace(/\s+/g, " ")).toContain('(choices: "one", "random", "whole", "step", default: "random")');
    for (const cmd of ["parse", "serve", "render", "loadtest", "simulate-engine"]) {
      const h = await run([cmd, "--help"]);
      expect(h.stdout, cmd).toMatch(new RegExp(`Examples:\\n(  .*\\n)*  \\$ .*npx harmony-sidecar ${cmd}`));
    }
  });

  it("GET / says what is served here, to a browser and to curl", async () => {
    const json = (await (await fetch(`${s.http}/`)).json()) as { service: string; endpoints: { path: string }[] };
    expect(json.service).toBe("harmony-sidecar");
    expect(json.endpoints.map((e) => e.path)).toEqual(
      expect.arrayContaining(["/inspect", "/v1/stream", "/healthz", "/metrics", "/v1/parse"]),
    );
    const page = await fetch(`${s.http}/`, { headers: { accept: "text/html" } });
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await page.text()).toContain('<a href="/inspect"><code>/inspect</code></a>');
  });

  it("a WebSocket URL without /v1/stream is refused with where the streams are", async () => {
    const bare = s.ws.replace("/v1/stream", "/");
    await expect(HarmonyClient.connect(bare)).rejects.toThrow(
      "server refused the connection: HTTP 404 (no WebSocket at /: the sidecar's is ws://HOST:PORT/v1/stream)",
    );
    const r = await run(["loadtest", "--url", s.ws.replace("/v1/stream", "/stream"), "--streams", "1", "--no-progress"]);
    expect(usageError(r)).toContain("HTTP 404 (no WebSocket at /stream: the sidecar's is ws://HOST:PORT/v1/stream)");
  });

  it("loadtest says where it wrote its reports", async () => {
    const dir = `${process.env.TMPDIR ?? "/tmp"}`;
    const file = `${dir}/first-contact-${process.pid}.json`;
    const r = await run(["loadtest", "--url", s.ws, "--streams", "20", "--no-progress", "--json", file]);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split("\n").at(-1)).toBe(`Wrote the JSON report to ${file}`);
    expect(existsSync(file)).toBe(true);
    const report = JSON.parse(readFileSync(file, "utf8")) as { resilient: { streams: number } };
    expect(report.resilient.streams).toBe(20);
  });
});

/** Run `args` under a pseudo-terminal; `until` decides when enough output arrived, then `input` is typed. */
function onTerminal(args: string[], input: string, until: (out: string) => boolean): Promise<string> {
  if (!existsSync(SCRIPT)) throw new Error(`${SCRIPT} is missing: install Debian's bsdutils package (util-linux's script)`);
  const command = [process.execPath, CLI, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  return new Promise((resolve, reject) => {
    // exec: the command replaces script's shell, so Ctrl+C's SIGINT reaches it rather than ending the shell first
    const child = spawn(SCRIPT, ["-qfec", `exec ${command}`, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let typed = false;
    child.stdout.on("data", (c) => {
      out += c;
      if (!typed && until(out)) {
        typed = true;
        child.stdin.write(input);
      }
    });
    child.on("error", reject);
    child.on("close", () => resolve(out.replace(/\r\n/g, "\n")));
  });
}

describe("on a terminal", () => {
  it("parse says what it waits for, then parses what is typed", async () => {
    const out = await onTerminal(["parse"], "200005 17196 200008 12194 0 200002\n\x04", (o) => o.includes("Ctrl+D"));
    expect(out).toContain("parse: reading token ids (or --input text) from the terminal: type or paste, then Ctrl+D to parse");
    expect(out).toContain('{"type":"delta","index":0,"kind":"content","text":"Hi!"}');
  });

  it("serve shows a banner with every URL and how to stop, and Ctrl+C stops it", async () => {
    const out = await onTerminal(["serve", "--port", "0", "--grpc-port", "0", "--workers", "0"], "\x03", (o) =>
      o.includes("Press Ctrl+C to stop."),
    );
    expect(out).toMatch(
      new RegExp(`^harmony-sidecar ${VERSION.replace(/\./g, "\\.")} is serving \\(started in \\d+ ms; parsing on the main thread\\)$`, "m"),
    );
    for (const row of [
      /^ {2}WebSocket +ws:\/\/127\.0\.0\.1:\d+\/v1\/stream$/m,
      /^ {2}gRPC +127\.0\.0\.1:\d+ {2}\(harmony\.v1\.Harmony\/Stream\)$/m,
      /^ {2}Inspector +http:\/\/127\.0\.0\.1:\d+\/inspect$/m,
      /^ {2}Metrics +http:\/\/127\.0\.0\.1:\d+\/metrics$/m,
    ])
      expect(out).toMatch(row);
    // no JSON on a terminal; the stop is said in a short line
    expect(out).not.toContain('{"level"');
    expect(out).toMatch(/^\d\d:\d\d:\d\d INFO {2}signal received {2}signal=SIGINT$/m);
    expect(out).toMatch(/INFO {2}stopped {2}outcome=/);
  });
});
