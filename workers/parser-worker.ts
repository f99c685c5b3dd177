/**
 * The piscina worker: holds many parser sessions (per connection, per
 * stream) and turns one batch of ops into one batch of encoded events.
 * The vocabulary table arrives on SharedArrayBuffers via workerData, so a
 * worker starts without rebuilding it.
 */
import { workerData } from "node:worker_threads";
import type { HarmonyEvent } from "../src/core/events.js";
import { HarmonyParser } from "../src/core/parser.js";
import { Vocabulary } from "../src/core/vocab.js";
import { toWire } from "../src/protocol/events.js";
import { deltaJson, FrameWriter } from "../src/protocol/fast-events.js";
import { schema } from "../src/protocol/schema.js";
import { toStruct } from "../src/protocol/struct.js";
import { ChatCompletionChunkAdapter } from "../src/adapters/openai-chat.js";
import { ResponsesStreamAdapter } from "../src/adapters/openai-responses.js";
import { K_CLOSE, K_OPEN, K_TOKENS, type Counts, type OpenSpec, type OpsResult, type ReasoningMemo, type RecoveryNote, type Task, type WorkerData } from "../src/pool/task.js";

const data = workerData as WorkerData;
const vocab = new Vocabulary(data.table);
const wire = schema();
/** A stream: its parser, and (when asked) the reasoning of the current turn. */
interface Session {
  parser: HarmonyParser;
  /** The client's name for the stream. */
  name: string;
  /** Turns events into OpenAI objects, for streams opened with an openai.* format. */
  adapter: { push(ev: HarmonyEvent): object[] } | null;
  /** Reasoning since the last final answer; null when not remembering. */
  cot: string | null;
}

/** Reasoning kept per stream for restoration (the rest of a longer CoT is dropped). */
const MAX_COT_CHARS = 32 * 1024;

const conns = new Map<number, Map<number, Session>>();
const writer = new FrameWriter();
let sessions = 0;

const MAX_NOTES = 64;

function count(
  c: Counts,
  notes: RecoveryNote[] | null,
  memos: ReasoningMemo[],
  session: Session,
  events: HarmonyEvent[],
  json: boolean,
  text: string[],
): void {
  const stream = session.name;
  for (const ev of events) {
    if (session.cot !== null) {
      if (ev.type === "delta" && ev.kind === "reasoning") {
        if (session.cot.length < MAX_COT_CHARS) session.cot += ev.text.slice(0, MAX_COT_CHARS - session.cot.length);
      } else if (ev.type === "message_end" && session.cot !== "") {
        // separate analysis messages of one turn by a blank line
        if (!session.cot.endsWith("\n\n")) session.cot += "\n\n";
      } else if (ev.type === "tool_call_start") {
        const cot = session.cot.trim();
        if (cot !== "") memos.push({ id: ev.id, text: cot });
      } else if (ev.type === "message_start" && ev.channel === "final" && ev.recipient === null) session.cot = "";
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
        else writer.event(wire.Event.encode({ stream, openai: toStruct(obj as Record<string, unknown>) }).finish());
      }
      continue;
    }
    if (ev.type === "delta") {
      // the common case, written without intermediate objects
      if (json) text.push(deltaJson(stream, ev));
      else writer.delta(stream, ev);
      continue;
    }
    const w = toWire(stream, ev);
    if (json) text.push(JSON.stringify(w));
    else writer.event(wire.Event.encode(w).finish());
  }
}

function adapterFor(spec: OpenSpec): Session["adapter"] {
  const f = spec.format;
  if (f.kind === "openai.chat") {
    return new ChatCompletionChunkAdapter({ id: f.id, model: f.model, created: f.created, reasoningField: f.reasoningField });
  }
  if (f.kind === "openai.responses") return new ResponsesStreamAdapter({ id: f.id, model: f.model, created: f.created });
  return null;
}

export default function handle(task: Task): OpsResult | { sessions: number } {
  if (task.t === "crash") {
    // a fault drill: take this thread down the way a real crash would
    process.exit(70);
  }
  if (task.t === "drop") {
    const m = conns.get(task.conn);
    if (m) {
      sessions -= m.size;
      conns.delete(task.conn);
    }
    return { sessions };
  }
  let streams = conns.get(task.conn);
  const memos: ReasoningMemo[] = [];
  if (!streams) {
    streams = new Map();
    conns.set(task.conn, streams);
  }
  const counts: Counts = { tokens: 0, events: {}, recoveries: {}, errors: {} };
  const notes: RecoveryNote[] = [];
  const text: string[] = [];
  const { kinds, sids, offs, ids } = task;
  const extra = new Map(task.extra);
  for (let i = 0; i < kinds.length; i++) {
    const sid = sids[i]!;
    const kind = kinds[i];
    if (kind === K_TOKENS) {
      const session = streams.get(sid);
      if (!session) continue; // the pool only routes tokens to streams it opened here
      const chunk = ids.subarray(offs[2 * i]!, offs[2 * i + 1]!);
      counts.tokens += chunk.length;
      const events = session.parser.write(chunk);
      if (events.length > 0) count(counts, notes, memos, session, events, task.json, text);
    } else if (kind === K_OPEN) {
      const spec = extra.get(i) as OpenSpec & { name: string };
      if (!streams.has(sid)) sessions++;
      streams.set(sid, {
        name: spec.name,
        parser: new HarmonyParser(vocab, {
          mode: spec.mode,
          role: spec.role,
          wholeMessages: spec.wholeMessages,
          nonStrict: spec.nonStrict,
          callIdPrefix: spec.callIdPrefix,
        }),
        cot: spec.rememberReasoning ? "" : null,
        adapter: adapterFor(spec),
      });
      continue;
    } else if (kind === K_CLOSE) {
      const session = streams.get(sid);
      if (!session) continue;
      const reason = extra.get(i) as "eos" | "length" | "abort";
      const events = session.parser.end(reason);
      streams.delete(sid);
      sessions--;
      // a client's abort is not malformed model output: counted, not logged
      if (events.length > 0) count(counts, reason === "abort" ? null : notes, memos, session, events, task.json, text);
    }
  }
  return {
    bin: task.json ? null : writer.take(),
    json: task.json ? text : null,
    counts,
    notes,
    memos,
    sessions,
  };
}
