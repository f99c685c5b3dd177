/**
 * One client connection (a WebSocket, or one gRPC Stream call): many
 * parser streams multiplexed over it.
 *
 * A frame is read, checked (limits first), split by worker slot into one
 * task per slot, and its answers are sent in frame order: everything a
 * connection receives is in the order of the frames it sent, and the events
 * of a stream are in order. Bad input becomes an `error` event with a code;
 * the connection and its other streams carry on.
 *
 * Backpressure: at most `maxInflightFrames` frames are being parsed per
 * connection, and at most `maxBufferedBytes` of answers wait to be written;
 * past either, the transport stops reading from this client until it drains.
 */
import { randomBytes } from "node:crypto";
import type { ServiceErrorCode } from "../core/errors.js";
import {
  BinaryFrameReader,
  readJsonFrame,
  OP_CLOSE,
  OP_OPEN,
  OP_TOKENS,
  OP_RENDER,
  type CloseOp,
  type OpenOp,
  type RenderOp,
  type OpError,
  type ReadFrame,
} from "../protocol/client-frame.js";
import { encodeServerFrame, jsonServerFrame, type StreamRef, type WireEvent } from "../protocol/events.js";
import type { Session } from "../pool/host.js";
import { RecentSet } from "./recent.js";
import { K_CLOSE, K_OPEN, K_TOKENS, type OpenWith, type OpsResult, type OpsTask, type OutputFormat } from "../pool/task.js";
import type { Service } from "./service.js";

export interface Transport {
  readonly kind: "ws" | "grpc" | "http";
  /** Write one ServerFrame; `done` when it has been handed to the socket. */
  send(frame: Uint8Array | string, done: () => void): void;
  pause(): void;
  resume(): void;
  /** End the connection (after the last send). */
  end(code: number, reason: string): void;
}

/** One worker slot's share of a frame, in frame order. */
interface Group {
  kinds: number[];
  sids: number[];
  offs: number[];
  extra: [number, OpenWith | string][];
  ids: number;
}

interface StreamState {
  name: string;
  /** Its handle (0: none); its events then carry the handle instead of the name. */
  handle: number;
  slot: number;
  generation: number;
  /** The stream's number on this connection (what tasks carry instead of its name). */
  sid: number;
  /** Its session, when it lives on the main thread: ops reach it without a lookup. */
  session: Session | null;
}

/** Close reasons we accept, as the parser names them. */
const REASONS = new Set(["eos", "length", "abort"]);

let nextConnId = 1;

/**
 * Open streams by handle: small handles (the usual 1..N of an engine's
 * sequence slots) index an array, larger ones a Map. A Map lookup per op
 * was ~3% of the main thread on 256-stream step frames.
 */
class HandleTable {
  private readonly small: (StreamState | undefined)[] = [];
  private readonly large = new Map<number, StreamState>();

  get(h: number): StreamState | undefined {
    return h < SMALL_HANDLES ? this.small[h] : this.large.get(h);
  }

  set(h: number, st: StreamState): void {
    if (h < SMALL_HANDLES) {
      // filled up to h (no holes: a sparse array would fall back to a dictionary)
      while (this.small.length <= h) this.small.push(undefined);
      this.small[h] = st;
    } else this.large.set(h, st);
  }

  delete(h: number): void {
    if (h < SMALL_HANDLES) this.small[h] = undefined;
    else this.large.delete(h);
  }
}

/** The format of most streams (shared: nothing changes it). */
const EVENTS: Readonly<OutputFormat> = Object.freeze({ kind: "events" });

/** Closed stream names, and handles, remembered per connection for the `stream_closed` error. */
const RECENTLY_CLOSED = 1024;

/** Handles below this live in the array (at most 8192 slots per connection). */
const SMALL_HANDLES = 8192;

/**
 * How an error about an op names the stream: by the name the op gave, or by
 * its handle when it gave none (a handle the op gave may belong to another
 * stream, whose events a client sorts by it).
 */
function opRef(name: string, handle: number): StreamRef {
  return name !== "" || handle === 0 ? { stream: name } : { handle };
}

/** How a stream's events name it. */
function refOf(st: StreamState): StreamRef {
  return st.handle !== 0 ? { handle: st.handle } : { stream: st.name };
}

export class Connection {
  readonly id = nextConnId++;
  private readonly streams = new Map<string, StreamState>();
  /** Open streams that have a handle, by handle. */
  private readonly handles = new HandleTable();
  /** Recently closed stream names and handles (bounded), for a precise error on late ops. */
  private readonly closed = new RecentSet<string>(RECENTLY_CLOSED);
  private readonly closedHandles = new RecentSet<number>(RECENTLY_CLOSED);
  private tail: Promise<void> = Promise.resolve();
  /** Sends chained on `tail` that have not run yet; a frame may be answered at once only when 0. */
  private queued = 0;
  private readonly reader = new BinaryFrameReader();
  private inflight = 0;
  private buffered = 0;
  private paused = false;
  private draining = false;
  private ended = false;
  private lastActivity = Date.now();
  private readonly slotsUsed = new Set<number>();
  private nextSid = 1;
  /** Random per connection; with a counter it makes tool call ids unique without a syscall per open. */
  private readonly idBase = randomBytes(6).toString("hex");
  private opened = 0;

  constructor(
    private readonly service: Service,
    private readonly transport: Transport,
  ) {}

  /** Which edge the connection came in on. */
  get kind(): Transport["kind"] {
    return this.transport.kind;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  get idleMs(): number {
    return this.inflight > 0 ? 0 : Date.now() - this.lastActivity;
  }

  /** A frame from the client: bytes (protobuf) or text (JSON mapping). */
  onFrame(data: Uint8Array | string): void {
    if (this.ended) return;
    const svc = this.service;
    const started = performance.now();
    this.lastActivity = Date.now();
    const json = typeof data === "string";
    svc.metrics.countFrame(this.transport.kind);
    const limit = svc.limits.maxIdsPerFrame;
    const read: ReadFrame = json ? readJsonFrame(data, limit) : this.reader.read(data, svc.schema, limit);
    const immediate: WireEvent[] = [];
    const fail = (e: OpError) => {
      immediate.push(this.errorEvent(opRef(e.stream, e.handle ?? 0), e.code, e.message));
    };
    // where the streams closed in this frame were, by what their events carry
    // (handle, else name): a stream opened later in the frame whose events
    // carry the same goes there, so the old stream's last events come first
    let closedHere: Map<string | number, number> | null = null;
    if (read.fatal) fail(read.fatal);
    for (const e of read.errors) fail(e);

    // ops for the inline slot are applied as they are read; the rest are
    // grouped into one task per worker slot, in frame order
    const pool = svc.pool;
    const inlineSlot = pool.inlineSlot;
    let host = pool.inlineHost;
    let inlineUsed = false;
    const perSlot: (Group | undefined)[] = [];
    const ops = read.ops;
    for (let i = 0; i < ops.n; i++) {
      const kind = ops.kinds[i]!;
      const name = ops.names[i]!;
      const handle = ops.handles[i]!;
      if (name === "" && (handle === 0 || kind === OP_OPEN)) {
        // (an open's handle may be another stream's: that error is the connection's)
        fail({
          code: "bad_frame",
          message: kind === OP_OPEN ? "an open without a stream name" : "an op without a stream name or handle",
          stream: "",
          handle: kind === OP_OPEN ? 0 : handle,
        });
        continue;
      }
      if (kind === OP_RENDER) {
        // answered in frame order with the rest of this frame
        const r = svc.renderJson((ops.rare[i] as RenderOp).json);
        if (r.ok) immediate.push({ stream: name, rendered: { request_id: name, ids: r.ids, text: r.text, restored: r.restored } });
        else
          immediate.push(
            this.errorEvent(name, "bad_request", `${r.error.code}${r.error.path ? ` at ${r.error.path}` : ""}: ${r.error.message}`),
          );
        continue;
      }
      let st: StreamState | undefined;
      let open: OpenWith | undefined;
      let reason = "";
      if (kind === OP_OPEN) {
        // an open always has a name: its errors name the stream by it (its handle may be another stream's)
        if (this.draining) {
          immediate.push(this.errorEvent(name, "shutting_down", "the server is draining; no new streams"));
          continue;
        }
        if (this.streams.has(name)) {
          immediate.push(this.errorEvent(name, "duplicate_stream", `stream ${JSON.stringify(name)} is already open`));
          continue;
        }
        const holder = handle !== 0 ? this.handles.get(handle) : undefined;
        if (holder) {
          immediate.push(
            this.errorEvent(name, "duplicate_stream", `handle ${handle} is already in use by stream ${JSON.stringify(holder.name)}`),
          );
          continue;
        }
        if (this.streams.size >= svc.limits.maxStreamsPerConnection) {
          immediate.push(
            this.errorEvent(name, "too_many_streams", `at most ${svc.limits.maxStreamsPerConnection} open streams per connection`),
          );
          continue;
        }
        const spec = this.openSpec(ops.rare[i] as OpenOp, name, handle);
        if (typeof spec === "string") {
          immediate.push(this.errorEvent(name, "bad_option", spec));
          continue;
        }
        // keyed the way the streams' events are: by handle when there is one, else by name
        const prior = closedHere?.get(handle !== 0 ? handle : name);
        const slot = prior !== undefined ? pool.assignTo(prior) : pool.assign();
        st = { name, handle, slot, generation: pool.generation(slot), sid: this.nextSid++, session: null };
        this.streams.set(name, st);
        this.closed.delete(name);
        if (handle !== 0) {
          this.handles.set(handle, st);
          this.closedHandles.delete(handle);
        }
        this.slotsUsed.add(slot);
        svc.metrics.openStreams.inc();
        open = spec;
      } else {
        st = handle !== 0 ? this.handles.get(handle) : this.streams.get(name);
        if (!st || (handle !== 0 && name !== "" && st.name !== name)) {
          immediate.push(this.lateOp(name, handle, st));
          continue;
        }
        if (kind === OP_CLOSE) {
          const given = (ops.rare[i] as CloseOp).reason;
          reason = given === "" ? "eos" : given;
          if (!REASONS.has(reason)) {
            immediate.push(
              this.errorEvent(opRef(name, handle), "bad_option", `close reason must be eos, length or abort, not ${JSON.stringify(given)}`),
            );
            continue;
          }
          this.forget(st);
          closedHere ??= new Map();
          closedHere.set(st.handle !== 0 ? st.handle : st.name, st.slot);
        }
      }
      if (st.slot === inlineSlot && host !== null) {
        if (!inlineUsed) {
          host.begin(this.id, json);
          inlineUsed = true;
        }
        try {
          // a main-thread stream got its session when its open was applied (if that
          // threw, the crash handler forgot the stream, so no later op finds it)
          if (kind === OP_TOKENS) host.tokensOf(st.session!, read.ids, ops.starts[i]!, ops.ends[i]!);
          else if (open) st.session = host.openStream(st.sid, open);
          else host.closeStream(st.sid, reason as "eos" | "length" | "abort");
        } catch (e) {
          // a bug, not bad input: the inline sessions are lost as in a worker
          // crash (their streams get worker_crashed); later ops go to a fresh host
          svc.logger.error({ conn: this.id, err: e }, "inline parser sessions failed");
          pool.inlineFailed();
          host = pool.inlineHost;
          inlineUsed = false;
        }
        continue;
      }
      let g = perSlot[st.slot];
      if (!g) perSlot[st.slot] = g = { kinds: [], sids: [], offs: [], extra: [], ids: 0 };
      if (kind === OP_TOKENS) {
        g.kinds.push(K_TOKENS);
        g.sids.push(st.sid);
        const start = ops.starts[i]!;
        const end = ops.ends[i]!;
        g.offs.push(start, end);
        g.ids += end - start;
      } else {
        g.extra.push([g.kinds.length, open ?? reason]);
        g.kinds.push(open ? K_OPEN : K_CLOSE);
        g.sids.push(st.sid);
        g.offs.push(0, 0);
      }
    }

    const results: (Promise<OpsResult | null> | OpsResult | null)[] = [];
    if (inlineUsed) results.push(pool.inlineHost!.finish());
    let pending = false;
    for (let slot = 0; slot < perSlot.length; slot++) {
      const g = perSlot[slot];
      if (!g) continue;
      // one task per worker slot, carrying only that slot's ids
      const ids = new Uint32Array(g.ids);
      const offs = new Uint32Array(g.offs.length);
      let at = 0;
      for (let i = 0; i < g.kinds.length; i++) {
        if (g.kinds[i] !== K_TOKENS) continue;
        const s = g.offs[2 * i]!;
        const e = g.offs[2 * i + 1]!;
        ids.set(read.ids.subarray(s, e), at);
        offs[2 * i] = at;
        offs[2 * i + 1] = at += e - s;
      }
      const task: OpsTask = {
        t: "ops",
        conn: this.id,
        json,
        kinds: Uint8Array.from(g.kinds),
        sids: Uint32Array.from(g.sids),
        offs,
        ids,
        extra: g.extra,
      };
      pending = true;
      results.push(
        pool.run(slot, task).catch(() => {
          // the worker died under this task; the crash handler fails its streams
          return null;
        }),
      );
    }

    const answer = (done: (OpsResult | null)[]) => {
      this.sendFrame(json, immediate, done);
      svc.metrics.frameLatency.observe((performance.now() - started) / 1000);
    };
    if (!pending && this.queued === 0) {
      // nothing ahead of this frame and nothing to wait for: answer now
      answer(results as (OpsResult | null)[]);
      return;
    }
    this.inflight++;
    this.updateFlow();
    const all = Promise.all(results);
    this.enqueue(async () => {
      const done = await all;
      this.inflight--;
      answer(done);
      this.updateFlow();
    });
  }

  /** Fail the streams a crashed worker held. */
  onWorkerCrash(slot: number, generation: number): void {
    if (this.ended) return;
    const lost: WireEvent[] = [];
    for (const st of [...this.streams.values()]) {
      if (st.slot !== slot || st.generation >= generation) continue;
      this.forget(st);
      const where =
        slot === this.service.pool.inlineSlot ? "the main thread's parser sessions failed" : "the worker holding this stream stopped";
      const ref = refOf(st);
      lost.push(this.errorEvent(ref, "worker_crashed", `${where}; the stream is lost`));
      lost.push({ ...ref, done: { finish_reason: "error", tokens: 0, messages: 0, recoveries: 0 } });
    }
    if (lost.length === 0) return;
    this.service.metrics.countEvents("done", lost.length / 2);
    this.enqueue(() => this.sendFrame(false, lost, [], true));
  }

  /**
   * Graceful drain: refuse new streams, let frames in flight finish, then
   * finish every open stream (an `error` shutting_down, then its `done`).
   */
  async drain(): Promise<void> {
    if (this.ended) return;
    this.draining = true;
    this.transport.pause();
    const open = [...this.streams.values()];
    const names = open.map((st) => st.name);
    if (names.length > 0) {
      const json = this.lastJson;
      const notices = open.map((st) => this.errorEvent(refOf(st), "shutting_down", "the server is shutting down; the stream ends here"));
      // close them as aborted, through the same path as a client Close
      this.lastActivity = Date.now();
      const frame = { ops: names.map((n) => ({ close: { stream: n, reason: "abort" } })) };
      this.enqueue(() => this.sendFrame(json, notices, [], true));
      this.onFrame(json ? JSON.stringify(frame) : (this.service.schema.ClientFrame.encode(frame).finish() as Uint8Array));
    }
    await this.tail;
    this.transport.end(1001, "server shutting down");
    this.ended = true;
  }

  /** Nothing arrived for too long: end the connection (its streams are freed). */
  idleTimeout(): void {
    if (this.ended) return;
    this.service.logger.info({ conn: this.id }, "closing idle connection");
    this.transport.end(4408, "idle timeout");
    this.close();
  }

  /** The client finished sending (gRPC half-close): answer what is in flight, then end. */
  async finish(): Promise<void> {
    await this.tail;
    if (!this.ended) this.transport.end(1000, "client finished");
    this.close();
  }

  /** The client went away: free its streams. */
  close(): void {
    if (this.ended && this.streams.size === 0) return;
    this.ended = true;
    for (const st of [...this.streams.values()]) this.forget(st);
    for (const slot of this.slotsUsed) void this.service.pool.drop(slot, this.id);
    this.service.connectionClosed(this);
  }

  // ------------------------------------------------------------------

  private lastJson = false;

  /** Run `fn` after everything sent before it, in order. */
  private enqueue(fn: () => void | Promise<void>): void {
    this.queued++;
    this.tail = this.tail.then(async () => {
      try {
        await fn();
      } finally {
        this.queued--;
      }
    });
  }

  private forget(st: StreamState): void {
    this.streams.delete(st.name);
    this.service.pool.release(st.slot);
    this.service.metrics.openStreams.dec();
    this.closed.add(st.name);
    if (st.handle !== 0) {
      this.handles.delete(st.handle);
      this.closedHandles.add(st.handle);
    }
  }

  /** The error for tokens or close naming a stream that is not open here (or a handle and a name that disagree). */
  private lateOp(name: string, handle: number, st: StreamState | undefined): WireEvent {
    const ref = opRef(name, handle);
    if (st)
      return this.errorEvent(ref, "unknown_stream", `handle ${handle} is stream ${JSON.stringify(st.name)}, not ${JSON.stringify(name)}`);
    const byName = handle === 0;
    if (byName ? this.closed.has(name) : this.closedHandles.has(handle)) {
      return this.errorEvent(
        ref,
        "stream_closed",
        byName ? `stream ${JSON.stringify(name)} is closed` : `the stream with handle ${handle} is closed`,
      );
    }
    return this.errorEvent(
      ref,
      "unknown_stream",
      byName ? `no open stream ${JSON.stringify(name)}` : `no open stream with handle ${handle}`,
    );
  }

  /** An error event for a stream name, or for how an op or a stream is named. */
  private errorEvent(ref: string | StreamRef, code: ServiceErrorCode, message: string): WireEvent {
    this.service.metrics.errors.inc({ code });
    this.service.metrics.countEvents("error", 1);
    return { ...(typeof ref === "string" ? { stream: ref } : ref), error: { code, message, at: 0 } } as WireEvent;
  }

  private openSpec(op: OpenOp, name: string, handle: number): OpenWith | string {
    const { role, mode, whole_messages: whole, non_strict: nonStrict } = op;
    const r = role === "" || role === "assistant" ? "assistant" : role === "none" ? null : undefined;
    if (r === undefined) return `role must be assistant or none, not ${JSON.stringify(role)}`;
    const m = mode === "" ? "resilient" : mode;
    if (m !== "resilient" && m !== "strict") return `mode must be resilient or strict, not ${JSON.stringify(mode)}`;
    if (nonStrict && m !== "strict") return "non_strict applies to strict mode only";
    const created = Math.floor(Date.now() / 1000);
    const model = op.model || "gpt-oss";
    const hex = `${this.idBase}${(++this.opened).toString(36)}`;
    let format: OutputFormat;
    if (op.format === "" || op.format === "events") format = EVENTS;
    else if (op.format === "openai.chat") {
      const field = op.reasoning_field || "reasoning";
      if (field !== "reasoning" && field !== "reasoning_content") {
        return `reasoning_field must be reasoning or reasoning_content, not ${JSON.stringify(op.reasoning_field)}`;
      }
      format = { kind: "openai.chat", id: `chatcmpl-${hex}`, model, created, reasoningField: field };
    } else if (op.format === "openai.responses") format = { kind: "openai.responses", id: `resp_${hex}`, model, created };
    else return `format must be events, openai.chat or openai.responses, not ${JSON.stringify(op.format)}`;
    return {
      role: r,
      mode: m,
      wholeMessages: whole,
      nonStrict,
      callIdPrefix: `call_${hex}_`,
      rememberReasoning: this.service.cot.enabled,
      format,
      name,
      handle,
    };
  }

  private sendFrame(json: boolean, immediate: WireEvent[], results: (OpsResult | null)[], force = false): void {
    if (this.ended && !force) return;
    this.lastJson = json;
    const svc = this.service;
    for (const r of results) if (r) svc.recordCounts(r, this.id);
    let frame: Uint8Array | string;
    if (json) {
      const parts = immediate.map((e) => JSON.stringify(e));
      for (const r of results) if (r?.json) parts.push(...r.json);
      if (parts.length === 0) return;
      frame = jsonServerFrame(parts);
    } else {
      const pieces: Uint8Array[] = [];
      if (immediate.length > 0) pieces.push(encodeServerFrame(svc.schema, immediate));
      for (const r of results) if (r?.bin && r.bin.length > 0) pieces.push(r.bin);
      if (pieces.length === 0) return;
      // ServerFrame fragments concatenate into one ServerFrame
      frame = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
    }
    const size = typeof frame === "string" ? frame.length : frame.byteLength;
    this.buffered += size;
    this.transport.send(frame, () => {
      this.buffered -= size;
      this.updateFlow();
    });
    this.updateFlow();
  }

  private updateFlow(): void {
    const l = this.service.limits;
    const congested = this.inflight >= l.maxInflightFrames || this.buffered >= l.maxBufferedBytes;
    if (congested && !this.paused) {
      this.paused = true;
      this.transport.pause();
    } else if (!congested && this.paused && this.inflight < l.maxInflightFrames / 2 && this.buffered < l.maxBufferedBytes / 2) {
      this.paused = false;
      this.transport.resume();
    }
  }
}
