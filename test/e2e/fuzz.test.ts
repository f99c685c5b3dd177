/**
 * Fuzzers over every decoder a client reaches (issue #16): binary and JSON
 * frames, HTTP bodies for render, chat and responses, gRPC messages. Each
 * asserts that no exception escapes, that the answer is a coded error or a
 * valid answer, and that the server still answers /healthz. The readers are
 * fuzzed in process (many runs); the server over the wire (fewer, slower).
 */
import * as grpc from "@grpc/grpc-js";
import fc from "fast-check";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readBinaryFrame } from "../../src/protocol/binary-frame.js";
import { HARMONY_SERVICE } from "../../src/protocol/grpc-methods.js";
import { readJsonFrame } from "../../src/protocol/json-frame.js";
import { schema } from "../../src/protocol/schema.js";
import type { Server } from "../../src/server.js";
import { fcParams } from "../helpers.js";
import { startStandIn, type StandIn } from "./stand-in-vllm.js";
import { startTestServer } from "./test-server.js";

const wire = schema();
const CODES = /^[a-z_]+$/;

/** JSON values with deep nesting now and then (past the 64-level limit too). */
const deepJson = fc.oneof(
  fc.json({ maxDepth: 6 }),
  fc.integer({ min: 1, max: 200 }).map((d) => "[".repeat(d) + "]".repeat(d)),
  fc.integer({ min: 1, max: 200 }).map((d) => '{"a":'.repeat(d) + "1" + "}".repeat(d)),
);

/** Frame-shaped JSON: ops with fields of any type. */
const anyOp = fc.record(
  {
    open: fc.oneof(fc.anything({ maxDepth: 3 }), fc.record({ stream: fc.anything({ maxDepth: 1 }), role: fc.anything({ maxDepth: 1 }) })),
    tokens: fc.oneof(
      fc.anything({ maxDepth: 3 }),
      fc.record({ stream: fc.string(), ids: fc.array(fc.anything({ maxDepth: 1 }), { maxLength: 5 }) }),
    ),
    close: fc.anything({ maxDepth: 2 }),
    render: fc.anything({ maxDepth: 2 }),
  },
  { requiredKeys: [] },
);

describe("frame readers never throw", () => {
  it("binary frames: any bytes give ops, op errors or a coded refusal", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => {
        const r = readBinaryFrame(bytes, wire, 1000);
        for (const e of [...r.errors, ...(r.fatal ? [r.fatal] : [])]) expect(e.code).toMatch(CODES);
      }),
      fcParams(2000),
    );
  });

  it("binary frames: encoded ClientFrames with any field values", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              open: fc.record({ stream: fc.string(), role: fc.string(), handle: fc.nat(), tools: fc.array(fc.string(), { maxLength: 3 }) }),
            }),
            fc.record({ tokens: fc.record({ stream: fc.string(), ids: fc.array(fc.nat(), { maxLength: 20 }), handle: fc.nat() }) }),
            fc.record({ close: fc.record({ stream: fc.string(), reason: fc.string() }) }),
          ),
          { maxLength: 10 },
        ),
        (ops) => {
          const r = readBinaryFrame(wire.ClientFrame.encode({ ops }).finish(), wire, 1000);
          expect(r.fatal === undefined || CODES.test(r.fatal.code)).toBe(true);
        },
      ),
      fcParams(500),
    );
  });

  it("JSON frames: any text, any JSON, any op shapes", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          deepJson,
          fc.array(anyOp, { maxLength: 6 }).map((ops) => JSON.stringify({ ops })),
        ),
        (text) => {
          const r = readJsonFrame(text, 1000);
          for (const e of [...r.errors, ...(r.fatal ? [r.fatal] : [])]) expect(e.code).toMatch(CODES);
        },
      ),
      fcParams(2000),
    );
  });
});

describe("the server never fails on a hostile body or message", () => {
  let server: Server;
  let base: string;
  let grpcAddress: string;
  let upstream: StandIn;

  beforeAll(async () => {
    upstream = await startStandIn();
    upstream.script({ tokens: [] });
    const s = await startTestServer({ upstream: { url: upstream.url, idleTimeoutMs: 1000, reasoningField: "reasoning" } });
    server = s.server;
    base = s.http;
    grpcAddress = s.grpc;
  });

  afterAll(async () => {
    await server.stop();
    await upstream.close();
  });

  /** A chat-ish body: a request whose fields are anything. */
  const chatish = fc.record(
    {
      model: fc.anything({ maxDepth: 1 }),
      messages: fc.oneof(
        fc.anything({ maxDepth: 3 }),
        fc.array(
          fc.record(
            { role: fc.anything({ maxDepth: 1 }), content: fc.anything({ maxDepth: 2 }), tool_calls: fc.anything({ maxDepth: 3 }) },
            { requiredKeys: [] },
          ),
          { maxLength: 4 },
        ),
      ),
      input: fc.anything({ maxDepth: 3 }),
      tools: fc.anything({ maxDepth: 3 }),
      temperature: fc.anything({ maxDepth: 1 }),
      max_tokens: fc.anything({ maxDepth: 1 }),
      stream: fc.boolean(),
    },
    { requiredKeys: [] },
  );

  it("HTTP bodies for render, chat and responses: a coded answer, never a 500", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/v1/render", "/v1/chat/completions", "/v1/responses"),
        fc.oneof(
          fc.string(),
          deepJson,
          chatish.map((o) => JSON.stringify(o)),
        ),
        async (path, body) => {
          const res = await fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
          const text = await res.text();
          expect(res.status, text).not.toBe(500);
          if (res.status >= 400) expect((JSON.parse(text) as { error: { code: string } }).error.code).toMatch(CODES);
        },
      ),
      fcParams(150),
    );
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it("WebSocket frames of any bytes or text: answered or refused, the connection's peers unhurt", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.string(), deepJson), async (frame) => {
        await new Promise<void>((resolve, reject) => {
          const ws = new WebSocket(`${base.replace("http", "ws")}/v1/stream`);
          ws.on("open", () => {
            ws.send(frame);
            // a frame with nothing to answer gets no answer: a sync frame after it shows it was read
            ws.send(JSON.stringify({ ops: [{ open: { stream: "~sync" } }, { close: { stream: "~sync" } }] }));
          });
          ws.on("message", (data: Buffer, isBinary) => {
            const events = isBinary
              ? ((wire.ServerFrame.toObject(wire.ServerFrame.decode(data)) as { events?: Record<string, unknown>[] }).events ?? [])
              : (JSON.parse(data.toString("utf8")) as { events: Record<string, unknown>[] }).events;
            for (const e of events) if (e.error) expect((e.error as { code: string }).code).toMatch(CODES);
            if (events.some((e) => e.stream === "~sync" && e.done)) ws.close();
          });
          ws.on("close", () => resolve());
          ws.on("error", reject);
        });
      }),
      fcParams(100),
    );
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it("gRPC Render and Stream messages of any bytes: INVALID_ARGUMENT or an answer, never UNKNOWN", async () => {
    const Stub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");
    const client = new Stub(grpcAddress, grpc.credentials.createInsecure()) as unknown as {
      Render(b: Uint8Array, cb: (e: grpc.ServiceError | null, r?: Buffer) => void): void;
      close(): void;
    };
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }),
          fc.oneof(fc.string(), deepJson).map((json) => wire.Render.encode({ request_id: "r", request_json: json }).finish()),
        ),
        async (bytes) => {
          const err = await new Promise<grpc.ServiceError | null>((resolve) => client.Render(bytes, (e) => resolve(e)));
          if (err) expect([grpc.status.INVALID_ARGUMENT, grpc.status.UNAVAILABLE]).toContain(err.code);
        },
      ),
      fcParams(150),
    );
    // Stream: any bytes as ClientFrames; the call ends cleanly (status OK) after its answers
    const streamer = client as unknown as { Stream(): grpc.ClientDuplexStream<Uint8Array, Buffer> };
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 200 }), { minLength: 1, maxLength: 4 }), async (frames) => {
        const status = await new Promise<grpc.StatusObject>((resolve) => {
          const call = streamer.Stream();
          call.on("data", (b: Buffer) => {
            const events = (wire.ServerFrame.toObject(wire.ServerFrame.decode(b)) as { events?: Record<string, unknown>[] }).events ?? [];
            for (const e of events) if (e.error) expect((e.error as { code: string }).code).toMatch(CODES);
          });
          call.on("status", resolve);
          call.on("error", () => undefined);
          for (const f of frames) call.write(f);
          call.end();
        });
        expect(status.code).toBe(grpc.status.OK);
      }),
      fcParams(60),
    );
    client.close();
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});
