/**
 * The HTTP side every engine shares: a streaming POST read as server-sent
 * events (one JSON object per `data:` line), a plain GET passed through, and
 * the mapping of transport failures and error answers onto
 * {@link UpstreamError}: unreachable or broken → 502, silent → 504, an
 * upstream 4xx stays a 4xx, an error event mid-stream → 502. What a chunk
 * means is each engine's business (./vllm.ts, ./sglang.ts, ./trtllm.ts,
 * ./llamacpp.ts).
 */
import type { Dispatcher } from "undici";
import { streamAgent, undici } from "./undici.js";
import { isObj, jsonTooDeepLong, MAX_JSON_DEPTH, parseJson } from "../core/json.js";
import { UPSTREAM_DEFAULTS } from "../core/defaults.js";
import { STOP, unauthorized, UpstreamError, type EventAnswer } from "./engine.js";
import { Filled, type ChunkTemplate } from "./chunk-template.js";

export interface SseOptions {
  baseUrl: string;
  /** Abort when no event arrives for this long (an SSE comment is no event). */
  idleTimeoutMs: number;
  signal: AbortSignal;
  /**
   * Whether the stream ends with `data: [DONE]` (OpenAI-style endpoints): a
   * stream that ends without it is broken. llama.cpp's native `/completion`
   * sends none; its engine checks for its own last chunk.
   */
  done?: boolean;
  /** The longest event (or rest of a line) held while waiting for its end; default {@link MAX_UPSTREAM_EVENT_BYTES}. */
  maxEventBytes?: number;
  /** Sent as `Authorization: Bearer …` (`--upstream-api-key`). */
  apiKey?: string;
  /** Events that fit it read in place, not as text (./chunk-template.ts: the OpenAI-style completions' chunks). */
  template?: ChunkTemplate;
  /**
   * Where an event the template read goes, as it was read (its ids, and its
   * template's chunk for the rest), instead of the event consumer as a chunk.
   * (A template is never of an error's chunk: what the consumer is not given
   * is only what it would be given again, the template's values.)
   */
  onFilled?: (event: Filled) => EventAnswer;
  /** The request ends after this long whatever arrives (default UPSTREAM_DEFAULTS.deadlineMs). */
  deadlineMs?: number;
}

/**
 * The most of one streamed event held in memory while waiting for its
 * blank line. A step's chunk is a few hundred bytes; a chunk of 300,000 ids
 * is about 2 MB, a whole 131,072-token context in one chunk about 1 MB
 * (with 20 alternatives a token, ~600 bytes each: 7,000 tokens); more than
 * this is an engine gone wrong, answered `upstream_bad_response`.
 */
export const MAX_UPSTREAM_EVENT_BYTES = 4 * 1024 * 1024;

/** The most of a non-streamed answer (`/v1/models`, `/props`, `/version`, a health check) held in memory. */
export const MAX_UPSTREAM_BODY_BYTES = 4 * 1024 * 1024;

/** How long one body is read without giving the event loop a turn. */
const YIELD_EVERY_MS = 5;

/** How much of a piece of the body is split into events before they are given and the turn's budget looked at. */
const PIECE_SLICE_BYTES = 64 * 1024;

/** The most of an error answer read for its message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * A body's pieces as text, refused (`upstream_bad_response`) once they pass
 * `max` bytes: held as they came and decoded once at the end, so a body
 * refused at its bound costs no decoding.
 */
class BoundedPieces {
  private readonly pieces: Uint8Array[] = [];
  private bytes = 0;

  constructor(private readonly max: number) {}

  /** One more piece; throws past the bound. */
  add(piece: Uint8Array): void {
    this.bytes += piece.length;
    if (this.bytes > this.max) throw new UpstreamError(502, "upstream_bad_response", `the upstream's answer is over ${this.max} bytes`);
    this.pieces.push(piece);
  }

  text(): string {
    return Buffer.concat(this.pieces, this.bytes).toString("utf8");
  }
}

/** A body as text, bounded as {@link BoundedPieces}. */
export async function boundedText(body: AsyncIterable<Uint8Array>, max: number): Promise<string> {
  const held = new BoundedPieces(max);
  let turn = performance.now();
  for await (const piece of body) {
    if (performance.now() - turn > YIELD_EVERY_MS) {
      await new Promise((r) => setImmediate(r));
      turn = performance.now();
    }
    held.add(piece);
  }
  return held.text();
}

/** The headers every request to the engine carries. */
export function engineHeaders(apiKey: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return apiKey ? { ...extra, authorization: `Bearer ${apiKey}` } : extra;
}

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const DATA = Buffer.from("data");
const NEWLINE = Buffer.from("\n");

/**
 * Server-sent events out of a byte stream, in time linear in its bytes: each
 * piece is scanned once for line ends, a line split across pieces is joined
 * once when it ends, and an event's `data:` lines once when its blank line
 * comes. Comments (`:` lines) and other fields are skipped. An event (with
 * the line it waits for) longer than `max` bytes is refused.
 */
export class SseEvents {
  private line: Buffer[] = [];
  private lineBytes = 0;
  private data: Buffer[] = [];
  private dataBytes = 0;
  private hasData = false;

  constructor(private readonly max: number) {}

  /**
   * Feed one piece; `event` gets the data of each event it completes, in
   * order. `bytes`, when given, is offered each common event's data where
   * it lies in the piece first (`piece[start, end)`, not decoded): when it
   * takes it (true), `event` does not get it.
   */
  push(piece: Buffer, event: (data: string) => void, bytes?: (piece: Buffer, start: number, end: number) => boolean): void {
    let at = 0;
    for (;;) {
      // the common event, whole in the piece with nothing held from the last one (`data: {…}` and a blank
      // line, LF-ended): its text decoded straight from the piece, no line or data buffers
      while (
        !this.hasData &&
        this.line.length === 0 &&
        piece.length - at > 6 &&
        // `data`, byte by byte (Buffer.compare's call into C++ costs more than the four looks)
        piece[at] === 0x64 &&
        piece[at + 1] === 0x61 &&
        piece[at + 2] === 0x74 &&
        piece[at + 3] === 0x61
      ) {
        if (piece[at + 4] !== COLON) break;
        const lf = piece.indexOf(LF, at);
        if (lf === -1 || piece[lf + 1] !== LF || piece[lf - 1] === CR) break;
        const start = piece[at + 5] === 0x20 ? at + 6 : at + 5;
        if (lf - start > this.max) this.check(lf - start);
        if (bytes === undefined || !bytes(piece, start, lf)) event(piece.toString("utf8", start, lf));
        at = lf + 2;
      }
      // anything else a line at a time, until no event is open again: what follows may be the common event (an
      // event cut by the last piece's end, a comment or a CRLF one is no reason to read the rest of this one so)
      for (;;) {
        const lf = piece.indexOf(LF, at);
        if (lf === -1) {
          if (at < piece.length) {
            this.line.push(piece.subarray(at));
            this.lineBytes += piece.length - at;
            this.check();
          }
          return;
        }
        let line = piece.subarray(at, lf);
        if (this.line.length > 0) {
          this.line.push(line);
          line = Buffer.concat(this.line, this.lineBytes + line.length);
          this.line = [];
          this.lineBytes = 0;
        }
        at = lf + 1;
        this.onLine(line.length > 0 && line[line.length - 1] === CR ? line.subarray(0, line.length - 1) : line, event);
        if (!this.hasData) break;
      }
    }
  }

  private onLine(line: Buffer, event: (data: string) => void): void {
    if (line.length === 0) {
      if (!this.hasData) return;
      const data = this.data.length === 1 ? this.data[0]! : Buffer.concat(this.data, this.dataBytes);
      this.data = [];
      this.dataBytes = 0;
      this.hasData = false;
      event(data.toString("utf8"));
      return;
    }
    if (line[0] === COLON) return; // a comment: not an event, and no sign of life either
    if (line.length < 4 || DATA.compare(line, 0, 4, 0, 4) !== 0 || (line.length > 4 && line[4] !== COLON)) return; // event:, id:, retry:
    let value = line.subarray(5);
    if (value.length > 0 && value[0] === 0x20) value = value.subarray(1);
    if (this.hasData) {
      this.data.push(NEWLINE);
      this.dataBytes += 1;
    }
    this.data.push(value);
    this.dataBytes += value.length;
    this.hasData = true;
    this.check();
  }

  private check(extra = 0): void {
    if (this.lineBytes + this.dataBytes + extra > this.max) {
      throw new UpstreamError(502, "upstream_bad_response", `the upstream sent an event over ${this.max} bytes without its end`);
    }
  }
}

/** `base` + `path`, whether the base was given with a trailing `/v1` or not. */
export function endpoint(base: string, path: string): string {
  return base.replace(/\/+$/, "").replace(/\/v1$/, "") + path;
}

/** The message of an error body, whichever envelope the engine uses. */
export function errorMessage(text: string): string {
  const parsed = parseJson(text);
  if (!parsed.ok || !isObj(parsed.value)) return text.slice(0, 500); // not a JSON object: keep the text
  const j = parsed.value as { error?: { message?: string } | string; message?: string };
  const message = (isObj(j.error) ? j.error.message : j.error) ?? j.message;
  return typeof message === "string" ? message : text.slice(0, 500);
}

/**
 * POST `body` to `path` with `stream: true` semantics; each event's JSON
 * object goes to `onEvent` as soon as its blank line is read, in the socket
 * read's own turn: no async iterator, no promise per event. Two clocks run:
 * no event for `idleTimeoutMs` (bytes alone, comments included, do not
 * count) is a 504 `upstream_timeout`, and the request as a whole past
 * `deadlineMs` is a 504 `upstream_deadline`. Resolves when the stream ended
 * (or `opts.signal` aborted it, or the consumer stopped it); rejects with an
 * {@link UpstreamError}, or with what `onEvent` threw.
 */
export async function streamSse(
  path: string,
  body: Record<string, unknown>,
  opts: SseOptions,
  onEvent: (chunk: Record<string, unknown>) => EventAnswer,
  /** Called whenever the events read so far have all been given (a piece's, before the reader waits or yields): what arrived together can go on together. */
  onDrained?: () => EventAnswer,
): Promise<void> {
  // the caller's abort, the silence and the deadline each abort the call itself (no controller of our own between)
  const call = new EngineCall();
  const stop = () => call.abort();
  opts.signal.addEventListener("abort", stop);
  let timedOut = false;
  let pastDeadline = false;
  /** The consumer holds the stream back (its promise is pending): no silence of the engine's. */
  let holding = false;
  // the engine's silence: an event marks its time (one number stored, no timer moved in the timers' list an event);
  // the timer, when it fires, looks at how long it has really been, and waits out the rest if an event came since
  const idleMs = opts.idleTimeoutMs;
  let lastEvent = performance.now();
  /** The timer fired while the consumer held the stream back: it waits, unarmed, for the next event. */
  let lapsed = false;
  const silence = (): void => {
    if (holding) {
      lapsed = true; // armed again when the consumer takes the next event
      return;
    }
    // (the timers run on the loop's clock, which may lag performance.now() by a turn: at least a millisecond more)
    const quiet = performance.now() - lastEvent;
    if (quiet < idleMs) {
      idle = setTimeout(silence, Math.max(1, idleMs - quiet));
      return;
    }
    timedOut = true;
    call.abort();
  };
  let idle = setTimeout(silence, idleMs);
  const eventCame = (): void => {
    lastEvent = performance.now();
    if (lapsed) {
      lapsed = false;
      idle = setTimeout(silence, idleMs);
    }
  };
  const deadlineMs = opts.deadlineMs ?? UPSTREAM_DEFAULTS.deadlineMs;
  const deadline = setTimeout(() => {
    pastDeadline = true;
    call.abort();
  }, deadlineMs);
  const clocks = (): UpstreamError | null => {
    if (pastDeadline) return new UpstreamError(504, "upstream_deadline", `the upstream's answer went on past ${deadlineMs} ms`);
    if (timedOut) return new UpstreamError(504, "upstream_timeout", `the upstream sent no event for ${opts.idleTimeoutMs} ms`);
    return null;
  };
  const needDone = opts.done !== false;
  let read = false;
  try {
    let status: number;
    try {
      const url = new URL(endpoint(opts.baseUrl, path));
      // undici's dispatch, not its request (whose body is a Readable: a push, a 'readable' and a read() a
      // piece) nor fetch (which refuses the ports on its "bad port" list, 6000 among them)
      streamAgent().dispatch(
        {
          origin: url.origin,
          path: url.pathname + url.search,
          method: "POST",
          headers: engineHeaders(opts.apiKey, { "content-type": "application/json", accept: "text/event-stream" }),
          body: JSON.stringify(body),
        },
        call,
      );
      status = await call.head;
    } catch (e) {
      const late = clocks();
      if (late) throw late;
      if (opts.signal.aborted) return;
      const cause = String((e as Error).cause ?? (e as Error).message);
      if (/other side closed|socket|terminated/i.test(cause) && !/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH/.test(cause)) {
        throw new UpstreamError(502, "upstream_broken_stream", `the upstream closed the connection before answering: ${cause}`);
      }
      throw new UpstreamError(502, "upstream_unreachable", `cannot reach the upstream: ${cause}`);
    }
    eventCame();
    if (status < 200 || status > 299) {
      const text = await heldText(call.body, MAX_ERROR_BODY_BYTES).catch(() => "");
      if (status === 401 || status === 403) throw unauthorized(status, `POST ${path}`);
      // a client mistake the upstream refused stays a 4xx; its own failures are a 502
      const code = status >= 400 && status < 500 ? status : 502;
      throw new UpstreamError(code, "upstream_error", `upstream answered ${status}: ${errorMessage(text)}`, status);
    }
    await readEvents(call.body, opts, needDone, onEvent, onDrained, {
      refresh: eventCame,
      hold: (h) => (holding = h),
      clocks,
    });
    // the body was let go at its end or destroyed (which aborts the request): nothing to abort
    read = true;
  } finally {
    // the request is over: a late consumer's take (resumeAfter after a settle) arms nothing (only the timer lapses)
    lapsed = false;
    clearTimeout(idle);
    clearTimeout(deadline);
    opts.signal.removeEventListener("abort", stop);
    if (!read) call.abort();
  }
}

/**
 * How long a body may go on after its stream's end ([DONE]) before it is
 * destroyed: its own end (the chunked body's last chunk) comes in the same
 * write or the next, and an engine that keeps the answer open holds one
 * connection of the pool this long.
 */
export const AFTER_DONE_MS = 1000;

/** How much of an engine's answer is held unread before undici is told to stop parsing (its request body's high-water mark). */
export const BODY_HIGH_WATER_BYTES = 64 * 1024;

/**
 * Why an engine request the sidecar stopped reading is aborted: one error for
 * every abort (none made, with its stack, a request).
 */
const STOPPED = new Error("the sidecar stopped reading the engine's answer");

/** What a {@link HeldBody} tells its reader. */
export interface BodyListener {
  /** Pieces are held (read() gives them). */
  readable(): void;
  /** The body ended, and every piece of it was read. */
  end(): void;
  /** The body broke (after what was held was offered). */
  error(e: unknown): void;
}

/** What a {@link HeldBody} asks of the request it is the answer of. */
export interface BodyControl {
  /** Hold the rest back (undici stops parsing, TCP holds the engine back). */
  pause(): void;
  resume(): void;
  /** End the request before its end. */
  abort(): void;
}

/**
 * An engine's answer body as its pieces came, held until they are read:
 * `read()` takes all of them as one piece, and what is told to the reader
 * (pieces held, the end, a failure) is told once the call that brought them
 * has returned, in a microtask, so one socket read's pieces are taken
 * together and nothing of the reader's runs inside undici's parser. Past
 * {@link BODY_HIGH_WATER_BYTES} unread, the request is paused until they are.
 */
export class HeldBody {
  private pieces: Buffer[] = [];
  private bytes = 0;
  private to: BodyListener | null = null;
  private paused = false;
  private ended = false;
  private failure: { e: unknown } | null = null;
  /** Nothing more is told: the end or the failure was told, or the body was destroyed. */
  private over = false;
  /** Let go: what comes is dropped until the end. */
  private dropping = false;
  private cut: ReturnType<typeof setTimeout> | null = null;
  private telling = false;

  constructor(private readonly control: BodyControl) {}

  /** A piece of the body. */
  push(piece: Buffer): void {
    if (this.over || this.dropping) return;
    this.pieces.push(piece);
    this.bytes += piece.length;
    if (this.bytes >= BODY_HIGH_WATER_BYTES && !this.paused) {
      this.paused = true;
      this.control.pause();
    }
    this.soon();
  }

  /** The body's end. */
  end(): void {
    if (this.over) return;
    this.ended = true;
    if (this.dropping) return this.close();
    this.soon();
  }

  /** The body broke. */
  fail(e: unknown): void {
    if (this.over) return;
    if (this.dropping) return this.close();
    this.failure = { e };
    this.soon();
  }

  /** The reader: told of what is held and what came, from now on. */
  listen(to: BodyListener): void {
    this.to = to;
    this.soon();
  }

  /** Every piece held, as one; null when none is. */
  read(): Buffer | null {
    if (this.bytes === 0) return null;
    const piece = this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.bytes);
    this.pieces = [];
    this.bytes = 0;
    this.resume();
    // the end (or failure) is told once what came before it was read
    if (this.ended || this.failure) this.soon();
    return piece;
  }

  /** Before the end: the request is aborted, and nothing more is told. */
  destroy(): void {
    if (this.over) return;
    this.close();
    this.control.abort();
  }

  /**
   * Every event was read ([DONE]): what follows is read and dropped until
   * the body ends, which is no abort (the request finished, its connection
   * goes back to the pool); past AFTER_DONE_MS without its end the body is
   * destroyed.
   */
  letGo(): void {
    if (this.over || this.dropping) return;
    if (this.ended) return this.close();
    this.dropping = true;
    this.pieces = [];
    this.bytes = 0;
    this.resume();
    this.cut = setTimeout(() => this.destroy(), AFTER_DONE_MS);
    this.cut.unref();
  }

  /** Bytes pushed and not yet read. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** Whether nothing more will come of it (ended, broken, destroyed). */
  get closed(): boolean {
    return this.over;
  }

  private close(): void {
    this.over = true;
    this.pieces = [];
    this.bytes = 0;
    if (this.cut !== null) clearTimeout(this.cut);
    this.cut = null;
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    // not from inside the reader's read(): undici parses what the socket holds at once, into push()
    queueMicrotask(() => {
      if (!this.over && !this.paused) this.control.resume();
    });
  }

  private soon(): void {
    if (this.telling || this.to === null) return;
    this.telling = true;
    queueMicrotask(this.tell);
  }

  private readonly tell = (): void => {
    this.telling = false;
    const to = this.to;
    if (this.over || to === null) return;
    if (this.bytes > 0) to.readable();
    if (this.over || this.bytes > 0) return;
    if (this.failure) {
      const { e } = this.failure;
      this.close();
      return to.error(e);
    }
    if (this.ended) {
      this.close();
      to.end();
    }
  };
}

/**
 * One streamed request to the engine as undici's dispatch sees it: the
 * status (`head`, its first final one), and the body's pieces into a
 * {@link HeldBody}. A failure before the status rejects `head`; after it,
 * the body fails.
 */
class EngineCall implements Dispatcher.DispatchHandler {
  readonly head: Promise<number>;
  readonly body: HeldBody;
  private controller: Dispatcher.DispatchController | null = null;
  private stopped = false;
  private started = false;
  private settleHead!: { ok: (status: number) => void; no: (e: unknown) => void };

  constructor() {
    this.head = new Promise<number>((ok, no) => (this.settleHead = { ok, no }));
    this.body = new HeldBody({
      pause: () => this.controller?.pause(),
      resume: () => this.controller?.resume(),
      abort: () => this.abort(),
    });
  }

  /** End the request (before its end; nothing once it has ended). */
  abort(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.controller?.abort(STOPPED);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.stopped) controller.abort(STOPPED);
  }

  onResponseStart(_c: Dispatcher.DispatchController, status: number): void {
    // 1xx answers are not the answer
    if (status < 200 || this.started) return;
    this.started = true;
    this.settleHead.ok(status);
  }

  onResponseData(_c: Dispatcher.DispatchController, piece: Buffer): void {
    this.body.push(piece);
  }

  onResponseEnd(): void {
    this.stopped = true;
    this.body.end();
  }

  onResponseError(_c: Dispatcher.DispatchController, e: Error): void {
    this.stopped = true;
    if (!this.started) {
      this.started = true;
      return this.settleHead.no(e);
    }
    this.body.fail(e);
  }
}

/** A held body as text, bounded as {@link BoundedPieces} (past the bound, the request is aborted). */
export function heldText(body: HeldBody, max: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const held = new BoundedPieces(max);
    body.listen({
      readable: () => {
        for (let p = body.read(); p !== null; p = body.read()) {
          try {
            held.add(p);
          } catch (e) {
            body.destroy();
            return reject(e);
          }
        }
      },
      end: () => resolve(held.text()),
      error: reject,
    });
  });
}

/** What {@link readEvents} needs of its request's clocks. */
export interface Clocks {
  /** An event arrived, or the consumer took one: the engine's silence starts again. */
  refresh(): void;
  /** Whether the consumer is holding the stream back. */
  hold(holding: boolean): void;
  /** The clock that ran out (the request was aborted for it), or null. */
  clocks(): UpstreamError | null;
}

/**
 * A streamed body read event by event into `onEvent`, the body left unread
 * while the consumer's promise is pending and, past YIELD_EVERY_MS of work
 * without a turn (a body that arrives faster than it is read), for one turn
 * of the event loop. (Exported for its tests; streamSse is the way in.)
 */
export function readEvents(
  body: HeldBody,
  opts: SseOptions,
  needDone: boolean,
  onEvent: (chunk: Record<string, unknown>) => EventAnswer,
  onDrained: (() => EventAnswer) | undefined,
  c: Clocks,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const reader = new SseEvents(opts.maxEventBytes ?? MAX_UPSTREAM_EVENT_BYTES);
    // events read and not yet given to the consumer (the consumer or a turn held the body back)
    // (reused, never cut: queue[next, queued) are the events waiting; taken ones are cleared as they go)
    // an event is its text, its chunk (parsed as it was split, to learn from), or what the template read from its bytes
    // (./chunk-template.ts)
    const queue: (string | Record<string, unknown> | Filled | undefined)[] = [];
    let queued = 0;
    let next = 0;
    const template = opts.template;
    const onFilled = opts.onFilled;
    const collect = (data: string): void => {
      // an event the template would learn from is parsed and learnt from as it is split, not when run() takes it:
      // a body read behind the engine comes in pieces of many events, split before run() parses the first, so a
      // request's first piece would be read as text to its end (its parse fails: run() parses it again, and refuses it)
      if (template !== undefined && template.wouldLearn(data.length) && data !== "[DONE]") {
        const parsed = parseJson(data);
        if (parsed.ok && isObj(parsed.value)) {
          template.learn(data, parsed.value);
          queue[queued++] = parsed.value as Record<string, unknown>;
          return;
        }
      }
      queue[queued++] = data;
    };
    const inPlace =
      template === undefined
        ? undefined
        : (piece: Buffer, start: number, end: number): boolean => {
            const chunk = template.read(piece, start, end);
            if (chunk === null) return false;
            queue[queued++] = chunk;
            return true;
          };
    let waiting = false;
    let ended = false;
    let settled = false;
    let turn = performance.now();
    // when the last piece's work ended
    let lastEnd = 0;
    /**
     * Settled with what the consumer gave so far: `e` null (the consumer
     * stopped the stream, or it ended) or why it failed. The body is
     * destroyed, which aborts the request, except after the stream's
     * own end (`clean`: [DONE] or the body's end), where it is let go.
     */
    const settle = (e: unknown, own: boolean, clean = false) => {
      if (settled) return;
      settled = true;
      if (clean) body.letGo();
      else body.destroy();
      if (e === null) return resolve();
      // what the consumer threw is its own; the body's failures are mapped
      if (own) return reject(e);
      const late = c.clocks();
      if (late) return reject(late);
      if (e instanceof UpstreamError) return reject(e);
      if (opts.signal.aborted) return resolve();
      reject(new UpstreamError(502, "upstream_broken_stream", `the upstream stream broke: ${(e as Error).message}`));
    };
    const finish = () => {
      // the body's end after [DONE] (it was let go): settled already, and no error (with its stack) made for nothing
      if (settled) return;
      const late = c.clocks();
      if (late) return settle(late, true);
      if (needDone && !opts.signal.aborted) {
        return settle(new UpstreamError(502, "upstream_broken_stream", "the upstream stream ended without [DONE]"), true);
      }
      settle(null, true, true);
    };
    /** Hold the body back until `p` settles: the consumer's promise (`consumer`), or a turn of the event loop. */
    const resumeAfter = (p: Promise<void | typeof STOP>, consumer: boolean) => {
      // (the body is not read meanwhile: its buffer fills, undici stops parsing, and TCP holds the engine back)
      waiting = true;
      p.then(
        (v) => {
          if (v === STOP) return settle(null, true);
          if (consumer) {
            // the engine's silence is timed again from here, not while the consumer held it back
            c.hold(false);
            c.refresh();
            turn = performance.now();
          }
          waiting = false;
          run();
          // what pull() reads next is this same stretch of work: one budget for both (not a fresh one for the piece)
          lastEnd = performance.now();
          pull();
        },
        (e: unknown) => settle(e, true),
      );
    };
    const aTurn = () =>
      resumeAfter(
        new Promise((r) =>
          setImmediate(() => {
            turn = performance.now();
            r();
          }),
        ),
        false,
      );
    /** Whether the consumer was told of the events given so far (and held the body back: the caller returns). */
    let given = 0;
    const drained = (): boolean => {
      if (onDrained === undefined || given === 0) return false;
      given = 0;
      let answer: EventAnswer;
      try {
        answer = onDrained();
      } catch (e) {
        settle(e, true);
        return true;
      }
      if (answer === STOP) {
        settle(null, true);
        return true;
      }
      if (answer !== undefined) {
        resumeAfter(answer, true);
        return true;
      }
      return false;
    };
    // [DONE] was read (what came before it may still be with the consumer)
    let sawDone = false;
    const run = (): void => {
      if (sawDone) return settle(null, true, true);
      // whether an event was given and taken at once: the engine's silence is timed again from when run() stops,
      // once, not after each event (the timer's refresh was 1-2% of the front's main thread flat out, in a profile)
      let took = false;
      for (;;) {
        if (settled) return;
        // a body that arrives faster than it is read, and the consumer's time between events (parsing what it got):
        // a turn of the event loop for the rest every YIELD_EVERY_MS
        if (performance.now() - turn > YIELD_EVERY_MS) {
          if (took) c.refresh();
          if (drained()) return;
          return aTurn();
        }
        if (next >= queued) break;
        const data = queue[next]!;
        queue[next++] = undefined;
        let chunk: Record<string, unknown> | null = null;
        let filled: Filled | null = null;
        if (data instanceof Filled) {
          if (onFilled !== undefined) filled = data;
          else chunk = data.chunk();
        } else if (typeof data !== "string") chunk = data;
        else {
          if (data === "[DONE]") {
            sawDone = true;
            if (took) c.refresh();
            if (drained() || settled) return;
            return settle(null, true, true);
          }
          // an event past 64 Ki characters is all but certainly a long list of ids: the depth check that skips runs
          const parsed = data.length > 65536 ? parseJson(data, MAX_JSON_DEPTH, jsonTooDeepLong) : parseJson(data);
          if (!parsed.ok || !isObj(parsed.value)) {
            return settle(
              new UpstreamError(
                502,
                "upstream_bad_response",
                `the upstream sent an event that is not a JSON object: ${data.slice(0, 200)}`,
              ),
              true,
            );
          }
          chunk = parsed.value as Record<string, unknown>;
        }
        if (chunk !== null && chunk.error) {
          const err = chunk.error as { message?: unknown } | string;
          const message = typeof err === "string" ? err : isObj(err) ? err.message : undefined;
          return settle(
            new UpstreamError(
              502,
              "upstream_error",
              `the upstream reported an error mid-stream: ${typeof message === "string" ? message.slice(0, 500) : "(no message)"}`,
            ),
            true,
          );
        }
        let answer: EventAnswer;
        c.hold(true);
        given++;
        try {
          answer = filled !== null ? onFilled!(filled) : onEvent(chunk!);
        } catch (e) {
          return settle(e, true);
        }
        if (answer === STOP) return settle(null, true);
        if (answer !== undefined) return resumeAfter(answer, true);
        c.hold(false);
        took = true;
      }
      if (took) c.refresh();
      queued = 0;
      next = 0;
      if (ended && rest === null) {
        if (drained() || settled) return;
        return finish();
      }
    };
    /** What is left of a piece when a turn or the consumer stopped its reading (taken first when the reading resumes). */
    let rest: Buffer | null = null;
    const onPiece = (piece: Buffer) => {
      // a piece that comes after a pause of the loop's (not straight after the last one's work) starts a new stretch of work
      const now = performance.now();
      if (now - lastEnd > 1) turn = now;
      // a slice at a time, each slice's events given before the next is split: a piece is all the body held,
      // megabytes when the engine ran ahead of a client that stopped reading (bench/hostile (k)), and split
      // whole it held the loop for 14-20 ms before the first look at the turn's budget
      for (let at = 0; at < piece.length;) {
        const end = Math.min(piece.length, at + PIECE_SLICE_BYTES);
        const had = queued;
        try {
          reader.push(piece.subarray(at, end), collect, inPlace);
        } catch (e) {
          return settle(e, false);
        }
        at = end;
        if (queued > had) c.refresh();
        run();
        if (settled) return;
        if (waiting && at < piece.length) {
          rest = piece.subarray(at);
          break;
        }
      }
      lastEnd = performance.now();
    };
    /**
     * What the body holds, taken whole (one piece), until the consumer or a
     * turn holds the reading back; then the consumer is told the events are
     * all given (HeldBody tells once a socket read's pieces have all come).
     * Held back meanwhile, it is told when the reading resumes and runs out again.
     */
    const pull = (): void => {
      while (!waiting && !settled) {
        const piece = rest ?? body.read();
        rest = null;
        if (piece === null) break;
        onPiece(piece);
      }
      if (given > 0 && !waiting && !settled) drained();
    };
    body.listen({
      readable: pull,
      end: () => {
        ended = true;
        if (!waiting && next >= queued && rest === null) finish();
      },
      error: (e: unknown) => settle(e, false),
    });
  });
}

/** How to GET from the engine: its key, and the most of the answer held. */
export interface GetOptions {
  apiKey?: string;
  /** Default {@link MAX_UPSTREAM_BODY_BYTES}. */
  maxBytes?: number;
  /** Sent as `accept`. */
  accept?: string;
}

/** GET `path`, passed through as it answered (bounded: past `maxBytes`, a 502 `upstream_bad_response`). */
export async function getText(
  baseUrl: string,
  path: string,
  timeoutMs: number,
  opts: GetOptions = {},
): Promise<{ status: number; body: string; contentType: string }> {
  try {
    const res = await undici().request(endpoint(baseUrl, path), {
      signal: AbortSignal.timeout(timeoutMs),
      headers: engineHeaders(opts.apiKey, opts.accept ? { accept: opts.accept } : {}),
    });
    const body = await boundedText(res.body as unknown as AsyncIterable<Uint8Array>, opts.maxBytes ?? MAX_UPSTREAM_BODY_BYTES);
    const ct = res.headers["content-type"];
    return { status: res.statusCode, body, contentType: typeof ct === "string" ? ct : "" };
  } catch (e) {
    if (e instanceof UpstreamError) throw e;
    throw new UpstreamError(502, "upstream_unreachable", `cannot reach the upstream: ${(e as Error).message}`);
  }
}

/** GET `path` as a JSON object, or null (not reachable, not 200, not an object). */
export async function getJsonObject(
  baseUrl: string,
  path: string,
  timeoutMs: number,
  opts: GetOptions = {},
): Promise<Record<string, unknown> | null> {
  try {
    const r = await getText(baseUrl, path, timeoutMs, opts);
    if (r.status !== 200) return null;
    const parsed = parseJson(r.body);
    return parsed.ok && isObj(parsed.value) ? (parsed.value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
