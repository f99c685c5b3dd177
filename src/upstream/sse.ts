/**
 * The HTTP side every engine shares: a streaming POST read as server-sent
 * events (one JSON object per `data:` line), a plain GET passed through, and
 * the mapping of transport failures and error answers onto
 * {@link UpstreamError}: unreachable or broken → 502, silent → 504, an
 * upstream 4xx stays a 4xx, an error event mid-stream → 502. What a chunk
 * means is each engine's business (./vllm.ts, ./sglang.ts, ./trtllm.ts,
 * ./llamacpp.ts).
 */
import { request, type Dispatcher } from "undici";
import { isObj, parseJson } from "../core/json.js";
import { UpstreamError } from "./engine.js";

export interface SseOptions {
  baseUrl: string;
  /** Abort when no byte arrives for this long. */
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
}

/**
 * The most of one upstream answer held in memory: an event of the stream
 * not yet ended by a blank line, or a whole non-streamed body (`/v1/models`,
 * `/props`, an error answer). A step's chunk is a few hundred bytes; more
 * than this is an engine gone wrong, answered `upstream_bad_response`
 * (bodies are counted in bytes; a streamed event in characters, as it is held).
 */
export const MAX_UPSTREAM_EVENT_BYTES = 16 * 1024 * 1024;

/** A body as text, refused (`upstream_bad_response`) once it passes `max` bytes. */
async function boundedText(body: AsyncIterable<Uint8Array>, max: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  for await (const piece of body) {
    bytes += piece.length;
    if (bytes > max) throw new UpstreamError(502, "upstream_bad_response", `the upstream's answer is over ${max} bytes`);
    text += decoder.decode(piece, { stream: true });
  }
  return text + decoder.decode();
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

/** POST `body` to `path` with `stream: true` semantics; yields each event's JSON object. */
export async function* postSse(path: string, body: Record<string, unknown>, opts: SseOptions): AsyncGenerator<Record<string, unknown>> {
  const ctrl = new AbortController();
  const abort = () => ctrl.abort();
  opts.signal.addEventListener("abort", abort);
  let idle: NodeJS.Timeout | undefined;
  let timedOut = false;
  const arm = () => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      timedOut = true;
      ctrl.abort();
    }, opts.idleTimeoutMs);
  };
  const needDone = opts.done !== false;
  try {
    arm();
    let res: Dispatcher.ResponseData;
    try {
      // undici's request, not fetch: fetch refuses the ports on its "bad port" list (6000 among them)
      res = await request(endpoint(opts.baseUrl, path), {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(body),
        signal: ctrl.signal,
      });
    } catch (e) {
      if (timedOut) throw new UpstreamError(504, "upstream_timeout", `the upstream did not answer within ${opts.idleTimeoutMs} ms`);
      if (opts.signal.aborted) return;
      const cause = String((e as Error).cause ?? (e as Error).message);
      if (/other side closed|socket|terminated/i.test(cause) && !/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH/.test(cause)) {
        throw new UpstreamError(502, "upstream_broken_stream", `the upstream closed the connection before answering: ${cause}`);
      }
      throw new UpstreamError(502, "upstream_unreachable", `cannot reach the upstream: ${cause}`);
    }
    if (res.statusCode < 200 || res.statusCode > 299) {
      const text = await boundedText(res.body as unknown as AsyncIterable<Uint8Array>, 64 * 1024).catch(() => "");
      // a client mistake the upstream refused stays a 4xx; its own failures are a 502
      const code = res.statusCode;
      const status = code >= 400 && code < 500 ? code : 502;
      throw new UpstreamError(status, "upstream_error", `upstream answered ${code}: ${errorMessage(text)}`, code);
    }
    if (!res.body) throw new UpstreamError(502, "upstream_bad_response", "the upstream answered without a body");
    const decoder = new TextDecoder();
    const maxEvent = opts.maxEventBytes ?? MAX_UPSTREAM_EVENT_BYTES;
    const blank = /\r?\n\r?\n/g;
    let buf = "";
    let done = false;
    try {
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        arm();
        // search only what arrived, and the 3 characters before it a blank line may start in
        blank.lastIndex = Math.max(0, buf.length - 3);
        buf += decoder.decode(piece, { stream: true });
        let m: RegExpExecArray | null;
        while ((m = blank.exec(buf)) !== null) {
          const block = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          blank.lastIndex = 0;
          const data = block
            .split(/\r?\n/)
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).replace(/^ /, ""))
            .join("\n");
          if (data === "") continue;
          if (data === "[DONE]") {
            done = true;
            return;
          }
          let chunk: Record<string, unknown>;
          try {
            const parsed = parseJson(data);
            if (!parsed.ok || !isObj(parsed.value)) throw new Error("not a JSON object");
            chunk = parsed.value as Record<string, unknown>;
          } catch {
            throw new UpstreamError(502, "upstream_bad_response", `the upstream sent an event that is not JSON: ${data.slice(0, 200)}`);
          }
          if (chunk.error) {
            const err = chunk.error as { message?: string } | string;
            throw new UpstreamError(
              502,
              "upstream_error",
              `the upstream reported an error mid-stream: ${typeof err === "string" ? err : err.message}`,
            );
          }
          // the engine's silence is timed only while its next bytes are awaited, not while the consumer holds it back
          clearTimeout(idle);
          yield chunk;
          arm();
        }
        if (buf.length > maxEvent) {
          throw new UpstreamError(502, "upstream_bad_response", `the upstream sent an event over ${maxEvent} bytes without its end`);
        }
      }
    } catch (e) {
      if (e instanceof UpstreamError) throw e;
      if (opts.signal.aborted) return;
      if (timedOut) throw new UpstreamError(504, "upstream_timeout", `the upstream went silent for ${opts.idleTimeoutMs} ms`);
      throw new UpstreamError(502, "upstream_broken_stream", `the upstream stream broke: ${(e as Error).message}`);
    }
    if (needDone && !done && !opts.signal.aborted) {
      throw new UpstreamError(502, "upstream_broken_stream", "the upstream stream ended without [DONE]");
    }
  } finally {
    clearTimeout(idle);
    opts.signal.removeEventListener("abort", abort);
    ctrl.abort();
  }
}

/** GET `path`, passed through as it answered. */
export async function getText(baseUrl: string, path: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  try {
    const res = await request(endpoint(baseUrl, path), { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.statusCode, body: await boundedText(res.body as unknown as AsyncIterable<Uint8Array>, MAX_UPSTREAM_EVENT_BYTES) };
  } catch (e) {
    if (e instanceof UpstreamError) throw e;
    throw new UpstreamError(502, "upstream_unreachable", `cannot reach the upstream: ${(e as Error).message}`);
  }
}

/** GET `path` as a JSON object, or null (not reachable, not 200, not an object). */
export async function getJsonObject(baseUrl: string, path: string, timeoutMs: number): Promise<Record<string, unknown> | null> {
  try {
    const r = await getText(baseUrl, path, timeoutMs);
    if (r.status !== 200) return null;
    const parsed = parseJson(r.body);
    return parsed.ok && isObj(parsed.value) ? (parsed.value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
