/**
 * A host of parser sessions (per connection, per stream) that turns one
 * batch of ops into one batch of encoded events. Each worker thread runs
 * one; the main thread may run one too (the pool's inline slot), so the
 * same code answers wherever a stream is pinned.
 */
import type { HarmonyEvent } from "../core/events.js";
import { HarmonyParser } from "../core/parser.js";
import type { Vocabulary } from "../core/vocab.js";
import { toWire } from "../protocol/events.js";
import { deltaJson, FrameWriter, streamField } from "../protocol/fast-events.js";
import type { Schema } from "../protocol/schema.js";
import { toStruct } from "../protocol/struct.js";
import { ChatCompletionChunkAdapter } from "../adapters/openai-chat.js";
import { ResponsesStreamAdapter } from "../adapters/openai-responses.js";
import { CotBuffer } from "./cot-buffer.js";
import { K_CLOSE, K_OPEN, K_TOKENS, type Counts, type OpenSpec, type OpsResult, type OpsTask, type ReasoningMemo, type RecoveryNote } from "./task.js";

/** A stream: its parser, and (when asked) the reasoning of the current turn. */
interface Session {
  parser: HarmonyParser;
  /** The client's name for the stream. */
  name: string;
  /** The name as an encoded Event.stream field, written into each of its events. */
  field: Uint8Array;
  /** Turns events into OpenAI objects, for streams opened with an openai.* format. */
  adapter: { push(ev: HarmonyEvent): object[] } | null;
  /** Reasoning since the last final answer; null when not remembering. */
  cot: CotBuffer | null;
}

/** Recovery notes returned per task (for warn-level logs). */
const MAX_NOTES = 64;

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
  private readonly writer = new FrameWriter();
  private open = 0;

  constructor(
    private readonly vocab: Vocabulary,
    private readonly wire: Schema,
  ) {}

  /** Streams held, over all connections. */
  get sessions(): number {
    return this.open;
  }

  /** Forget a connection's streams (it went away). */
  drop(conn: number): number {
    const m = this.conns.get(conn);
    if (m) {
      this.open -= m.size;
      this.conns.delete(conn);
    }
    return this.open;
  }

  /** Apply one task's ops in order; the events come back encoded, in the same order. */
  run(task: OpsTask): OpsResult {
    let streams = this.conns.get(task.conn);
    if (!streams) {
      streams = new Map();
      this.conns.set(task.conn, streams);
    }
    const counts: Counts = { tokens: 0, events: {}, recoveries: {}, errors: {} };
    const notes: RecoveryNote[] = [];
    const memos: ReasoningMemo[] = [];
    const text: string[] = [];
    const { kinds, sids, offs, ids } = task;
    let x = 0; // next entry of task.extra (open and close ops, in op order)
    for (let i = 0; i < kinds.length; i++) {
      const sid = sids[i]!;
      const kind = kinds[i];
      if (kind === K_TOKENS) {
        const session = streams.get(sid);
        if (!session) continue; // the pool only routes tokens to streams it opened here
        const s = offs[2 * i]!;
        const e = offs[2 * i + 1]!;
        counts.tokens += e - s;
        const events = session.parser.write(ids, s, e);
        if (events.length > 0) this.count(counts, notes, memos, session, events, task.json, text);
        continue;
      }
      const extra = task.extra[x++]!;
      if (kind === K_OPEN) {
        const spec = extra[1] as OpenSpec & { name: string };
        if (!streams.has(sid)) this.open++;
        streams.set(sid, {
          name: spec.name,
          field: streamField(spec.name),
          parser: new HarmonyParser(this.vocab, {
            mode: spec.mode,
            role: spec.role,
            wholeMessages: spec.wholeMessages,
            nonStrict: spec.nonStrict,
            callIdPrefix: spec.callIdPrefix,
          }),
          cot: spec.rememberReasoning ? new CotBuffer() : null,
          adapter: adapterFor(spec),
        });
      } else if (kind === K_CLOSE) {
        const session = streams.get(sid);
        if (!session) continue;
        const reason = extra[1] as "eos" | "length" | "abort";
        const events = session.parser.end(reason);
        streams.delete(sid);
        this.open--;
        // a client's abort is not malformed model output: counted, not logged
        if (events.length > 0) this.count(counts, reason === "abort" ? null : notes, memos, session, events, task.json, text);
      }
    }
    return {
      bin: task.json ? null : this.writer.take(),
      json: task.json ? text : null,
      counts,
      notes,
      memos,
      sessions: this.open,
    };
  }

  private count(
    c: Counts,
    notes: RecoveryNote[] | null,
    memos: ReasoningMemo[],
    session: Session,
    events: HarmonyEvent[],
    json: boolean,
    text: string[],
  ): void {
    const stream = session.name;
    const writer = this.writer;
    const cot = session.cot;
    let deltas = 0;
    for (const ev of events) {
      if (ev.type === "delta" && session.adapter === null) {
        // the common case, written without intermediate objects
        deltas++;
        if (cot !== null && ev.kind === "reasoning") cot.append(ev.text);
        if (json) text.push(deltaJson(stream, ev));
        else writer.deltaOf(session.field, ev);
        continue;
      }
      if (cot !== null) {
        if (ev.type === "delta") {
          if (ev.kind === "reasoning") cot.append(ev.text);
        } else if (ev.type === "message_end") {
          // separate analysis messages of one turn by a blank line
          cot.separate();
        } else if (ev.type === "tool_call_start") {
          const reasoning = cot.text().trim();
          if (reasoning !== "") memos.push({ id: ev.id, text: reasoning });
        } else if (ev.type === "message_start" && ev.channel === "final" && ev.recipient === null) cot.clear();
      }
      c.events[ev.type] = (c.events[ev.type] ?? 0) + 1;
      if (ev.type === "recovery") {
        c.recoveries[ev.kind] = (c.recoveries[ev.kind] ?? 0) + 1;
        if (notes && notes.length < MAX_NOTES) notes.push({ stream, kind: ev.kind, at: ev.at, detail: ev.detail });
      }
      if (ev.type === "error") c.errors[ev.code] = (c.errors[ev.code] ?? 0) + 1;
      if (session.adapter) {
        for (const obj of session.adapter.push(ev)) {
          if (json) text.push(JSON.stringify({ stream, openai: obj }));
          else writer.event(this.wire.Event.encode({ stream, openai: toStruct(obj as Record<string, unknown>) }).finish());
        }
        continue;
      }
      const w = toWire(stream, ev);
      if (json) text.push(JSON.stringify(w));
      else writer.event(this.wire.Event.encode(w).finish());
    }
    if (deltas > 0) c.events.delta = (c.events.delta ?? 0) + deltas;
  }
}
