/**
 * One upstream generation parsed into OpenAI objects: the engine's token ids
 * for each choice go, as a stream of their own, through the same parser
 * sessions (on the worker pool) as remote clients' streams, on an
 * in-process connection; each choice's OpenAI chunks or events come back
 * through `onObject`.
 */
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { UpstreamError, type CompletionRequest, type Engine, type UpstreamUsage } from "../upstream/engine.js";
import { LocalConnection } from "./local.js";
import type { Service } from "./service.js";

/** One upstream generation parsed into n streams of OpenAI objects. */
export interface Generation {
  /** Ends when every choice's stream has finished. */
  done: Promise<{ usage: UpstreamUsage | null; error: UpstreamError | null }>;
  abort(): void;
}

export function generate(
  svc: Service,
  engine: Engine,
  request: CompletionRequest,
  open: Obj,
  tenant: string,
  onObject: (choice: number, obj: Obj, usage: UpstreamUsage | null) => void,
): Generation {
  const local = new LocalConnection(svc, tenant);
  // an upstream that fails before its first chunk gets the client a proper
  // status (4xx kept, 502, 504), not a 200 with a cut-short answer: the
  // sessions are then closed without a word to the client
  let upstreamAnswered = false;
  let quiet = false;
  const ctrl = new AbortController();
  const n = request.n;
  const names = Array.from({ length: n }, () => local.name("gen"));
  let pending = n;
  // declared before any op is sent: answers may arrive while send() runs (streams on the main thread)
  let usage: UpstreamUsage | null = null;
  let finishAll!: () => void;
  const allFinished = new Promise<void>((resolve) => {
    finishAll = resolve;
  });
  names.forEach((name, choice) => {
    local.listen(name, (ev) => {
      const last = ev.done !== undefined || isClosing(ev.openai as Obj | undefined);
      if (!quiet) {
        if (ev.openai) onObject(choice, ev.openai as Obj, usage);
        else if (ev.error && (ev.error as Obj).code === "worker_crashed") onObject(choice, { harmony_error: ev.error }, usage);
      }
      if (last && --pending === 0) finishAll();
    });
  });
  local.send(names.map((stream) => ({ open: { stream, ...open } })));
  // a choice's finish reason, applied when the upstream stream ends (after its usage chunk)
  const finished = new Map<number, string>();
  const done = (async () => {
    let error: UpstreamError | null = null;
    try {
      for await (const chunk of engine.complete(request, ctrl.signal)) {
        upstreamAnswered = true;
        if (chunk.usage) usage = chunk.usage;
        const ops: Obj[] = [];
        for (const c of chunk.choices) {
          const name = names[c.index];
          if (!name || finished.has(c.index)) continue;
          if (c.token_ids.length > 0) ops.push({ tokens: { stream: name, ids: c.token_ids } });
          if (c.finish_reason !== null) finished.set(c.index, endReason(c.finish_reason));
        }
        if (ops.length > 0) local.send(ops);
      }
    } catch (e) {
      if (!(e instanceof UpstreamError)) throw e;
      error = e;
    }
    // whatever did not finish: a broken or aborted generation ends cut short
    if (error && !upstreamAnswered) quiet = true;
    const cut = ctrl.signal.aborted || quiet ? "abort" : error ? "length" : "eos";
    local.send(names.map((stream, i) => ({ close: { stream, reason: finished.get(i) ?? cut } })));
    await allFinished;
    local.close();
    return { usage, error };
  })();
  return { done, abort: () => ctrl.abort() };
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
