/**
 * One upstream generation parsed into OpenAI objects: the engine's token ids
 * for each choice go, as a stream of their own, through the same parser
 * sessions (on the worker pool) as remote clients' streams, through the
 * sessions' door (./door.ts: typed ops in, event objects out); each
 * choice's OpenAI chunks or events go to the answer being written (its sink).
 */
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { HARMONY } from "../core/preset.js";
import {
  UpstreamError,
  type CompletionRequest,
  type Engine,
  type TokenLogprob,
  type UpstreamChoice,
  type UpstreamChunk,
  type UpstreamUsage,
} from "../upstream/engine.js";
import { SessionDoor, type DoorOpen } from "./door.js";
import type { Service } from "./service.js";

/** One upstream generation parsed into n streams of OpenAI objects. */
export interface Generation {
  /** Ends when every choice's stream has finished. */
  done: Promise<{ usage: UpstreamUsage | null; error: UpstreamError | null }>;
  abort(): void;
  /**
   * End one choice here, cleanly (the answer reached a stop string): the
   * engine's later ids for it are not parsed, and once every choice has
   * ended the request to the engine is aborted.
   */
  endChoice(choice: number): void;
}

/** The parser sessions' own refusals that are the server's state, not a bug: a 503. */
const BUSY_CODES: ReadonlySet<string> = new Set(["over_budget", "shutting_down", "too_many_streams"]);

/**
 * A tool call the request requires (`tool_choice` "required" or a named
 * function), made in two steps on one choice: the completion starts with
 * `prefix` (an analysis message's header) and stops at that message's
 * `<|end|>`; then `header` (a call's header) is put after the reasoning and
 * the engine goes on from there, so the model must call.
 */
export interface ForcedCall {
  prefix: readonly number[];
  header: readonly number[];
}

/** Where a generation's output goes: the answer being written (src/transport/front/). */
export interface GenerationSink {
  /** A choice's OpenAI chunk or event (or `{harmony_error}`: a session's error event), with the usage so far. */
  event(choice: number, obj: Obj, usage: UpstreamUsage | null): void;
  /**
   * A Chat choice's text where its chunk would be that text alone (the
   * sessions send it so: src/pool/host.ts), in `field` of its delta; for a
   * Responses stream, a text delta event's JSON, `field` its type.
   * Chat and Responses streams send it; a sink of another format may leave it out.
   */
  text?(choice: number, field: string, text: string, usage: UpstreamUsage | null): void;
  /**
   * Every id of each choice as it goes to the parser, with its log
   * probability when the engine gave one (null for ids the sidecar put in).
   */
  ids(choice: number, ids: readonly number[], logprobs: readonly (TokenLogprob | null)[] | null): void;
  /**
   * Backpressure from the client: while it returns a promise (the client's
   * buffer is over its bound), the engine's next chunk is not read until it
   * settles.
   */
  wait(): Promise<void> | null;
}

/** `<|end|>`: where a forced call's reasoning step stops. */
const END = HARMONY.tokens.end;

export function generate(
  svc: Service,
  engine: Engine,
  request: CompletionRequest,
  open: DoorOpen,
  tenant: string,
  sink: GenerationSink,
  /** A call to force (tool_choice "required" or named). */
  force: ForcedCall | null = null,
): Generation {
  const door = new SessionDoor(svc, tenant);
  // an upstream that fails before its first chunk gets the client a proper
  // status (4xx kept, 502, 504), not a 200 with a cut-short answer: the
  // sessions are then closed without a word to the client
  let upstreamAnswered = false;
  let quiet = false;
  const ctrl = new AbortController();
  const n = request.n;
  const names = Array.from({ length: n }, () => door.name("gen"));
  let pending = n;
  // declared before any op is sent: answers may arrive while send() runs (streams on the main thread)
  let usage: UpstreamUsage | null = null;
  let finishAll!: () => void;
  const allFinished = new Promise<void>((resolve) => {
    finishAll = resolve;
  });
  // an op of ours the sessions refused (over budget, draining, a bug): the generation fails, never hangs or goes on short
  let failure: UpstreamError | null = null;
  const fail = (e: unknown) => {
    if (failure !== null) return;
    const err = isObj(e) ? e : {};
    const code = typeof err.code === "string" ? err.code : "unknown";
    const message = typeof err.message === "string" ? err.message : "";
    failure = new UpstreamError(
      BUSY_CODES.has(code) ? 503 : 500,
      "parse_failed",
      `the parser sessions refused the generation (${code}): ${message}`,
    );
    quiet = true;
    ctrl.abort();
    finishAll();
  };
  names.forEach((name, choice) => {
    door.listen(name, (ev) => {
      const plain = ev.chat_delta as { field: string; text: string } | undefined;
      if (plain !== undefined) {
        // a text step (most of a stream's): never its last
        if (quiet) return;
        if (sink.text) return sink.text(choice, plain.field, plain.text, usage);
        return fail({ code: "bug", message: "a text step reached a sink that takes none" });
      }
      if (ev.error && (ev.error as Obj).code !== "worker_crashed") return fail(ev.error);
      const last = ev.done !== undefined || isClosing(ev.openai as Obj | undefined);
      if (!quiet) {
        if (ev.openai) sink.event(choice, ev.openai as Obj, usage);
        else if (ev.error) sink.event(choice, { harmony_error: ev.error }, usage);
      }
      if (last && --pending === 0) finishAll();
    });
  });
  const text = sink.text;
  if (text !== undefined)
    names.forEach((name, choice) =>
      door.listenText(name, (field, t) => {
        if (!quiet) text.call(sink, choice, field, t, usage);
      }),
    );
  door.onStray((ev) => {
    if (ev.error) fail(ev.error);
  });
  for (const stream of names) door.open(stream, open);
  door.flush();
  // a choice's finish reason, applied when the upstream stream ends (after its usage chunk)
  const finished = new Map<number, "eos" | "length" | "abort">();
  // choices ended here (a stop string): nothing more of theirs is parsed
  const stopped = new Set<number>();
  type Hold = { ids: number[]; finish: string | null };
  // the engine's ids, every choice's, for a usage of our own when the engine gives none (aborted, or cut at its limit)
  let counted = 0;
  let injected = 0;
  /** While the parser sessions or the client are behind: a promise of when both flow again; else null. */
  const behind = (): Promise<void> | null => {
    const first = door.whenFlowing() ?? sink.wait();
    if (first === null) return null;
    return (async () => {
      for (let b: Promise<void> | null = first; b !== null; b = door.whenFlowing() ?? sink.wait()) await b;
    })();
  };
  /** A choice of a chunk counted and checked: its stream's name, or null when its ids are not parsed. */
  const accept = (c: UpstreamChoice): string | null => {
    const name = names[c.index];
    if (!name || finished.has(c.index) || stopped.has(c.index)) return null;
    counted += c.token_ids.length;
    return name;
  };
  /** After a choice's ids went in: a forced call's first step keeps them, else its finish is noted. */
  const settled = (c: UpstreamChoice, hold: Hold | null) => {
    if (hold !== null) {
      for (const id of c.token_ids) hold.ids.push(id);
      if (c.finish_reason !== null) hold.finish = c.finish_reason;
    } else if (c.finish_reason !== null) finished.set(c.index, endReason(c.finish_reason));
  };
  /**
   * Stream one request's ids into the sessions, each engine chunk as it is
   * read (no promise per chunk unless something is behind). `hold`: a forced
   * call's first step, whose finish is decided after it (its ids are kept in it).
   */
  const pump = (req: CompletionRequest, hold: Hold | null): Promise<void> => {
    // an engine may report usage on every chunk, cumulative (vLLM's continuous_usage_stats): the last one counts
    const before = usage as UpstreamUsage | null;
    /** A chunk of more than SLICE_IDS ids (an engine that sends 300,000 in one event): sliced, with the event loop's turns between. */
    const takeSliced = async (chunk: UpstreamChunk): Promise<void> => {
      let ids = 0;
      for (const c of chunk.choices) {
        const name = accept(c);
        if (name === null) continue;
        if (c.token_ids.length > 0) {
          ids += c.token_ids.length;
          if (ids > SLICE_IDS) {
            await sendSliced(door, name, c.token_ids);
            ids = 0;
          } else door.tokens(name, c.token_ids);
          sink.ids(c.index, c.token_ids, c.logprobs ?? null);
        }
        settled(c, hold);
      }
      door.flush();
      const b = behind();
      if (b !== null) await b;
    };
    /** What was read so far to the sessions, then a turn of the event loop (and the engine held while anything is behind). */
    const takeTurn = async (): Promise<void> => {
      door.flush();
      await new Promise((r) => setImmediate(r));
      const b = behind();
      if (b !== null) await b;
    };
    return engine.stream(
      req,
      ctrl.signal,
      (chunk) => {
        upstreamAnswered = true;
        if (chunk.usage) usage = addUsage(before, chunk.usage);
        const choices = chunk.choices;
        let total = 0;
        for (let k = 0; k < choices.length; k++) total += choices[k]!.token_ids.length;
        if (total > SLICE_IDS) return takeSliced(chunk);
        for (let k = 0; k < choices.length; k++) {
          const c = choices[k]!;
          const name = accept(c);
          if (name === null) continue;
          if (c.token_ids.length > 0) {
            door.tokens(name, c.token_ids);
            sink.ids(c.index, c.token_ids, c.logprobs ?? null);
          }
          settled(c, hold);
        }
        // many chunks read at once: at most SLICE_IDS ids go to the sessions without the event loop's turn
        if (door.pending > SLICE_IDS) return takeTurn();
        return undefined;
      },
      // the chunks read together go to the sessions together (a stream's ids as one run: one delta, one write), then
      // the engine is held back (its body is not read) while the parser sessions or the client are behind
      () => {
        door.flush();
        return behind() ?? undefined;
      },
    );
  };
  const done = (async () => {
    let error: UpstreamError | null = null;
    try {
      if (force === null) await pump(request, null);
      else {
        // step 1: the reasoning, from an analysis header on, to its <|end|>
        door.tokens(names[0]!, force.prefix);
        door.flush();
        sink.ids(0, force.prefix, null);
        injected = force.prefix.length;
        const first = { ids: [] as number[], finish: null as string | null };
        const prompt = [...request.prompt, ...force.prefix];
        // the client's limit counts what the sidecar puts into the answer too
        const max = request.maxTokens;
        const leftAfter = (spent: number) => (typeof max === "number" ? max - spent : max);
        const budget = leftAfter(force.prefix.length);
        if (typeof budget === "number" && budget < 1) first.finish = "length";
        else await pump({ ...request, prompt, n: 1, stopIds: [END], maxTokens: budget }, first);
        if (first.finish === "stop" && first.ids[first.ids.length - 1] === END) {
          // step 2: the call's header after the reasoning, and the engine goes on from there
          door.tokens(names[0]!, force.header);
          door.flush();
          sink.ids(0, force.header, null);
          const left = leftAfter(force.prefix.length + first.ids.length + force.header.length);
          if (typeof left === "number" && left < 1) finished.set(0, "length");
          else await pump({ ...request, prompt: [...prompt, ...first.ids, ...force.header], n: 1, maxTokens: left }, null);
          injected += force.header.length;
        } else if (first.finish !== null) finished.set(0, endReason(first.finish));
        // what the sidecar put into the answer counts as completion tokens, as what the engine generated, not prompt
        const u = usage as UpstreamUsage | null;
        if (u !== null) {
          const promptTokens = u.prompt_tokens - force.prefix.length;
          const completion = u.completion_tokens + injected;
          usage = { ...u, prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
        }
      }
    } catch (e) {
      if (!(e instanceof UpstreamError)) throw e;
      error = e;
    }
    if (failure !== null) error = failure;
    // whatever did not finish: a broken or aborted generation ends cut short
    if (error && !upstreamAnswered) quiet = true;
    const cut = ctrl.signal.aborted || quiet ? "abort" : error ? "length" : "eos";
    names.forEach((stream, i) => door.close(stream, stopped.has(i) ? "eos" : (finished.get(i) ?? cut)));
    door.flush();
    await allFinished;
    door.leave();
    if (usage === null && counted > 0) {
      const completion = counted + injected;
      usage = { prompt_tokens: request.prompt.length, completion_tokens: completion, total_tokens: request.prompt.length + completion };
    }
    return { usage, error: failure ?? error };
  })();
  const endChoice = (choice: number) => {
    if (choice < 0 || choice >= n || stopped.has(choice)) return;
    stopped.add(choice);
    if (names.every((_, i) => stopped.has(i) || finished.has(i))) ctrl.abort();
  };
  return { done, abort: () => ctrl.abort(), endChoice };
}

/** Ids the sessions get at once from one engine chunk before the event loop has its turn (a frame is parsed on this thread). */
const SLICE_IDS = 32_768;

/**
 * A choice's ids that take a chunk past {@link SLICE_IDS} (an engine that
 * sends 300,000 in one event) go in slices, in order, with the event loop's
 * turn between them, so that other requests (and /healthz) are not kept
 * waiting behind it; what the chunk gave before goes first.
 */
async function sendSliced(door: SessionDoor, stream: string, ids: readonly number[]): Promise<void> {
  for (let at = 0; at < ids.length; at += SLICE_IDS) {
    door.flush();
    await new Promise((r) => setImmediate(r));
    door.tokens(stream, ids.slice(at, at + SLICE_IDS));
  }
}

/**
 * Usage over a forced call's two requests: the first's prompt (and its
 * cached tokens), both completions.
 */
function addUsage(before: UpstreamUsage | null, next: UpstreamUsage): UpstreamUsage {
  if (before === null) return next;
  const completion = before.completion_tokens + next.completion_tokens;
  return { ...before, completion_tokens: completion, total_tokens: before.prompt_tokens + completion };
}

/**
 * How a choice ends by the engine's finish reason (vLLM's: stop, length,
 * abort, error, repetition). Only a stop is a clean end: a length or
 * repetition cut is "length", an abort or an engine error "abort"; neither
 * completes a tool call (no tool_call_end, no finish_reason "tool_calls").
 */
export function endReason(finish: string): "eos" | "length" | "abort" {
  if (finish === "stop") return "eos";
  if (finish === "length" || finish === "repetition") return "length";
  return "abort";
}

/** Whether an OpenAI object is a choice's or a response's last. */
export function isClosing(o: Obj | undefined): boolean {
  if (!o) return false;
  if (o.object === "chat.completion.chunk") return ((o.choices as Obj[]) ?? []).some((c) => c.finish_reason);
  return o.type === "response.completed" || o.type === "response.incomplete" || o.type === "response.failed";
}
