/**
 * A host of parser sessions (per connection, per stream) that turns one
 * batch of ops into one batch of encoded events. Each worker thread runs
 * one; the main thread may run one too (the pool's inline slot), so the
 * same code answers wherever a stream is pinned.
 */
import type { HarmonyEvent } from "../core/events.js";
import { HarmonyParser, type ParserOptions } from "../core/parser.js";
import type { Vocabulary } from "../core/vocab.js";
import { toWire, type StreamRef, type WireEvent } from "../protocol/events.js";
import { deltaJson, FrameWriter, handleField, jsonRef, streamField } from "../protocol/frame-writer.js";
import type { Schema } from "../protocol/schema.js";
import { toStruct } from "../protocol/struct.js";
import { ChatCompletionChunkAdapter } from "../openai/chat.js";
import { ResponsesStreamAdapter } from "../openai/responses.js";
import { CotBuffer, followReasoning, type MemoSink } from "../store/cot-buffer.js";
import {
  K_CLOSE,
  K_OPEN,
  K_TOKENS,
  type Counts,
  type OpenSpec,
  type OpenWith,
  type OpsResult,
  type OpsTask,
  type ReasoningMemo,
  type RecoveryNote,
} from "./task.js";

/** A stream: its parser, and (when asked) the reasoning of the current turn. */
export interface Session {
  parser: HarmonyParser;
  /** How its events name it: by name, or by handle (streams opened with one). */
  ref: StreamRef;
  /** The client's name for the stream (for logs). */
  name: string;
  /** `ref` as an encoded Event.stream or Event.handle field (one char per byte), written into each of its events. */
  field: string;
  /** `ref` as JSON members, for text-frame clients ("" until first needed). */
  jsonRef: string;
  /** Turns events into OpenAI objects, for streams opened with an openai.* format. */
  adapter: { push(ev: HarmonyEvent): object[] } | null;
  /** The adapter, when it makes Chat chunks (its plain text can go without them: tokensOf). */
  chat: ChatCompletionChunkAdapter | null;
  /** The adapter, when it makes Responses events (its plain text deltas can go without their objects: plainText). */
  responses: ResponsesStreamAdapter | null;
  /** The prefix of its memo keys (its tenant's scope). */
  memoScope: string;
  /** Reasoning since the last final answer; null when not remembering. */
  cot: CotBuffer | null;
}

/** Outside a batch: no connection's streams (never written to). */
const NO_STREAMS: Map<number, Session> = new Map();

/**
 * Sessions of closed streams kept for the next opens. A service at full
 * load opens and closes thousands of streams a second; new parsers, windows
 * and buffers would be young objects still alive at each young-generation
 * GC, which copies them (each pause grows with them), while reused ones
 * are long promoted. Bounded: a spare holds at most its window (1.5 KiB),
 * header and partial-character buffers of at most 1 KiB each, and a
 * reasoning buffer of at most 4 KiB; nothing else of its last stream.
 */
const MAX_SPARE_SESSIONS = 1024;

/** Recovery notes returned per task (for warn-level logs). */
const MAX_NOTES = 64;

/**
 * Event types counted in a slot each while a batch runs, folded into its
 * Counts by finish(): a keyed store per event into a fresh object is a
 * megamorphic lookup, a visible share of the service's thread.
 */
const COUNTED = ["message_start", "message_end", "tool_call_start", "tool_call_end", "recovery", "error", "done"] as const;
const COUNTED_SLOT: ReadonlyMap<string, number> = new Map(COUNTED.map((type, slot) => [type, slot]));

function emptyCounts(): Counts {
  return { tokens: 0, events: {}, recoveries: {}, errors: {} };
}

function adapterFor(spec: OpenSpec): Session["adapter"] {
  const f = spec.format;
  if (f.kind === "openai.chat") {
    return new ChatCompletionChunkAdapter({ id: f.id, model: f.model, created: f.created, reasoningField: f.reasoningField });
  }
  if (f.kind === "openai.responses") return new ResponsesStreamAdapter({ id: f.id, model: f.model, created: f.created });
  return null;
}

export class SessionHost {
  private readonly conns = new Map<number, Map<number, Session>>();
  private readonly writer: FrameWriter;
  private open = 0;
  private readonly spare: Session[] = [];
  /** The parsers' options (their header readings are the thread's memo, threadHeaderMemo: a model repeats a few headers). */
  private readonly options: ParserOptions = {};

  /**
   * @param remember where tool calls' reasoning goes as it is found (the
   * main thread's host: straight into the service's store, no copy of its
   * own); without it, memos come back in each batch's result (a worker's).
   */
  constructor(
    private readonly vocab: Vocabulary,
    private readonly wire: Schema,
    private readonly remember: MemoSink | null = null,
    /** Results are used on this thread (the main thread's host): encoded events come as slab views (see FrameWriter). */
    local = false,
  ) {
    this.writer = new FrameWriter(local);
  }

  /** Streams held, over all connections. */
  get sessions(): number {
    return this.open;
  }

  /**
   * Forget a connection's streams (it went away). Their sessions are kept
   * as spares, as a close's are: a client that opens a thousand streams,
   * leaves and comes back (bench/hostile (n)) otherwise left a thousand
   * sessions a round to the old generation.
   */
  drop(conn: number): number {
    const m = this.conns.get(conn);
    if (m) {
      this.open -= m.size;
      this.conns.delete(conn);
      for (const session of m.values()) {
        if (this.spare.length >= MAX_SPARE_SESSIONS) break;
        this.keepSpare(session);
      }
    }
    return this.open;
  }

  /** A session whose stream has ended, kept for a later open: what the stream held let go until then. */
  private keepSpare(session: Session): void {
    session.parser.restart();
    session.adapter = null;
    session.cot?.clear();
    this.spare.push(session);
  }

  // the batch being answered: begin(), then ops in order, then finish()
  private streams: Map<number, Session> = NO_STREAMS;
  private json = false;
  private counts: Counts = emptyCounts();
  /** Tokens and text-step deltas of the batch, folded into `counts` by finish() (a field is cheaper to bump per op). */
  private stepTokens = 0;
  private stepDeltas = 0;
  private readonly eventCounts = new Float64Array(COUNTED.length);
  private notes: RecoveryNote[] = [];
  private memos: ReasoningMemo[] = [];
  private text: string[] = [];
  /** The batch's events as objects (an in-process client), else null. */
  private objects: WireEvent[] | null = null;

  /** Start answering a batch of one connection's ops (`objects`: as event objects, for an in-process client). */
  begin(conn: number, json: boolean, objects = false): void {
    let streams = this.conns.get(conn);
    if (!streams) {
      streams = new Map();
      this.conns.set(conn, streams);
    }
    this.streams = streams;
    this.json = json || objects;
    this.objects = objects ? [] : null;
    this.writer.clear();
    this.counts = emptyCounts();
    this.stepTokens = 0;
    this.stepDeltas = 0;
    this.eventCounts.fill(0);
    this.notes = [];
    this.memos = [];
    this.text = [];
  }

  /**
   * Open a stream. The session returned may be passed to `tokensOf` in this
   * connection's later batches while the stream is open (the main thread
   * keeps it on the stream's state), and never after its close: the
   * session is then reused for a later stream.
   */
  openStream(sid: number, spec: OpenWith): Session {
    if (!this.streams.has(sid)) this.open++;
    const ref: StreamRef = spec.handle > 0 ? { handle: spec.handle } : { stream: spec.name };
    // one options object for every open: a parser reads it and keeps none of it
    const options = this.options;
    options.mode = spec.mode;
    options.role = spec.role;
    options.wholeMessages = spec.wholeMessages;
    options.nonStrict = spec.nonStrict;
    options.callIdPrefix = spec.callIdPrefix;
    options.afterStop = spec.afterStop;
    options.tools = spec.tools;
    options.calls = spec.calls ?? "any";
    // a spare session (its reasoning buffer was cleared when it was put
    // aside), or a new one; either way the stream's own fields are set below
    let session = this.spare.pop();
    if (session === undefined) {
      session = {
        parser: new HarmonyParser(this.vocab, options),
        ref,
        name: "",
        field: "",
        jsonRef: "",
        memoScope: "",
        cot: null,
        adapter: null,
        chat: null,
        responses: null,
      };
    } else session.parser.restart(options);
    session.ref = ref;
    session.name = spec.name;
    session.field = "handle" in ref ? handleField(ref.handle) : streamField(spec.name);
    session.jsonRef = ""; // made on first use (text-frame clients only)
    session.cot = spec.rememberReasoning ? (session.cot ?? new CotBuffer()) : null;
    session.memoScope = spec.memoScope ?? "";
    session.adapter = adapterFor(spec);
    session.chat = session.adapter instanceof ChatCompletionChunkAdapter ? session.adapter : null;
    session.responses = session.adapter instanceof ResponsesStreamAdapter ? session.adapter : null;
    this.streams.set(sid, session);
    return session;
  }

  /** Feed ids[start, end) to a stream (the pool only routes tokens to streams it opened here). */
  tokens(sid: number, ids: Uint32Array, start: number, end: number): void {
    const session = this.streams.get(sid);
    if (session) this.tokensOf(session, ids, start, end);
  }

  /** The same, for a session `openStream` returned (no lookup). */
  tokensOf(session: Session, ids: Uint32Array, start: number, end: number): void {
    this.stepTokens += end - start;
    const parser = session.parser;
    // most steps are text inside a message: its delta is written from the
    // vocabulary's bytes, with no event objects and no strings
    if (!this.json && session.adapter === null && parser.takeText(ids, start, end)) {
      const v = this.vocab;
      const kind = parser.textKind;
      this.writer.deltaTokens(session.field, parser.messageIndex, kind, v.bytes, v.offsets, ids, start, end);
      this.stepDeltas++;
      if (session.cot !== null && kind === "reasoning") this.keepReasoning(session.cot, ids, start, end);
      return;
    }
    // the same step of a Chat or Responses stream, for an in-process client (the OpenAI front's door): when its
    // chunk would be that text and nothing else (its event a text delta), the text alone goes (the event's JSON:
    // no event, no chunk object; the front writes its line)
    const objects = this.objects;
    if (objects !== null && "stream" in session.ref) {
      const text = this.plainText(session, ids, start, end);
      if (text !== null) {
        objects.push({ stream: session.ref.stream, chat_delta: { field: this.plainField, text } });
        this.stepDeltas++;
        return;
      }
    }
    const events = parser.write(ids, start, end);
    if (events.length > 0) this.count(session, events, this.notes);
  }

  /** The delta field (Chat) or event type (Responses) of what {@link plainText} last returned. */
  plainField = "";

  /**
   * A Chat stream's step whose chunk would be its text alone in one delta
   * field, or a Responses stream's whose events would be one text delta
   * (most steps): taken, and returned: the Chat text (its field in
   * {@link plainField}), or the Responses event's JSON (its type there);
   * else null, and nothing was taken. Counted by the caller: inside a
   * batch by tokensOf, outside one (the front's door, one step at a time:
   * src/service/connection.ts `textNow`) by the connection.
   */
  plainText(session: Session, ids: Uint32Array, start: number, end: number): string | null {
    const chat = session.chat;
    const responses = session.responses;
    if (chat === null && responses === null) return null;
    const parser = session.parser;
    const kind = parser.textKind;
    const field = chat !== null ? chat.plainField(parser.messageIndex, kind) : responses!.plainType(parser.messageIndex, kind);
    if (field === null || !parser.takeText(ids, start, end)) return null;
    const v = this.vocab;
    let text = "";
    for (let i = start; i < end; i++) text += v.text(ids[i]!);
    if (session.cot !== null && kind === "reasoning") this.keepReasoning(session.cot, ids, start, end);
    this.plainField = field;
    return chat !== null ? text : responses!.plainDelta(text);
  }

  /** A text step's reasoning into the stream's reasoning buffer, from the vocabulary's bytes. */
  private keepReasoning(cot: CotBuffer, ids: Uint32Array, start: number, end: number): void {
    const { bytes, offsets } = this.vocab;
    for (let i = start; i < end; i++) cot.appendBytes(bytes, offsets[ids[i]!]!, offsets[ids[i]! + 1]!);
  }

  closeStream(sid: number, reason: "eos" | "length" | "abort"): void {
    const session = this.streams.get(sid);
    if (!session) return;
    const events = session.parser.end(reason);
    this.streams.delete(sid);
    this.open--;
    // a client's abort is not malformed model output: counted, not logged
    if (events.length > 0) this.count(session, events, reason === "abort" ? null : this.notes);
    if (this.spare.length < MAX_SPARE_SESSIONS) this.keepSpare(session);
  }

  /** The batch's events, encoded, with what it counted. */
  finish(): OpsResult {
    const json = this.json;
    const c = this.counts;
    c.tokens += this.stepTokens;
    if (this.stepDeltas > 0) c.events.delta = (c.events.delta ?? 0) + this.stepDeltas;
    const n = this.eventCounts;
    for (let i = 0; i < COUNTED.length; i++) if (n[i]! > 0) c.events[COUNTED[i]!] = (c.events[COUNTED[i]!] ?? 0) + n[i]!;
    const objects = this.objects;
    const r: OpsResult = {
      bin: json ? null : this.writer.take(),
      json: json && objects === null ? this.text : null,
      objects,
      counts: this.counts,
      notes: this.notes,
      memos: this.memos,
      sessions: this.open,
    };
    // not kept past the batch: a dropped connection's sessions must be collectable
    this.streams = NO_STREAMS;
    this.objects = null;
    return r;
  }

  /** Apply one task's ops in order; the events come back encoded, in the same order. */
  run(task: OpsTask): OpsResult {
    this.begin(task.conn, task.json, task.objects === true);
    const { kinds, sids, offs, ids } = task;
    let x = 0; // next entry of task.extra (open and close ops, in op order)
    for (let i = 0; i < kinds.length; i++) {
      const kind = kinds[i];
      if (kind === K_TOKENS) this.tokens(sids[i]!, ids, offs[2 * i]!, offs[2 * i + 1]!);
      else if (kind === K_OPEN) this.openStream(sids[i]!, task.extra[x++]![1] as OpenWith);
      else if (kind === K_CLOSE) this.closeStream(sids[i]!, task.extra[x++]![1] as "eos" | "length" | "abort");
    }
    return this.finish();
  }

  /**
   * Encode a stream's events into the batch's answer (the reasoning memo
   * policy, src/store/cot-buffer.ts's followReasoning, sees each first) and
   * count them.
   */
  private count(session: Session, events: HarmonyEvent[], notes: RecoveryNote[] | null): void {
    const c = this.counts;
    const memos = this.memos;
    const json = this.json;
    const text = this.text;
    const objects = this.objects;
    const stream = session.name;
    const ref = session.ref;
    const writer = this.writer;
    const cot = session.cot;
    let deltas = 0;
    for (const ev of events) {
      if (cot !== null) followReasoning(cot, ev, this.remember, memos, session.memoScope);
      // `type` is read once: events come in many shapes, and each read is a megamorphic lookup
      const type = ev.type;
      if (type === "delta") {
        if (session.adapter === null) {
          // the common case, written without intermediate objects
          deltas++;
          if (objects !== null) objects.push(toWire(ref, ev));
          else if (json) text.push(deltaJson(session.jsonRef || (session.jsonRef = jsonRef(ref)), ev));
          else writer.deltaOf(session.field, ev);
          continue;
        }
      }
      const slot = COUNTED_SLOT.get(type);
      if (slot !== undefined) this.eventCounts[slot]! += 1;
      else c.events[type] = (c.events[type] ?? 0) + 1;
      if (type === "recovery") {
        c.recoveries[ev.kind] = (c.recoveries[ev.kind] ?? 0) + (ev.count ?? 1);
        if (notes && notes.length < MAX_NOTES) {
          notes.push({ stream, ...("handle" in ref ? { handle: ref.handle } : {}), kind: ev.kind, at: ev.at, detail: ev.detail });
        }
      } else if (type === "error") c.errors[ev.code] = (c.errors[ev.code] ?? 0) + 1;
      if (session.adapter) {
        for (const obj of session.adapter.push(ev)) {
          if (objects !== null) objects.push("stream" in ref ? { stream: ref.stream, openai: obj } : { handle: ref.handle, openai: obj });
          else if (json) text.push(JSON.stringify({ ...ref, openai: obj }));
          else writer.event(this.wire.Event.encode({ ...ref, openai: toStruct(obj as Record<string, unknown>) }).finish());
        }
        continue;
      }
      if (objects !== null) objects.push(toWire(ref, ev));
      else if (json) text.push(JSON.stringify(toWire(ref, ev)));
      else if (!writer.common(session.field, ev)) writer.event(this.wire.Event.encode(toWire(ref, ev)).finish());
    }
    if (deltas > 0) c.events.delta = (c.events.delta ?? 0) + deltas;
  }
}
