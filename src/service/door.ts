/**
 * The door between the OpenAI front's generations and the parser sessions:
 * an in-process client connection that takes typed ops (open a stream, its
 * token ids, close it) and hands each stream's events back as objects. It
 * goes through the same connection as remote clients (src/service/connection.ts:
 * same checks, ordering, limits, flow control and crash handling), without
 * the frame a remote client writes: nothing is encoded as text or decoded.
 */
import { OP_CLOSE, OP_OPEN, OP_TOKENS, OpList } from "../protocol/ops.js";
import type { WireEvent } from "../protocol/events.js";
import type { CloseReason } from "../pool/route.js";
import type { Connection, Transport } from "./connection.js";
import type { Service } from "./service.js";

/**
 * One stream's event, as the sessions made it: `openai` (an OpenAI object),
 * `error` or `done`; or, for a Chat or Responses stream, `chat_delta`
 * (`{field, text}`): a text step whose chunk would be that text alone in
 * that delta field (Chat), or whose one event is a text delta (Responses:
 * `field` its type, `text` its JSON), sent without the object
 * (src/pool/host.ts `plainText`; the answer writes its line).
 */
export type DoorEvent = WireEvent;

export type DoorListener = (event: DoorEvent) => void;

/** A Chat or Responses stream's text step, taken alone (src/service/connection.ts `textNow`): as `chat_delta`'s field and text. */
export type DoorTextListener = (field: string, text: string) => void;

/** How a stream of the front's is opened: its OpenAI format and what the parser lets through. */
export interface DoorOpen {
  format: "openai.chat" | "openai.responses";
  model: string;
  /** openai.chat: where reasoning goes in a delta. */
  reasoningField?: "reasoning" | "reasoning_content";
  /** The declared function names. */
  tools: readonly string[];
  calls: "any" | "none" | "one";
}

export class SessionDoor {
  private readonly conn: Connection;
  private readonly listeners = new Map<string, DoorListener>();
  private readonly textListeners = new Map<string, DoorTextListener>();
  /** The text listener flush() last took, and its stream's name: a lone stream's steps, with no Map looked in a token. */
  private lastTextName = "";
  private lastText: DoorTextListener | undefined = undefined;
  private n = 0;
  private stray: DoorListener | null = null;
  private flowing: Promise<void> | null = null;
  private resumed: (() => void) | null = null;
  // the ops given since the last flush, and their ids
  private readonly ops = new OpList();
  private ids = new Uint32Array(256);
  private nIds = 0;
  /**
   * The stream whose ids are all that was given since the last flush (ids[0, nIds)), kept here and not
   * in `ops` (most flushes are one stream's text step); null when `ops` holds what was given. Paced, each
   * of `ops`'s typed arrays a token touches is a cold read of memory (bench/RESULTS.md).
   */
  private run: string | null = null;

  constructor(service: Service, tenant: string) {
    const transport: Transport = {
      kind: "http",
      send: () => {
        throw new Error("bug: the door's connection answers with objects only");
      },
      deliver: (events, done) => {
        for (const ev of events) {
          const listener = this.listeners.get(ev.stream as string);
          if (listener) listener(ev);
          else this.stray?.(ev); // an op's own error (its stream named "") or a stream no longer listened to
        }
        done();
      },
      // the connection's own flow control (frames in flight): the sender waits on whenFlowing()
      pause: () => {
        this.flowing ??= new Promise<void>((resolve) => (this.resumed = resolve));
      },
      resume: () => {
        const r = this.resumed;
        this.flowing = null;
        this.resumed = null;
        r?.();
      },
      end: () => undefined,
    };
    this.conn = service.newConnection(transport, tenant);
  }

  /** While the connection has too many batches in flight: a promise to await before flushing more; else null. */
  whenFlowing(): Promise<void> | null {
    return this.flowing;
  }

  /** A fresh stream name on this connection. */
  name(prefix: string): string {
    return `${prefix}-${++this.n}`;
  }

  listen(stream: string, listener: DoorListener): void {
    this.listeners.set(stream, listener);
  }

  /**
   * A Chat or Responses stream's text steps, when the ids of a flush are
   * that stream's alone and the connection takes them as one (most steps):
   * their text (Chat) or event's JSON (Responses) goes here, with no event
   * object. Its other steps'
   * events (a text step among others' included, as `chat_delta`) go to
   * `listen`'s listener, in order with these.
   */
  listenText(stream: string, listener: DoorTextListener): void {
    this.textListeners.set(stream, listener);
    if (stream === this.lastTextName) this.lastText = undefined;
  }

  /** Events no listener takes: an op's own errors, which would otherwise go nowhere. */
  onStray(listener: DoorListener): void {
    this.stray = listener;
  }

  /** Open `stream` (at the next flush). */
  open(stream: string, o: DoorOpen): void {
    this.spill();
    this.ops.other({
      kind: OP_OPEN,
      stream,
      handle: 0,
      role: "",
      mode: "",
      whole_messages: false,
      non_strict: false,
      format: o.format,
      reasoning_field: o.reasoningField ?? "",
      model: o.model,
      after_stop: "",
      tools: [...o.tools],
      calls: o.calls,
    });
  }

  /** Token ids given since the last flush. */
  get pending(): number {
    return this.nIds;
  }

  /** Token ids for `stream` (at the next flush). */
  tokens(stream: string, ids: readonly number[]): void {
    const start = this.nIds;
    const end = start + ids.length;
    if (end > this.ids.length) {
      const grown = new Uint32Array(Math.max(end, 2 * this.ids.length));
      grown.set(this.ids.subarray(0, start));
      this.ids = grown;
    }
    const buf = this.ids;
    for (let i = 0; i < ids.length; i++) buf[start + i] = ids[i]!;
    // nothing else given since the last flush, or only this stream's ids: one run, held as `run`
    if (this.ops.n === 0 && (this.run === null ? start === 0 : this.run === stream)) {
      this.run = stream;
      this.nIds = end;
      return;
    }
    // (the run is ids[0, start): spilled before this call's ids count)
    this.spill();
    this.nIds = end;
    // the same stream's ids straight after its last op's (several engine chunks read at once): one run, so one write of the parser's and one delta
    const ops = this.ops;
    const last = ops.n - 1;
    if (last >= 0 && ops.kinds[last] === OP_TOKENS && ops.ends[last] === start && ops.names[last] === stream && ops.handles[last] === 0) {
      ops.ends[last] = end;
      return;
    }
    ops.tokens(stream, 0, start, end);
  }

  /** Close `stream` (at the next flush). */
  close(stream: string, reason: CloseReason): void {
    this.spill();
    this.ops.other({ kind: OP_CLOSE, stream, handle: 0, reason });
  }

  /** Hand the ops given since the last flush to the sessions, as one batch; their events may be delivered before it returns. */
  flush(): void {
    const run = this.run;
    if (run !== null) {
      // one stream's ids alone, a text step: taken and written with no batch (the connection's textNow)
      this.run = null;
      let text = this.lastText;
      if (text === undefined || run !== this.lastTextName) {
        text = this.textListeners.get(run);
        this.lastText = text;
        this.lastTextName = run;
      }
      if (text !== undefined && this.conn.textNow(run, this.ids, 0, this.nIds)) {
        this.nIds = 0;
        const taken = this.conn.textTaken;
        if (taken !== null) text(this.conn.textField, taken);
        return;
      }
      // not a text step taken alone: the batch's way
      this.ops.tokens(run, 0, 0, this.nIds);
    }
    if (this.ops.n === 0) return;
    const n = this.nIds;
    this.nIds = 0;
    try {
      // an engine chunk's ids for streams on the main thread, nothing ahead of them: fed at once (the ops' ranges index this.ids)
      if (!this.conn.tokensNow(this.ops, this.ids)) this.conn.onOps({ ops: this.ops, ids: this.ids.subarray(0, n), errors: [] });
    } finally {
      this.ops.clear();
    }
  }

  /** The run of one stream's ids (`run`, ids[0, nIds)) into `ops`, ahead of an op given after it. */
  private spill(): void {
    if (this.run === null) return;
    this.ops.tokens(this.run, 0, 0, this.nIds);
    this.run = null;
  }

  /** Leave: the connection's streams are freed, and nothing waits on it any more. */
  leave(): void {
    this.listeners.clear();
    this.textListeners.clear();
    this.lastText = undefined;
    this.conn.close();
    this.resumed?.();
    this.flowing = null;
    this.resumed = null;
  }
}
