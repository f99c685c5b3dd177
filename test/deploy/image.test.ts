/**
 * The container image as deploy/Dockerfile builds it, laid out from the
 * Dockerfile's own lines (./dockerfile.ts: no container engine runs here):
 * the build stage builds from exactly what it copies, the final stage gets
 * its production dependencies from `npm ci --omit=dev`, and `serve` started
 * from it as its ENTRYPOINT says answers /readyz, /v1/render (its render
 * thread), /v1/parse (its parse thread), /inspect with every file the page
 * loads, and gRPC health, writing nothing to its filesystem (the image runs
 * with a read-only root).
 */
import * as grpc from "@grpc/grpc-js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEALTH_SERVICE } from "../../src/protocol/grpc-methods.js";
import { schema } from "../../src/protocol/schema.js";
import { layOut, snapshot, type Layout } from "./dockerfile.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const dir = mkdtempSync(path.join(tmpdir(), "image-"));

let image: Layout;
let app: string;
let before: Map<string, string>;
let child: ChildProcess;
let exited: Promise<number | null>;
const logs: Record<string, unknown>[] = [];
let http = "";
let grpcPort = 0;

beforeAll(async () => {
  image = layOut(path.join(ROOT, "deploy/Dockerfile"), ROOT, dir, path.join(ROOT, "node_modules"));
  app = path.join(image.roots.get([...image.roots.keys()].at(-1)!)!, image.workdir);
  before = snapshot(app);
  const [cmd, ...args] = image.entrypoint;
  expect(cmd).toBe("node");
  // the image's environment, but on loopback and free ports (a test's server)
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: dir,
    ...image.env,
    HARMONY_HOST: "127.0.0.1",
    HARMONY_PORT: "0",
    HARMONY_GRPC_PORT: "0",
  };
  child = spawn(process.execPath, args, { cwd: app, env, stdio: ["ignore", "pipe", "inherit"] });
  exited = new Promise((resolve) => child.once("exit", resolve));
  const serving = await new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (l) => {
      const rec = JSON.parse(l) as Record<string, unknown>;
      logs.push(rec);
      if (rec.msg === "harmony-sidecar serving") resolve(rec);
    });
    child.once("exit", (code) => reject(new Error(`serve exited early with ${code}`)));
  });
  http = `http://127.0.0.1:${serving.port as number}`;
  grpcPort = serving.grpcPort as number;
}, 300_000);

afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("the image's final stage, laid out from deploy/Dockerfile", () => {
  it("builds in its build stage as make build does, and serves from its final stage alone", () => {
    expect(image.log.some((l) => /ran node scripts\/build\.mjs/.test(l))).toBe(true);
    expect(image.log.some((l) => /ran npm ci --omit=dev/.test(l))).toBe(true);
    // the vocabulary came from its table file, not rebuilt at start (nothing could write it on a read-only root)
    const serving = logs.find((l) => l.msg === "harmony-sidecar serving")!;
    expect(serving.vocabulary).toBe("file");
    expect(logs.some((l) => /vocabulary table was built/.test(String(l.msg)))).toBe(false);
  });

  it("renders on its render thread (workers/render.ts in the image)", async () => {
    const res = await fetch(`${http}/v1/render`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { ids: number[]; text: string };
    expect(body.text).toMatch(/<\|start\|>user<\|message\|>Hi<\|end\|>/);
    expect(body.ids.length).toBeGreaterThan(10);
  });

  it("answers /readyz and /v1/parse", async () => {
    expect((await fetch(`${http}/readyz`)).status).toBe(200);
    const res = await fetch(`${http}/v1/parse`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "<|channel|>final<|message|>Hi<|return|>" }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { events: { type: string }[] };
    expect(body.events.at(-1)).toMatchObject({ type: "done", finish_reason: "stop" });
  });

  it("serves /inspect and every file the page loads", async () => {
    const page = await fetch(`${http}/inspect`);
    expect(page.status).toBe(200);
    const html = await page.text();
    const refs = [...html.matchAll(/\b(?:src|href)="(\/inspect\/[^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThanOrEqual(2);
    const seen = new Set<string>();
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i]!;
      if (seen.has(ref)) continue;
      seen.add(ref);
      const r = await fetch(`${http}${ref}`);
      expect(r.status, ref).toBe(200);
      // a script's own imports are loaded too
      if (ref.endsWith(".js"))
        for (const m of (await r.text()).matchAll(/^import[^;]*?from\s+"\.\/([^"]+)"/gm))
          refs.push(path.posix.join(path.posix.dirname(ref), m[1]!));
    }
    expect([...seen]).toEqual(expect.arrayContaining(["/inspect/app.js", "/inspect/app.css", "/inspect/logic.js"]));
  });

  it("answers gRPC health on its gRPC port", async () => {
    const wire = schema();
    const Health = grpc.makeGenericClientConstructor(HEALTH_SERVICE, "Health");
    const h = new Health(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure()) as unknown as {
      Check(req: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
      close(): void;
    };
    try {
      const reply = await new Promise<Buffer>((resolve, reject) =>
        h.Check(Buffer.from(wire.HealthCheckRequest.encode({ service: "" }).finish()), (e, r) => (e ? reject(e) : resolve(r!))),
      );
      expect(wire.HealthCheckResponse.toObject(wire.HealthCheckResponse.decode(reply))).toEqual({ status: 1 }); // SERVING
    } finally {
      h.close();
    }
  });

  it("passes its own HEALTHCHECK", () => {
    expect(image.healthcheck?.[0]).toBe("node");
    const port = new URL(http).port;
    const r = spawnSync(process.execPath, image.healthcheck!.slice(1), { env: { ...process.env, HARMONY_PORT: port }, timeout: 60_000 });
    expect(r.status).toBe(0);
  });

  it("stops on SIGTERM with status 0, having written nothing to its filesystem", async () => {
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(snapshot(app)).toEqual(before);
  });
});
