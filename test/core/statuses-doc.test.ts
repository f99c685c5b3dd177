/**
 * Every HTTP status, WebSocket close code and gRPC status the service can
 * send is in docs/errors.md: read off the code (the service's edges and
 * service layer, and `ws`, which answers and closes some by itself), both
 * ways, as fastify checks its docs against its errors. A status added in the
 * code without a row here fails this test.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CLOSE_CODES } from "../../src/core/errors.js";

const root = new URL("../../", import.meta.url);
const doc = readFileSync(new URL("docs/errors.md", root), "utf8");
const read = (dir: string) =>
  readdirSync(new URL(dir, root))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => readFileSync(new URL(`${dir}/${f}`, root), "utf8"));
const sources = [...read("src/transport"), ...read("src/service"), ...read("src/upstream")].join("\n");
const wsDir = path.dirname(createRequire(import.meta.url).resolve("ws/package.json"));
const wsFile = (f: string) => readFileSync(path.join(wsDir, "lib", f), "utf8");

/** The rows' first column of the section headed `title`. */
function rows(title: string, cell: RegExp): string[] {
  const parts = doc.split(`\n${title}`);
  expect(parts.length, `docs/errors.md has one section "${title}"`).toBe(2);
  const body = parts[1]!.split("\n## ")[0]!;
  return [...body.matchAll(cell)].map((m) => m[1]!);
}

const all = (text: string, re: RegExp) => [...text.matchAll(re)].map((m) => m[1]!);

/** HTTP statuses the sources answer with: the calls and fields that carry one. */
function httpStatuses(): Set<string> {
  const found = [
    ...all(sources, /\b(?:json|sendJson|refuse|sendError|sendOpenAIError|fail|writeHead)\(\s*(?:res,\s*)?([1-5]\d\d)\b/g),
    ...all(sources, /\brefuseUpgrade\(\s*socket,\s*([1-5]\d\d)\b/g),
    ...all(sources, /\bstatus:\s*([1-5]\d\d)\b/g),
    ...all(sources, /new UpstreamError\(\s*([1-5]\d\d)\b/g),
    ...all(sources, /\?\s*([1-5]\d\d)\s*:/g),
    ...all(sources, /:\s*([1-5]\d\d)\s*[;)]/g).filter((s) => Number(s) >= 400),
    // ws refuses a bad upgrade itself (websocket-server.js, abortHandshake)
    ...all(wsFile("websocket-server.js"), /abortHandshake(?:OrEmitwsClientError)?\([^;]*?\b([1-5]\d\d)\b/g),
  ];
  return new Set(found);
}

/**
 * Statuses Node's HTTP server answers by itself before a handler runs
 * (lib/_http_server.js, socketOnError: a request it cannot parse, headers
 * over --max-http-header-size, a chunk extension too long, a request not in
 * by its timeout).
 */
const NODE_OWN = ["408", "413", "431"];

describe("docs/errors.md lists every status and close code the service can send", () => {
  it("HTTP statuses, both ways", () => {
    const documented = rows("## HTTP statuses", /^\| `(\d{3})` \|/gm);
    const found = httpStatuses();
    for (const s of found)
      expect(documented, `HTTP ${s} is sent (src/transport, src/service, src/upstream or ws) but not documented`).toContain(s);
    for (const s of documented) expect([...found, ...NODE_OWN], `HTTP ${s} is documented but never sent`).toContain(s);
  });

  it("WebSocket close codes: ours and the ones ws sends itself are in CLOSE_CODES (whose table the errors-doc test checks)", () => {
    const ours = new Set<number>(Object.values(CLOSE_CODES));
    const fromWs = all(wsFile("receiver.js"), /createError\(\s*\w+,\s*(?:'[^']*'|`[^`]*`|[^,]+),\s*\w+,\s*(\d{4}),/g).map(Number);
    expect(fromWs.length).toBeGreaterThan(0);
    for (const c of fromWs) expect(ours, `ws closes with ${c}`).toContain(c);
    for (const name of all(sources, /CLOSE_CODES\.([a-z_]+)/g)) expect(Object.keys(CLOSE_CODES)).toContain(name);
    expect(sources).not.toMatch(/\bws\.close\(\s*\d/); // every close code is named
  });

  it("gRPC statuses, both ways", () => {
    const documented = rows("## gRPC statuses", /^\| `([A-Z_]+)` \|/gm);
    const found = new Set(["OK", ...all(sources, /grpc\.status\.([A-Z_]+)/g)]);
    for (const s of found) expect(documented, `gRPC ${s} is sent but not documented`).toContain(s);
    // grpc-js itself: UNIMPLEMENTED for a method the server has not, CANCELLED when the client goes away
    for (const s of documented) expect([...found, "UNIMPLEMENTED", "CANCELLED"], `gRPC ${s} is documented but never sent`).toContain(s);
  });
});
