/**
 * One client connection (a WebSocket, or one gRPC Stream call): many
 * parser streams multiplexed over it.
 *
 * A frame is read, checked (limits first), routed to its streams' parser
 * sessions (src/pool/route.ts: the main thread's inline slot, or one task
 * per worker slot), and its answers are sent in frame order: everything a
 * connection receives is in the order of the frames it sent, and the events
 * of a stream are in order. Bad input becomes an `error` event with a code;
 * the connection and its other streams carry on.
 *
 * Backpressure: at most `maxInflightFrames` frames are being parsed per
 * connection, and at most `maxBufferedBytes` of answers wait to be written;
 * past either, the transport stops reading from this client until it drains.
 */
import { describeValue } from "../core/json.js";
import { MAX_TOOL_NAME, MAX_TOOLS } from "../core/tools.js";
import { randomBytes } from "node:crypto";
import { CLOSE_CODES, type CloseCode, type ServiceErrorCode } from "../core/errors.js";
import { BinaryFrameReader } from "../protocol/binary-frame.js";
import { readJsonFrame } from "../protocol/json-frame.js";
import {
  MAX_ERRORS_PER_CODE,
  leftOutMessage,
  OpList,
  OP_CLOSE,
  OP_OPEN,
  OP_TOKENS,
  OP_RENDER,
  type CloseOp,
  type OpenOp,
  type RenderOp,
  type OpError,
  type ReadFrame,
} from "../protocol/ops.js";
import { encodeServerFrame, jsonServerFrame, type StreamRef, type WireEvent } from "../protocol/events.js";
import { FrameRoute, type CloseReason } from "../pool/route.js";
import { opRef, refOf, StreamBook, type StreamState } from "./streams.js";
import { memoScope } from "../store/store.js";
import type { OpenWith, OpsResult, OutputFormat } from "../pool/task.js";
import type { Logger } from "pino";
import type { Metrics } from "./metrics.js";
import { STREAM_BYTES, type Limits } from "./limits.js";
import type { ParserPool } from "../pool/pool.js";
import type { Schema } from "../protocol/schema.js";
import type { ReasoningStore } from "../store/store.js";
import type { RenderOutcome } from "../openai/render.js";
import type { TurnBudget } from "./turn.js";

export interface Transport {
  readonly kind: "ws" | "grpc" | "http";
  /** Write one ServerFrame; `done` when it has been handed to the socket. */
  send(frame: Uint8Array | string, done: () => void): void;
  /** An in-process client's answer (ops given with Connection.onOps): the events as objects; `done` when taken. */
  deliver?(events: readonly WireEvent[], done: () => void): void;
  pause(): void;
  resume(): void;
  /** End the connection (after the last send). */
  end(code: CloseCode, reason: string): void;
}

/** What a connection needs of the service it belongs to (src/service/service.ts implements it). */
export interface ConnectionHost {
  readonly schema: Schema;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly limits: Limits;
  readonly pool: ParserPool;
  readonly cot: ReasoningStore;
  /** Render a chat request (JSON text) into a Harmony prompt. */
  renderJson(json: string, tenant: string): Promise<RenderOutcome>;
  /** Whether the process is past its memory budget (no new streams then). */
  overBudget(): boolean;
  /** The clients' share of an event-loop turn (./turn.ts), shared by every connection. */
  readonly turn: TurnBudget;
  /** Fold a batch's counts into the metrics and the reasoning store. */
  recordCounts(r: OpsResult, conn: number): void;
  connectionClosed(c: Connection): void;
}

/**
 * How a connection's answers go out: protobuf bytes, JSON text (text-frame
 * clients), or the event objects themselves (an in-process client).
 */
export type AnswerForm = "bin" | "json" | "objects";

/** Random bytes for connections' id bases, drawn 12 at a time: one draw of the generator per 256 connections (the front opens one a request). */
let idPool = Buffer.alloc(0);
let idAt = 0;

/** 12 random bytes as hex, never the same pool bytes twice. */
export function randomHex12(): string {
  if (idAt + 12 > idPool.length) {
    idPool = randomBytes(12 * 256);
    idAt = 0;
  }
  const hex = idPool.toString("hex", idAt, idAt + 12);
  idAt += 12;
  return hex;
}

/**
 * The errors about a frame's ops, bounded before the answer is built (as the
 * frame readers bound theirs): the first MAX_ERRORS_PER_CODE of each code
 * are answered, the rest of that code are counted in one last error.
 */
class FrameErrors {
  private readonly seen = new Map<string, number>();

  add(immediate: WireEvent[], ev: WireEvent): void {
    if (this.take((ev.error as { code: string }).code)) immediate.push(ev);
  }

  /** Count an error of `code`: whether the answer lists it (else it need not even be made). */
  take(code: string): boolean {
    const n = (this.seen.get(code) ?? 0) + 1;
    this.seen.set(code, n);
    return n <= MAX_ERRORS_PER_CODE;
  }

  /** Append the counts of what was left out, and start over for the next frame. */
  flush(immediate: WireEvent[]): void {
    if (this.seen.size === 0) return; // most frames: no iterator to make
    for (const [code, n] of this.seen) {
      if (n <= MAX_ERRORS_PER_CODE) continue;
      immediate.push({ stream: "", error: { code, message: leftOutMessage(n - MAX_ERRORS_PER_CODE), at: 0 } } as WireEvent);
    }
    this.seen.clear();
  }
}

/** A frame's ops being read (over several turns when they are many): what is read so far, and its answer's parts. */
interface FrameRead {
  read: ReadFrame;
  form: AnswerForm;
  started: number;
  immediate: WireEvent[];
  route: FrameRoute;
  closedHere: Map<string | number, number> | null;
  renders: Promise<void>[] | null;
  /** The next op to read. */
  at: number;
}

/** How many of a frame's ops are read between looks at the turn's budget (and at least, per turn). */
const OPS_PER_CHECK = 64;

/** Holds a render op's place in a frame's answer until its render is done. */
const RENDERING: WireEvent = Object.freeze({ stream: "" }) as WireEvent;

/** Close reasons we accept, as the parser names them. */
const REASONS: ReadonlySet<string> = new Set<CloseReason>(["eos", "length", "abort"]);

let nextConnId = 1;

/**
 * Connections that share one budget: the gRPC calls of one HTTP/2
 * connection (each call is a Connection of its own). Their open streams
 * count together against `maxConnectionBytes`, and their unwritten answers
 * together against `maxBufferedBytes`: a client does not get a budget per
 * call by opening many calls.
 */
export class ConnectionGroup {
  readonly members = new Set<Connection>();
  /** Answer bytes of every member waiting to be written. */
  buffered = 0;

  /** What the members' open streams hold, by the connection budget's count. */
  get streamBytes(): number {
    let n = 0;
    for (const c of this.members) n += c.streamBytes;
    return n;
  }

  /** A member's answers drained: the members paused for the group's sake may read again. */
  drained(): void {
    for (const c of this.members) c.reconsiderFlow();
  }
}

/** The format of most streams (shared: nothing changes it). */
const EVENTS: Readonly<OutputFormat> = Object.freeze({ kind: "events" });

export class Connection {
  readonly id = nextConnId++;
  private readonly streams = new StreamBook();
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
  /** Random per connection; with a counter it makes tool call ids unique without a syscall per open. */
  private readonly idBase = randomHex12();
  private readonly memoScope: string;
  /** This frame's op errors by code: past MAX_ERRORS_PER_CODE of one code they are counted, not answered. */
  private readonly opErrors = new FrameErrors();
  private opened = 0;

  /** Since when this client has left its answers unread past the bound (performance.now()), or null. */
  private stalledSince: number | null = null;

  constructor(
    private readonly service: ConnectionHost,
    private readonly transport: Transport,
    /** Whose streams these are (Service.tenantOf): remembered reasoning is scoped by it. */
    readonly tenant: string,
    /** The budget this connection shares with others (the calls of one HTTP/2 connection), if any. */
    private readonly group: ConnectionGroup | null = null,
  ) {
    this.memoScope = memoScope(tenant);
    group?.members.add(this);
  }

  /** What this connection's open streams hold, by the connection budget's count. */
  get streamBytes(): number {
    return this.streams.bytes;
  }

  /** How long this client has left its answers unread past `maxBufferedBytes` (0: it has not). */
  get stalledMs(): number {
    return this.stalledSince === null ? 0 : performance.now() - this.stalledSince;
  }

  /** The client left its answers unread past --slow-client-timeout-ms: end the connection (its streams are freed). */
  slowClient(): void {
    if (this.ended) return;
    this.service.logger.info({ conn: this.id, buffered: this.buffered }, "a client left its answers unread; dropping it");
    this.service.metrics.slowClients.inc({ transport: this.transport.kind });
    this.transport.end(CLOSE_CODES.slow_reader, "slow reader: answers left unread");
    this.close();
  }

  /** Which edge the connection came in on. */
  get kind(): Transport["kind"] {
    return this.transport.kind;
  }

  get idleMs(): number {
    return this.inflight > 0 ? 0 : Date.now() - this.lastActivity;
  }

  /**
   * A frame from the client: bytes (protobuf) or text (JSON mapping). Read
   * as decode → validate → route → answer: the frame is decoded (limits
   * first), each op is checked against the connection's streams, routed to
   * its stream's parser session (main thread) or its worker slot's task, and
   * the answer goes out in frame order once the tasks are done.
   */
  onFrame(data: Uint8Array | string): void {
    if (this.ended) return;
    if (this.deferred !== null) {
      this.deferred.push(data);
      return;
    }
    const started = performance.now();
    // this turn's frames have had their share (./turn.ts), or the client leaves its answers unread (a frame
    // the socket had read before it was paused): the rest wait for the check phase, the socket paused
    if (this.paused || this.service.turn.spent(started)) {
      this.waitTurn([data]);
      return;
    }
    if (!this.readFrame(data, started, this.service.turn)) this.waitTurn([]);
  }

  /** Frames (and a frame's ops, when `partial`) wait for a later turn, the socket paused. */
  private waitTurn(frames: (Uint8Array | string)[]): void {
    this.deferred = frames;
    this.setReading();
    this.service.turn.defer(this.runDeferred);
  }

  /** Frames read past a turn's budget (./turn.ts), in order from `deferredAt`; null when none wait. */
  private deferred: (Uint8Array | string)[] | null = null;
  private deferredAt = 0;
  /** A frame whose ops were read in part when the turn's budget ran out: the rest are read first. */
  private partial: FrameRead | null = null;
  /** The waiting frames are held back until the client reads its answers (updateFlow queues them again). */
  private heldBack = false;

  /** The waiting frames, as many as the turn's budget takes (one at least); whether some still wait (TurnBudget.defer). */
  private readonly runDeferred = (): boolean => this.readDeferred(this.service.turn);

  /**
   * The waiting frames in order: as many as `turn`'s budget takes (one at least), or all of them (null).
   * Whether some still wait for the next turn; none are read while the connection is congested (heldBack).
   */
  private readDeferred(turn: TurnBudget | null): boolean {
    const frames = this.deferred;
    if (frames === null) return false;
    for (let first = true; !this.ended; first = false) {
      // a client that leaves its answers unread is not read either: what it sent waits until it reads them
      if (turn !== null && this.paused) {
        this.heldBack = true;
        return false;
      }
      const part = this.partial;
      if (part !== null) {
        this.partial = null;
        if (!this.readOps(part, turn)) return true;
      } else if (this.deferredAt < frames.length) {
        if (!first && turn !== null && turn.spent(performance.now())) return true;
        const data = frames[this.deferredAt]!;
        frames[this.deferredAt++] = "";
        if (!this.readFrame(data, performance.now(), turn)) return true;
      } else break;
    }
    this.dropDeferred();
    return false;
  }

  /** No frame waits any more (all read, or the connection ended): reading goes on as the flow control has it. */
  private dropDeferred(): void {
    this.deferred = null;
    this.deferredAt = 0;
    this.partial = null;
    this.heldBack = false;
    if (!this.ended) this.setReading();
  }

  /** Read a frame; false when its ops are read in part (`partial`), the turn's budget spent. */
  private readFrame(data: Uint8Array | string, started: number, turn: TurnBudget | null): boolean {
    const svc = this.service;
    const json = typeof data === "string";
    // decode
    const { maxIdsPerFrame, maxOpsPerFrame } = svc.limits;
    const read: ReadFrame = json
      ? readJsonFrame(data, maxIdsPerFrame, maxOpsPerFrame)
      : this.reader.read(data, svc.schema, maxIdsPerFrame, maxOpsPerFrame);
    return this.onRead(read, json ? "json" : "bin", started, turn);
  }

  /**
   * Ops from an in-process client (src/service/door.ts), already typed: no
   * frame to decode; checked, routed and answered as a frame's, the answer's
   * events as objects through the transport's `deliver`.
   */
  onOps(read: ReadFrame): void {
    if (this.ended) return;
    // (an in-process client's ops are one engine chunk's: read whole)
    this.onRead(read, "objects", performance.now(), null);
  }

  /** The streams of a {@link tokensNow} call (kept: one array per connection, not one per call). */
  private readonly nowStreams: StreamState[] = [];

  /**
   * Token ids from an in-process client (src/service/door.ts), fed to the
   * main thread's sessions and answered at once, when that is what the frame
   * path would do: every op a tokens op of an open stream held by the inline
   * slot, and nothing of this connection's queued or in flight ahead of
   * them. The same host, counts, notes, memos and delivery as a frame's,
   * without a frame's routing and bookkeeping (the front sends one such
   * batch per engine chunk). False when any of that does not hold: nothing
   * was done, and the ops go the frame's way (onOps).
   */
  tokensNow(ops: OpList, ids: Uint32Array): boolean {
    if (this.ended || this.queued !== 0 || this.inflight !== 0 || this.deferred !== null) return false;
    const pool = this.service.pool;
    const host = pool.inlineHost;
    if (host === null) return false;
    const inline = pool.inlineSlot;
    // (entries past ops.n are stale: only [0, ops.n) is read)
    const streams = this.nowStreams;
    for (let i = 0; i < ops.n; i++) {
      if (ops.kinds[i] !== OP_TOKENS || ops.handles[i] !== 0) return false;
      const st = this.streams.find(ops.names[i]!, 0);
      if (st === undefined || st.slot !== inline || st.session === null) return false;
      streams[i] = st;
    }
    this.lastActivity = Date.now();
    this.service.metrics.countFrame(this.transport.kind);
    host.begin(this.id, true, true);
    try {
      for (let i = 0; i < ops.n; i++) host.tokensOf(streams[i]!.session!, ids, ops.starts[i]!, ops.ends[i]!);
    } catch (e) {
      // a bug, not bad input: as FrameRoute does, the inline sessions are lost as in a worker crash (the crash handler tells the streams)
      this.inlineFailed(e);
      pool.inlineFailed();
      return true;
    }
    this.sendFrame("objects", [], [host.finish()]);
    return true;
  }

  /** The text {@link textNow} took (null: it took the step but the sessions failed), and its delta field. */
  textTaken: string | null = null;
  textField = "";

  /**
   * One stream's ids from an in-process client, when {@link tokensNow} would
   * feed them and they are a Chat or Responses text step (src/pool/host.ts `plainText`):
   * taken and counted as a batch of them would be, their text left in
   * `textTaken` (its field in `textField`) for the client to write, with no
   * batch, event object or delivery. False when any of that does not hold:
   * nothing was done, and the ids go tokensNow's way.
   */
  textNow(stream: string, ids: Uint32Array, start: number, end: number): boolean {
    if (this.ended || this.queued !== 0 || this.inflight !== 0 || this.deferred !== null) return false;
    const pool = this.service.pool;
    const host = pool.inlineHost;
    if (host === null) return false;
    const st = this.streams.find(stream, 0);
    if (st === undefined || st.slot !== pool.inlineSlot || st.session === null) return false;
    let text: string | null;
    try {
      text = host.plainText(st.session, ids, start, end);
    } catch (e) {
      // as tokensNow: the inline sessions are lost as in a worker crash (the crash handler tells the streams)
      this.inlineFailed(e);
      pool.inlineFailed();
      this.textTaken = null;
      return true;
    }
    if (text === null) return false;
    this.lastActivity = Date.now();
    const m = this.service.metrics;
    m.countFrame(this.transport.kind);
    m.countTokens(end - start);
    m.countEvents("delta", 1);
    this.textTaken = text;
    this.textField = host.plainField;
    return true;
  }

  /** The main thread's parser sessions threw (a bug): logged, for this connection. */
  private inlineFailed(e: unknown): void {
    this.service.logger.error({ conn: this.id, err: e }, "inline parser sessions failed");
  }

  /**
   * A read frame's ops validated, routed and answered, in frame order. With
   * a turn, the ops are read while its budget lasts (OPS_PER_CHECK at
   * least): a frame of thousands of opens is read over several turns, the
   * connection's later frames waiting, so that it does not hold the loop
   * for tens of milliseconds. False when ops are left (`partial`).
   */
  private onRead(read: ReadFrame, form: AnswerForm, started: number, turn: TurnBudget | null): boolean {
    const svc = this.service;
    this.lastActivity = Date.now();
    svc.metrics.countFrame(this.transport.kind);
    const json = form !== "bin";
    const immediate: WireEvent[] = [];
    if (read.fatal) immediate.push(this.opError(read.fatal));
    for (const e of read.errors) immediate.push(this.opError(e));
    const route = new FrameRoute(svc.pool, this.id, json, read.ids, (e) => this.inlineFailed(e), form === "objects");
    return this.readOps({ read, form, started, immediate, route, closedHere: null, renders: null, at: 0 }, turn);
  }

  /** {@link onRead}'s op loop, from `f.at`: validate and route op by op, in frame order, then answer; false when ops are left. */
  private readOps(f: FrameRead, turn: TurnBudget | null): boolean {
    const { immediate, route } = f;
    const ops = f.read.ops;
    let i = f.at;
    for (let checkAt = i + OPS_PER_CHECK; i < ops.n; i++) {
      if (i === checkAt) {
        checkAt += OPS_PER_CHECK;
        if (turn !== null && turn.spent(performance.now())) {
          // the rest in a later turn; the main thread's sessions answer what they have read so far
          f.at = i;
          route.pause();
          this.partial = f;
          return false;
        }
      }
      const kind = ops.kinds[i]!;
      const name = ops.names[i]!;
      const handle = ops.handles[i]!;
      if (name === "" && (handle === 0 || kind === OP_OPEN)) {
        // (an open's handle may be another stream's: that error is the connection's)
        this.opErrors.add(immediate, this.unnamed(kind, handle));
      } else if (kind === OP_TOKENS) {
        const st = this.streams.find(name, handle);
        if (st) route.tokens(st, ops.starts[i]!, ops.ends[i]!);
        else this.lateOp(immediate, name, handle);
      } else if (kind === OP_OPEN) {
        // where the streams closed in this frame were, by what their events carry
        // (handle, else name): a stream opened later in the frame whose events
        // carry the same goes there, so the old stream's last events come first
        this.openStream(ops.rare[i] as OpenOp, name, handle, f.closedHere, route, immediate);
      } else if (kind === OP_CLOSE) {
        const st = this.closeStream(ops.rare[i] as CloseOp, name, handle, route, immediate);
        if (st) (f.closedHere ??= new Map()).set(st.handle !== 0 ? st.handle : st.name, st.slot);
      } else if (kind === OP_RENDER) {
        // renders (rare) run on the render thread; their answers take their place in the frame's order
        const at = immediate.push(RENDERING) - 1;
        (f.renders ??= []).push(this.render(name, (ops.rare[i] as RenderOp).json).then((ev) => void (immediate[at] = ev)));
      }
    }
    this.opErrors.flush(immediate);
    this.answer(f);
    return true;
  }

  /** Answer a frame whose ops are all read: now when nothing is ahead of it or to wait for, else in frame order. */
  private answer(f: FrameRead): void {
    const svc = this.service;
    const { form, immediate, renders, started } = f;
    const { results, pending } = f.route.dispatch();
    const answer = (done: (OpsResult | null)[]) => {
      this.sendFrame(form, immediate, done);
      svc.metrics.frameLatency.observe((performance.now() - started) / 1000);
    };
    if (!pending && renders === null && this.queued === 0) {
      // nothing ahead of this frame and nothing to wait for: answer now
      answer(results as (OpsResult | null)[]);
      return;
    }
    this.inflight++;
    this.updateFlow();
    const all = Promise.all(results);
    const rendered = renders === null ? null : Promise.all(renders);
    this.enqueue(async () => {
      try {
        const done = await all;
        if (rendered !== null) await rendered;
        answer(done);
      } finally {
        // (a failed frame is logged by enqueue; the connection reads on)
        this.inflight--;
        this.updateFlow();
      }
    });
  }

  /** Fail the streams a crashed worker held. */
  onWorkerCrash(slot: number, generation: number): void {
    if (this.ended) return;
    const lost: WireEvent[] = [];
    for (const st of this.streams.all()) {
      if (st.slot !== slot || st.generation >= generation) continue;
      this.forget(st);
      const where =
        slot === this.service.pool.inlineSlot ? "the main thread's parser sessions failed" : "the worker holding this stream stopped";
      const ref = refOf(st);
      lost.push(this.errorEvent(ref, "worker_crashed", `${where}; the stream is lost`));
      lost.push({ ...ref, done: { finish_reason: "error", tokens: 0, messages: 0, recoveries: 0, reasoning_tokens: 0 } });
    }
    if (lost.length === 0) return;
    this.service.metrics.countEvents("done", lost.length / 2);
    this.enqueue(() => this.sendFrame(this.lastForm, lost, [], true));
  }

  /**
   * Graceful drain: refuse new streams, let frames in flight finish, then
   * finish every open stream (an `error` shutting_down, then its `done`).
   */
  async drain(): Promise<void> {
    if (this.ended) return;
    this.draining = true;
    this.setReading();
    // frames read before the drain and waiting for a turn are answered before the streams are closed
    this.readDeferred(null);
    const open = this.streams.all();
    const names = open.map((st) => st.name);
    if (names.length > 0) {
      const form = this.lastForm;
      const notices = open.map((st) => this.errorEvent(refOf(st), "shutting_down", "the server is shutting down; the stream ends here"));
      // close them as aborted, through the same path as a client Close
      this.lastActivity = Date.now();
      this.enqueue(() => this.sendFrame(form, notices, [], true));
      // in frames a client could send: no more ops each than --max-ops-per-frame
      const per = this.service.limits.maxOpsPerFrame;
      for (let i = 0; i < names.length; i += per) {
        const ops = new OpList();
        for (const stream of names.slice(i, i + per)) ops.other({ kind: OP_CLOSE, stream, handle: 0, reason: "abort" });
        this.onRead({ ops, ids: new Uint32Array(0), errors: [] }, form, performance.now(), null);
      }
    }
    await this.tail;
    this.transport.end(CLOSE_CODES.going_away, "server shutting down");
    this.ended = true;
  }

  /** Nothing arrived for too long: end the connection (its streams are freed). */
  idleTimeout(): void {
    if (this.ended) return;
    this.service.logger.info({ conn: this.id }, "closing idle connection");
    this.transport.end(CLOSE_CODES.idle_timeout, "idle timeout");
    this.close();
  }

  /** The client finished sending (gRPC half-close): answer what is in flight, then end. */
  async finish(): Promise<void> {
    await this.tail;
    if (!this.ended) this.transport.end(CLOSE_CODES.normal, "client finished");
    this.close();
  }

  /** The client went away: free its streams. */
  close(): void {
    if (this.group !== null && this.group.members.delete(this)) {
      // its streams and unwritten answers leave the shared budget
      this.group.buffered -= this.buffered;
      this.group.drained();
    }
    if (this.ended && this.streams.size === 0) return;
    this.ended = true;
    for (const st of this.streams.all()) this.forget(st);
    for (const slot of this.slotsUsed)
      this.service.pool.drop(slot, this.id).catch((e: unknown) => {
        this.service.logger.error(
          { conn: this.id, slot, err: e instanceof Error ? e.message : String(e) },
          "dropping a connection's sessions failed",
        );
      });
    this.service.connectionClosed(this);
  }

  // ------------------------------------------------------------------

  /** How the last answer went out: the drain's and a crash's answers go the same way. */
  private lastForm: AnswerForm = "bin";

  /**
   * Run `fn` after everything sent before it, in order. A `fn` that fails (a
   * bug) is logged, and the answers after it still go out: the tail never
   * rejects.
   */
  private enqueue(fn: () => void | Promise<void>): void {
    this.queued++;
    this.tail = this.tail.then(async () => {
      try {
        await fn();
      } catch (e) {
        this.service.logger.error({ conn: this.id, err: e instanceof Error ? e.message : String(e) }, "a frame's answer failed");
      } finally {
        this.queued--;
      }
    });
  }

  /** A decoding error, as an event. */
  private opError(e: OpError): WireEvent {
    return this.errorEvent(opRef(e.stream, e.handle ?? 0), e.code, e.message);
  }

  /** An op with no stream name (an open) or neither name nor handle. */
  private unnamed(kind: number, handle: number): WireEvent {
    return this.opError({
      code: "bad_frame",
      message: kind === OP_OPEN ? "an open without a stream name" : "an op without a stream name or handle",
      stream: "",
      handle: kind === OP_OPEN ? 0 : handle,
    });
  }

  /**
   * Open a stream and route its open, or refuse it (an error in `immediate`).
   * An open always has a name: its errors name the stream by it (its handle may be another stream's).
   */
  private openStream(
    op: OpenOp,
    name: string,
    handle: number,
    closedHere: Map<string | number, number> | null,
    route: FrameRoute,
    immediate: WireEvent[],
  ): void {
    const refused = this.openRefusal(name, handle);
    if (refused !== null) {
      // a frame of 2,000 opens past the budget: counted, and only the listed ones made (bench/hostile (n))
      if (this.listed(refused)) immediate.push(this.openRefused(refused, name, handle));
      return;
    }
    const spec = this.openSpec(op, name, handle);
    if (typeof spec === "string") {
      this.opErrors.add(immediate, this.errorEvent(name, "bad_option", spec));
      return;
    }
    const pool = this.service.pool;
    // keyed the way the streams' events are: by handle when there is one, else by name
    const prior = closedHere?.get(handle !== 0 ? handle : name);
    const slot = prior !== undefined ? pool.assignTo(prior) : pool.assign();
    const st = this.streams.open(name, handle, slot, pool.generation(slot));
    this.slotsUsed.add(slot);
    this.service.metrics.openStreams.inc();
    route.open(st, spec);
  }

  /** Why an open of `name` (and `handle`) is refused before its options are read, or null. */
  private openRefusal(name: string, handle: number): ServiceErrorCode | null {
    if (this.draining) return "shutting_down";
    if (this.streams.has(name) || (handle !== 0 && this.streams.holder(handle))) return "duplicate_stream";
    const l = this.service.limits;
    if (this.streams.size >= l.maxStreamsPerConnection) return "too_many_streams";
    if (name.length > l.maxStreamName) return "bad_option";
    if (this.heldStreamBytes() + STREAM_BYTES + 2 * name.length > l.maxConnectionBytes) return "over_budget";
    if (this.service.overBudget()) return "over_budget";
    return null;
  }

  /** What the streams of this connection (or its HTTP/2 connection's calls) count against maxConnectionBytes. */
  private heldStreamBytes(): number {
    return this.group !== null ? this.group.streamBytes : this.streams.bytes;
  }

  /** The error event of an open refused with `code` by openRefusal (its checks made again, for the message). */
  private openRefused(code: ServiceErrorCode, name: string, handle: number): WireEvent {
    const l = this.service.limits;
    let message: string;
    if (code === "shutting_down") message = "the server is draining; no new streams";
    else if (code === "duplicate_stream") {
      const holder = this.streams.has(name) ? undefined : this.streams.holder(handle);
      message =
        holder === undefined
          ? `stream ${describeValue(name)} is already open`
          : `handle ${handle} is already in use by stream ${describeValue(holder.name)}`;
    } else if (code === "too_many_streams") message = `at most ${l.maxStreamsPerConnection} open streams per connection`;
    else if (code === "bad_option") {
      // named by its first 64 characters: echoing a 4 MB name would make the answer as big as the attack
      return this.makeError(name.slice(0, 64), code, `a stream name is at most ${l.maxStreamName} characters`);
    } else if (this.heldStreamBytes() + STREAM_BYTES + 2 * name.length > l.maxConnectionBytes) {
      const whose = this.group !== null ? "the HTTP/2 connection's calls" : "the connection's streams";
      message = `${whose} are at their budget (${l.maxConnectionBytes} bytes)`;
    } else message = "the server is near its memory budget; no new streams for now";
    return this.makeError(name, code, message);
  }

  /** Close a stream and route its close; the stream closed, or null (with an error event added) when refused. */
  private closeStream(op: CloseOp, name: string, handle: number, route: FrameRoute, immediate: WireEvent[]): StreamState | null {
    const st = this.streams.find(name, handle);
    if (!st) {
      this.lateOp(immediate, name, handle);
      return null;
    }
    const reason = op.reason === "" ? "eos" : op.reason;
    if (!REASONS.has(reason)) {
      const message = `close reason must be eos, length or abort, not ${describeValue(op.reason)}`;
      this.opErrors.add(immediate, this.errorEvent(opRef(name, handle), "bad_option", message));
      return null;
    }
    this.forget(st);
    route.close(st, reason as CloseReason);
    return st;
  }

  /** A render op's answer. */
  private async render(name: string, json: string): Promise<WireEvent> {
    let r: RenderOutcome;
    try {
      r = await this.service.renderJson(json, this.tenant);
    } catch (e) {
      // a bug, not the request's fault: said on the stream, never thrown
      this.service.logger.error({ conn: this.id, err: e instanceof Error ? e.message : String(e) }, "render failed");
      return this.errorEvent(name, "bad_request", "internal: the render failed");
    }
    if (r.ok) return { stream: name, rendered: { request_id: name, ids: r.ids, text: r.text, restored: r.restored } };
    return this.errorEvent(name, "bad_request", `${r.error.code}${r.error.path ? ` at ${r.error.path}` : ""}: ${r.error.message}`);
  }

  private forget(st: StreamState): void {
    this.streams.forget(st);
    this.service.pool.release(st.slot);
    this.service.metrics.openStreams.dec();
  }

  /** The error for tokens or close naming a stream that is not open here (or a handle and a name that disagree). */
  private lateOp(immediate: WireEvent[], name: string, handle: number): void {
    const code = this.streams.lateCode(name, handle);
    if (this.listed(code)) immediate.push(this.makeError(opRef(name, handle), code, this.streams.whyNot(name, handle).message));
  }

  /** Count an op's error of `code`: whether the frame's answer lists it (the first MAX_ERRORS_PER_CODE of its code). */
  private listed(code: ServiceErrorCode): boolean {
    this.service.metrics.countError(code);
    this.service.metrics.countEvents("error", 1);
    return this.opErrors.take(code);
  }

  /** An error event for a stream name, or for how an op or a stream is named (counted). */
  private errorEvent(ref: string | StreamRef, code: ServiceErrorCode, message: string): WireEvent {
    this.service.metrics.countError(code);
    this.service.metrics.countEvents("error", 1);
    return this.makeError(ref, code, message);
  }

  /** {@link errorEvent}, made only: its count was taken (listed). */
  private makeError(ref: string | StreamRef, code: ServiceErrorCode, message: string): WireEvent {
    return { ...(typeof ref === "string" ? { stream: ref } : ref), error: { code, message, at: 0 } } as WireEvent;
  }

  private openSpec(op: OpenOp, name: string, handle: number): OpenWith | string {
    const { role, mode, whole_messages: whole, non_strict: nonStrict } = op;
    const r = role === "" || role === "assistant" ? "assistant" : role === "none" ? null : undefined;
    if (r === undefined) return `role must be assistant or none, not ${describeValue(role)}`;
    const m = mode === "" ? "resilient" : mode;
    if (m !== "resilient" && m !== "strict") return `mode must be resilient or strict, not ${describeValue(mode)}`;
    if (nonStrict && m !== "strict") return "non_strict applies to strict mode only";
    const afterStop = op.after_stop === "" ? "drop" : op.after_stop;
    if (afterStop !== "drop" && afterStop !== "parse") return `after_stop must be drop or parse, not ${describeValue(op.after_stop)}`;
    if (op.tools.length > MAX_TOOLS) return `at most ${MAX_TOOLS} tools per stream, not ${op.tools.length}`;
    const calls = op.calls === "" ? "any" : op.calls;
    if (calls !== "any" && calls !== "none" && calls !== "one") return `calls must be any, none or one, not ${describeValue(op.calls)}`;
    for (const t of op.tools) if (t.length > MAX_TOOL_NAME) return `a tool name is at most ${MAX_TOOL_NAME} characters`;
    const created = Math.floor(Date.now() / 1000);
    const model = op.model || "gpt-oss";
    const hex = `${this.idBase}${(++this.opened).toString(36)}`;
    let format: OutputFormat;
    if (op.format === "" || op.format === "events") format = EVENTS;
    else if (op.format === "openai.chat") {
      const field = op.reasoning_field || "reasoning";
      if (field !== "reasoning" && field !== "reasoning_content") {
        return `reasoning_field must be reasoning or reasoning_content, not ${describeValue(op.reasoning_field)}`;
      }
      format = { kind: "openai.chat", id: `chatcmpl-${hex}`, model, created, reasoningField: field };
    } else if (op.format === "openai.responses") format = { kind: "openai.responses", id: `resp_${hex}`, model, created };
    else return `format must be events, openai.chat or openai.responses, not ${describeValue(op.format)}`;
    return {
      role: r,
      mode: m,
      wholeMessages: whole,
      nonStrict,
      callIdPrefix: `call_${hex}_`,
      rememberReasoning: this.service.cot.enabled,
      memoScope: this.memoScope,
      format,
      afterStop,
      tools: op.tools.length > 0 ? op.tools : null,
      calls,
      name,
      handle,
    };
  }

  private sendFrame(form: AnswerForm, immediate: WireEvent[], results: (OpsResult | null)[], force = false): void {
    if (this.ended && !force) return;
    this.lastForm = form;
    const svc = this.service;
    for (const r of results) if (r) svc.recordCounts(r, this.id);
    if (form === "objects") return this.deliver(immediate, results);
    let frame: Uint8Array | string;
    if (form === "json") {
      const parts = immediate.map((e) => JSON.stringify(e));
      // one by one: a frame can answer with a hundred thousand events, too many to spread into arguments
      for (const r of results) if (r?.json) for (const part of r.json) parts.push(part);
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
    const group = this.group;
    if (group !== null) group.buffered += size;
    this.transport.send(frame, () => {
      this.buffered -= size;
      if (group !== null && group.members.has(this)) {
        group.buffered -= size;
        group.drained();
      } else this.updateFlow();
    });
    this.updateFlow();
  }

  /** An in-process client's answer: the events as they are, in order, none encoded. */
  private deliver(immediate: WireEvent[], results: (OpsResult | null)[]): void {
    const events = immediate;
    for (const r of results) if (r?.objects) for (const ev of r.objects) events.push(ev);
    if (events.length === 0) return;
    // one a frame in flight: what the flow control counts for an answer that is handed over, not buffered
    this.buffered += 1;
    this.transport.deliver!(events, () => {
      this.buffered -= 1;
      this.updateFlow();
    });
    this.updateFlow();
  }

  /** Pause or resume reading by this connection's (and its group's) backlog. */
  reconsiderFlow(): void {
    this.updateFlow();
  }

  private updateFlow(): void {
    const l = this.service.limits;
    const buffered = this.group !== null ? this.group.buffered : this.buffered;
    // a client that leaves its answers unread past the bound is timed (Service drops it past --slow-client-timeout-ms)
    if (buffered >= l.maxBufferedBytes) this.stalledSince ??= performance.now();
    else this.stalledSince = null; // it read some: not stalled
    const congested = this.inflight >= l.maxInflightFrames || buffered >= l.maxBufferedBytes;
    if (congested && !this.paused) {
      this.paused = true;
      this.setReading();
    } else if (!congested && this.paused && this.inflight < l.maxInflightFrames / 2 && buffered < l.maxBufferedBytes / 2) {
      this.paused = false;
      this.setReading();
      if (this.heldBack) {
        // the frames it sent before it stopped reading go on, in a turn of their own
        this.heldBack = false;
        this.service.turn.defer(this.runDeferred);
      }
    }
  }

  /** Whether the transport reads: not while congested (updateFlow), frames wait for a turn, or the connection drains. */
  private reading = true;

  private setReading(): void {
    const want = !this.paused && this.deferred === null && !this.draining;
    if (want === this.reading) return;
    this.reading = want;
    if (want) this.transport.resume();
    else this.transport.pause();
  }
}
