/**
 * What the OpenAI front would stream for a parse's events: its Chat
 * Completions chunks and its Responses events, made by the same adapters
 * the front's parser sessions use (src/openai/chat.ts, responses.ts), and
 * passed through what the front does to them before they are sent
 * (src/transport/openai-front.ts):
 *
 * - Chat: every chunk carries the one completion id; a chunk with the
 *   sidecar's own `harmony` extension (a call's whole arguments, the
 *   reasoning tokens) is not sent on a stream; `data: [DONE]` ends it.
 * - Responses: `response` objects carry `previous_response_id` (null) and
 *   `store` (true, the default); the closing event loses `harmony`.
 *
 * Call ids are `call_inspect_<n>` (the front's: `call_<the stream's id>_<n>`).
 * Usage is the engine's count in the front, so it is not made here. Each
 * chunk names the event that produced it (its index in the parse's
 * events), so the page can step through them with the tokens.
 */
import type { HarmonyEvent, ToolCallStartEvent } from "../core/events.js";
import { ChatCompletionChunkAdapter } from "../openai/chat.js";
import { ResponsesStreamAdapter } from "../openai/responses.js";

/** One streamed object and the event it came from. */
export interface StreamedChunk {
  event: number;
  data: unknown;
}

export interface FrontChunks {
  /** `chat.completion.chunk` objects, each sent as `data: {…}`; the stream then ends with `data: [DONE]`. */
  chat: StreamedChunk[];
  /** Responses events, each sent as `event: <type>` and `data: {…}`. */
  responses: StreamedChunk[];
}

/** The ids the inspector's chunks carry (the front makes random ones per request); their `created` is 0, so that one input always shows the same chunks. */
export const INSPECT_CHAT_ID = "chatcmpl-inspect";
export const INSPECT_RESPONSE_ID = "resp_inspect";

/** The chunks of both APIs for `events`, as the front streams them (`model` as the request names it). */
export function frontChunks(events: readonly HarmonyEvent[], model = "gpt-oss", created = 0): FrontChunks {
  // the front's sessions name calls call_<stream's id>_<n>; here the stream's id is "inspect"
  const toolCallId = (e: ToolCallStartEvent) => `call_inspect_${e.call_index}`;
  const chat = new ChatCompletionChunkAdapter({ id: INSPECT_CHAT_ID, model, created, toolCallId });
  const responses = new ResponsesStreamAdapter({ id: INSPECT_RESPONSE_ID, model, created, toolCallId });
  const out: FrontChunks = { chat: [], responses: [] };
  events.forEach((ev, event) => {
    for (const c of chat.push(ev)) {
      if (c.harmony) continue; // the sidecar's own: kept back from a stream
      out.chat.push({ event, data: c });
    }
    for (const r of responses.push(ev)) {
      const o = r as unknown as Record<string, unknown>;
      if (o.response !== null && typeof o.response === "object") {
        const response = o.response as Record<string, unknown>;
        response.previous_response_id = null;
        response.store = true;
      }
      delete o.harmony;
      out.responses.push({ event, data: o });
    }
  });
  return out;
}
