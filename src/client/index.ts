/**
 * A client for harmony-sidecar over WebSocket (protobuf or JSON frames) or
 * gRPC. One client = one connection, many streams:
 *
 *   const client = await HarmonyClient.connect("ws://127.0.0.1:8765/v1/stream");
 *   const s = client.open("req-1");          // primed as a completion, resilient
 *   s.write([200005, 35644, 200008, 12194]); // ids as the engine produces them
 *   s.close();
 *   for await (const ev of s) console.log(ev);  // ends after `done`
 *
 * Several ops for many streams can share one frame: `client.batch()`.
 */
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { CodedError, type ErrorCode } from "../core/errors.js";
import type { HarmonyEvent } from "../core/events.js";
import { decodeServerFrame, fromWire, type StreamRef } from "../protocol/events.js";
import { schema, type Schema } from "../protocol/schema.js";
import { HARMONY_SERVICE } from "../protocol/grpc-methods.js";

export interface OpenOptions {
  role?: "assistant" | "none";
  mode?: "resilient" | "strict";
  wholeMessages?: boolean;
  nonStrict?: boolean;
  /** events (default), openai.chat or openai.responses: the latter arrive as {type: "openai", payload}. */
  format?: "events" | "openai.chat" | "openai.responses";
  reasoningField?: "reasoning" | "reasoning_content";
  model?: string;
}

export type ClientOpJson =
  | { open: { stream: string; handle?: number; role?: string; mode?: string; whole_messages?: boolean; non_strict?: boolean } }
  | { tokens: { stream?: string; handle?: number; ids: number[] | Uint32Array } }
  | { close: { stream?: string; handle?: number; reason?: string } }
  | { render: { request_id: string; request_json: string } };

export interface RenderedPrompt {
  ids: number[];
  text: string;
  restored: { tool_call_id: string; message_index: number; chars: number }[];
}

/**
 * Why the client failed: `unreachable` (refused, with the HTTP status in the
 * message, or the connection gone before the answer), or the service's own
 * code for a request it refused (a render's `bad_request`).
 */
export class ClientError extends CodedError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
  }
}

export interface ConnectOptions {
  /** Bearer token, when the server requires one. */
  token?: string;
  /** WebSocket only: send JSON text frames instead of protobuf. */
  json?: boolean;
  /**
   * Give every stream a numeric handle (Open.handle) and name it by that in
   * Tokens and Close: smaller frames both ways and a cheaper lookup on the
   * server. Events still reach the stream's StreamHandle by its name.
   */
  handles?: boolean;
}

type Listener = (stream: string, event: HarmonyEvent) => void;

/** Events of one stream, as an async iterable that ends after `done`. */
export class StreamHandle implements AsyncIterable<HarmonyEvent> {
  private readonly queue: HarmonyEvent[] = [];
  private waiting: ((v: IteratorResult<HarmonyEvent>) => void) | null = null;
  private finished = false;

  constructor(
    readonly client: HarmonyClient,
    readonly name: string,
    /** The stream's numeric handle on the wire (0: named by its name). */
    readonly wire = 0,
  ) {}

  /** How ops name this stream on the wire. */
  get ref(): StreamRef {
    return this.wire !== 0 ? { handle: this.wire } : { stream: this.name };
  }

  write(ids: ArrayLike<number>): void {
    this.client.send([{ tokens: { ...this.ref, ids: Array.from(ids) } }]);
  }

  close(reason: "eos" | "length" | "abort" = "eos"): void {
    this.client.send([{ close: { ...this.ref, reason } }]);
  }

  /** @internal */
  push(ev: HarmonyEvent): void {
    if (isLast(ev)) this.finished = true;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: ev, done: false });
    } else this.queue.push(ev);
  }

  /** @internal the connection ended: no more events will come. */
  abort(): void {
    this.finished = true;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: undefined, done: true });
    }
  }

  /** Every event until `done` (inclusive). */
  async collect(): Promise<HarmonyEvent[]> {
    const out: HarmonyEvent[] = [];
    for await (const ev of this) out.push(ev);
    return out;
  }

  [Symbol.asyncIterator](): AsyncIterator<HarmonyEvent> {
    let sawDone = false;
    return {
      next: () => {
        if (sawDone) return Promise.resolve({ value: undefined, done: true });
        const ev = this.queue.shift();
        if (ev) {
          if (isLast(ev)) sawDone = true;
          return Promise.resolve({ value: ev, done: false });
        }
        if (this.finished) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = (r) => {
            if (!r.done && isLast(r.value)) sawDone = true;
            resolve(r);
          };
        });
      },
    };
  }
}

export abstract class HarmonyClient {
  protected readonly schema: Schema = schema();
  private readonly handles = new Map<string, StreamHandle>();
  /** Streams opened with a numeric handle, by it. */
  private readonly numbered = new Map<number, StreamHandle>();
  private lastNumber = 0;
  /** @internal Set from ConnectOptions.handles. */
  useHandles = false;
  private readonly listeners: Listener[] = [];
  /** Events that belong to no stream (connection-level errors). */
  readonly connectionErrors: HarmonyEvent[] = [];
  closed = false;

  static async connect(url: string, opts: ConnectOptions = {}): Promise<HarmonyClient> {
    const c =
      url.startsWith("ws://") || url.startsWith("wss://")
        ? await WsClient.open(url, opts)
        : await GrpcClient.open(url.replace(/^grpc:\/\//, ""), opts);
    c.useHandles = opts.handles === true;
    return c;
  }

  /** Every event of every stream, as it arrives. */
  onEvent(listener: Listener): void {
    this.listeners.push(listener);
  }

  /** Open a stream (sends its Open op now) and return its handle. */
  open(name: string, opts: OpenOptions = {}): StreamHandle {
    const h = this.opening(name);
    this.send([{ open: openBody(name, opts, h.wire) }]);
    return h;
  }

  /** A handle for events of a stream opened by a batch frame. */
  handle(name: string): StreamHandle {
    let h = this.handles.get(name);
    if (!h) {
      h = new StreamHandle(this, name);
      this.handles.set(name, h);
    }
    return h;
  }

  /** @internal The StreamHandle of a stream about to be opened (with a fresh numeric handle, when asked for). */
  opening(name: string): StreamHandle {
    if (!this.useHandles) return this.handle(name);
    // always a fresh number and StreamHandle: a stream of the same name that
    // is still finishing keeps its own, and its last events still reach it
    let n = this.lastNumber;
    do n = n >= 0xffffffff ? 1 : n + 1;
    while (this.numbered.has(n));
    this.lastNumber = n;
    const h = new StreamHandle(this, name, n);
    this.handles.set(name, h);
    this.numbered.set(n, h);
    return h;
  }

  /** @internal How ops name a stream: by its numeric handle when it has one. */
  refOf(name: string): StreamRef {
    return this.handles.get(name)?.ref ?? { stream: name };
  }

  private renders = 0;

  /**
   * Render a chat request into a Harmony prompt (a Render op on this
   * connection). Rejects with the server's error message when it cannot.
   */
  async render(request: unknown): Promise<RenderedPrompt> {
    const id = `render-${++this.renders}`;
    const h = this.handle(id);
    this.send([{ render: { request_id: id, request_json: JSON.stringify(request) } }]);
    const it = h[Symbol.asyncIterator]();
    const first = await it.next();
    this.handles.delete(id);
    const ev = first.value as HarmonyEvent | undefined;
    if (!ev) throw new ClientError("unreachable", "the connection ended before the render answer");
    // the service's code (src/core/errors.ts), first in the message too, as the service's own texts have it
    if (ev.type === "error") throw new ClientError(ev.code as ErrorCode, `${ev.code}: ${ev.message}`);
    const r = ev as unknown as RenderedPrompt & { type: string };
    return { ids: r.ids, text: r.text, restored: r.restored ?? [] };
  }

  /** Build one frame holding ops for any number of streams. */
  batch(): FrameBuilder {
    return new FrameBuilder(this);
  }

  /** Send one ClientFrame with these ops. */
  abstract send(ops: ClientOpJson[]): void;
  /** Send an already encoded frame (bytes, or JSON text on a JSON WebSocket). */
  abstract sendRaw(frame: Uint8Array | string): void;
  abstract close(): Promise<void>;

  protected encode(ops: ClientOpJson[]): Uint8Array {
    return this.schema.ClientFrame.encode({ ops }).finish();
  }

  protected receive(events: Record<string, unknown>[]): void {
    for (const w of events) {
      const e = fromWire(w);
      if (!e) continue;
      const byNumber = e.handle !== 0 ? this.numbered.get(e.handle) : undefined;
      const name = byNumber ? byNumber.name : e.stream;
      for (const l of this.listeners) l(name, e.event);
      if (name === "") {
        this.connectionErrors.push(e.event);
        continue;
      }
      const h = byNumber ?? this.handle(name);
      h.push(e.event);
      if (isLast(e.event)) {
        if (this.handles.get(name) === h) this.handles.delete(name);
        if (h.wire !== 0) this.numbered.delete(h.wire);
      }
    }
  }

  protected ended(): void {
    this.closed = true;
    for (const h of this.handles.values()) h.abort();
  }
}

function openBody(name: string, o: OpenOptions, handle = 0) {
  return {
    stream: name,
    handle,
    role: o.role ?? "assistant",
    mode: o.mode ?? "resilient",
    whole_messages: o.wholeMessages ?? false,
    non_strict: o.nonStrict ?? false,
    format: o.format ?? "events",
    reasoning_field: o.reasoningField ?? "",
    model: o.model ?? "",
  };
}

/** The last event of a stream: `done`, or the closing object of an OpenAI format. */
function isLast(ev: HarmonyEvent): boolean {
  if (ev.type === "done") return true;
  if ((ev as { type: string }).type !== "openai") return false;
  const p = (ev as unknown as { payload: Record<string, unknown> }).payload;
  if (p.object === "chat.completion.chunk") {
    const choices = p.choices as { finish_reason?: string | null }[] | undefined;
    return (choices ?? []).some((c) => c.finish_reason) && !("usage" in p && p.usage);
  }
  return p.type === "response.completed" || p.type === "response.incomplete" || p.type === "response.failed";
}

export class FrameBuilder {
  private readonly ops: ClientOpJson[] = [];
  constructor(private readonly client: HarmonyClient) {}
  open(name: string, opts: OpenOptions = {}): this {
    this.ops.push({ open: openBody(name, opts, this.client.opening(name).wire) });
    return this;
  }
  tokens(name: string, ids: ArrayLike<number>): this {
    this.ops.push({ tokens: { ...this.client.refOf(name), ids: Array.from(ids) } });
    return this;
  }
  close(name: string, reason: "eos" | "length" | "abort" = "eos"): this {
    this.ops.push({ close: { ...this.client.refOf(name), reason } });
    return this;
  }
  get size(): number {
    return this.ops.length;
  }
  send(): void {
    if (this.ops.length > 0) this.client.send(this.ops.splice(0));
  }
}

export class WsClient extends HarmonyClient {
  private constructor(
    readonly ws: WebSocket,
    private readonly json: boolean,
  ) {
    super();
    ws.on("message", (data, isBinary) => {
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      if (isBinary) this.receive(decodeServerFrame(this.schema, buf));
      else this.receive((JSON.parse(buf.toString("utf8")) as { events: Record<string, unknown>[] }).events);
    });
    ws.on("close", () => this.ended());
  }

  static open(url: string, opts: ConnectOptions): Promise<WsClient> {
    const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(new WsClient(ws, opts.json === true)));
      ws.once("unexpected-response", (_req, res) => {
        const path = new URL(url).pathname;
        // the sidecar's streams are at /v1/stream: a URL without it is the usual mistake
        const hint =
          res.statusCode === 404 && path !== "/v1/stream" ? ` (no WebSocket at ${path}: the sidecar's is ws://HOST:PORT/v1/stream)` : "";
        res.resume();
        reject(new ClientError("unreachable", `server refused the connection: HTTP ${res.statusCode}${hint}`));
      });
      ws.once("error", reject);
    });
  }

  send(ops: ClientOpJson[]): void {
    if (this.json) {
      const plain = ops.map((o) => ("tokens" in o ? { tokens: { ...o.tokens, ids: Array.from(o.tokens.ids) } } : o));
      this.ws.send(JSON.stringify({ ops: plain }));
    } else this.ws.send(this.encode(ops));
  }

  sendRaw(frame: Uint8Array | string): void {
    this.ws.send(frame, { binary: typeof frame !== "string" });
  }

  close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.once("close", () => resolve());
      this.ws.close(1000);
    });
  }
}

const GrpcStub = grpc.makeGenericClientConstructor(HARMONY_SERVICE, "Harmony");

export class GrpcClient extends HarmonyClient {
  private readonly client: grpc.Client;
  readonly call: grpc.ClientDuplexStream<Uint8Array, Buffer>;
  /** The call's final status, once it has ended. */
  status: grpc.StatusObject | null = null;

  private constructor(address: string, opts: ConnectOptions) {
    super();
    this.client = new GrpcStub(address, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    if (opts.token) md.set("authorization", `Bearer ${opts.token}`);
    const stub = this.client as unknown as { Stream(md: grpc.Metadata): grpc.ClientDuplexStream<Uint8Array, Buffer> };
    this.call = stub.Stream(md);
    this.call.on("data", (b: Buffer) => this.receive(decodeServerFrame(this.schema, b)));
    this.call.on("status", (s: grpc.StatusObject) => {
      this.status = s;
    });
    this.call.on("error", () => this.ended());
    this.call.on("end", () => this.ended());
  }

  static async open(address: string, opts: ConnectOptions): Promise<GrpcClient> {
    const c = new GrpcClient(address, opts);
    await new Promise<void>((resolve, reject) => c.client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())));
    return c;
  }

  send(ops: ClientOpJson[]): void {
    this.call.write(this.encode(ops));
  }

  sendRaw(frame: Uint8Array | string): void {
    this.call.write(typeof frame === "string" ? Buffer.from(frame) : frame);
  }

  async close(): Promise<void> {
    if (!this.closed) {
      const ended = new Promise<void>((resolve) => {
        this.call.once("status", () => resolve());
        this.call.once("error", () => resolve());
      });
      this.call.end();
      await ended;
    }
    this.client.close();
  }
}
