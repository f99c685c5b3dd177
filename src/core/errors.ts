/**
 * Every stable code the project emits, one table per kind: parse errors,
 * input errors, service errors, render and request errors, HTTP API errors,
 * the process's own errors, close codes and recovery kinds. Each is typed as
 * a union of its keys, and docs/errors.md has the same tables;
 * `test/core/errors-doc.test.ts` checks both ways that they list the same
 * codes, and `test/sources.test.ts` that every error the code throws
 * or answers carries one of them.
 */
export const PARSE_ERROR_CODES = {
  unexpected_token: "A token other than <|start|> arrived between messages (strict mode).",
  header_incomplete_eos: "The stream ended inside a message header (strict mode).",
  header_decode_failed: "A header held an id outside the vocabulary or bytes that are not UTF-8 (strict mode).",
  empty_channel: "A <|channel|> marker with no channel value (strict mode).",
  missing_role: "A header with no role word, in an unprimed stream (strict mode).",
  unknown_role: "A header whose role word is not a known role and names no tool (strict mode).",
  header_trailing_tokens: "Header words left over after role, channel, recipient and content type (strict mode).",
  stream_finished: "write() or end() was called after the stream ended.",
} as const;

export type ParseErrorCode = keyof typeof PARSE_ERROR_CODES;

/** Codes for input rejected before it reaches a parser (CLI and transports). */
export const INPUT_ERROR_CODES = {
  bad_json: "An input line (or the ids input) is not valid JSON.",
  bad_case: "A --batch line is not a JSON object.",
  bad_tokens: "`tokens` is not an array.",
  bad_token_id: "A token id is not an integer.",
  bad_role: 'A --batch case\'s role is neither "assistant" nor null.',
  too_deep: "JSON input nested deeper than 64 arrays and objects.",
  line_too_long: "A --batch line longer than 64 MiB.",
} as const;

export type InputErrorCode = keyof typeof INPUT_ERROR_CODES;

/** Codes the service sends as `error` events (stream-level or connection-level). */
export const SERVICE_ERROR_CODES = {
  bad_frame: "A frame (or one op in it) could not be decoded, or a field has the wrong type.",
  unknown_op: "An op with none of open, tokens, close, render (a newer client?).",
  bad_token_id: "A token id in the JSON form is not an integer in 0..2^32-1.",
  too_many_ids: "A frame carries more token ids than the limit.",
  too_many_streams: "An open beyond the per-connection stream limit.",
  unknown_stream: "Tokens or close for a stream that was never opened, or a handle no open stream has.",
  stream_closed: "Tokens or close for a stream that was already closed.",
  duplicate_stream: "An open for a stream name or handle that is already in use on this connection.",
  bad_option: "An open or close with an unknown role, mode or reason.",
  worker_crashed: "The worker thread (or the main thread's sessions) holding the stream failed; the stream is lost.",
  shutting_down: "The server is draining: the stream ends here, or no new streams.",
  bad_request: "A render request could not be rendered (its own code, path and reason are in the message).",
  too_deep: "A JSON frame nested deeper than 64 arrays and objects.",
  too_many_ops: "A frame carries more ops than the limit.",
  over_budget: "An open refused: the connection's streams are at their memory budget, or the process is near its own.",
} as const;

export type ServiceErrorCode = keyof typeof SERVICE_ERROR_CODES;

/** Repairs resilient mode makes (`recovery` events). */
export const RECOVERY_KINDS = [
  "missing_start",
  "stray_stop",
  "junk_text",
  "dropped_token",
  "invalid_token",
  "double_start",
  "header_restart",
  "abandoned_header",
  "recipient_spliced",
  "unused_recipient",
  "header_repaired",
  "missing_message",
  "headerless_text",
  "missing_end",
  "truncated_header",
  "after_stop",
  "unknown_tool",
  "arguments_repaired",
  "call_not_allowed",
  "schema_mismatch",
  "channel_repaired",
  "repetition",
] as const;

export type RecoveryKind = (typeof RECOVERY_KINDS)[number];

/** Why the renderer refused a conversation (src/core/render.ts's RenderError). */
export const RENDER_ERROR_CODES = {
  bad_message: "A message is not an object, or its role is not one of system, developer, user, assistant, tool.",
  tool_without_name: "A tool message has no name (the reference's `Tools should have a name!`).",
  misplaced_content: "System content outside a system message, or developer content outside a developer message.",
  bad_content: "Content, a content object, a tool namespace or a header field has the wrong type or value.",
  unknown_special: "piecesToTokens: a special piece that the preset does not define.",
} as const;

export type RenderErrorCode = keyof typeof RENDER_ERROR_CODES;

/** Why an OpenAI chat request could not be turned into a conversation (src/openai/request.ts), or read at all. */
export const REQUEST_ERROR_CODES = {
  bad_json: "The request is not JSON.",
  too_deep: "The request nests deeper than 64 arrays and objects.",
  render_timeout: "The render took longer than its deadline (10 s) and was stopped.",
  bad_request: "The request is not an object, or `messages` is not an array.",
  bad_message: "A message is not an object, or its role is unknown.",
  bad_content: "Content is not a string, null or an array of text parts (images and audio are not supported).",
  bad_reasoning: "`reasoning`, `reasoning_content` or `thinking` is present but not a string.",
  bad_tool_call: "A tool call is not a function call with a name and string or object arguments.",
  unknown_tool_call_id: "A tool message's `tool_call_id` matches no earlier tool call, and it has no `name`.",
  bad_tool: "A `tools` entry is not a function with a name.",
  unsupported_tool:
    "A `tools` entry of a type the sidecar cannot give gpt-oss (hosted tools such as web_search or file_search; Chat: anything but function), named in the message.",
  unsupported_input_item: "A Responses input item (or content part) of a type the sidecar cannot render, named in the message.",
  bad_reasoning_effort: "`reasoning_effort` is not low, medium or high (minimal and none count as low).",
  bad_response_format:
    "`response_format` (or Responses' `text.format`) is not text, json_object or json_schema with a valid name and an object schema.",
} as const;

export type RequestErrorCode = keyof typeof REQUEST_ERROR_CODES;

/** Codes of the HTTP API's error bodies (`/v1/render`, the OpenAI front) beyond the request codes above. */
export const HTTP_ERROR_CODES = {
  unauthorized: "A bearer token is required and none, or a wrong one, was given (401).",
  forbidden_origin: "A request from a web page whose origin is not allowed (--allow-origin), or a cross-site browser request (403).",
  forbidden_host: "The Host header names neither the bound address nor an allowed name (--allow-host): DNS rebinding (421).",
  unsupported_media_type: "A POST body that is not JSON (content-type other than application/json) (415).",
  method_not_allowed: "The path takes another method (405).",
  too_large: "The body is over --max-frame-bytes (413).",
  no_upstream: "An OpenAI path was asked of a server started without --upstream (404).",
  internal: "A bug: the request failed in a way that is not the client's or the upstream's (500).",
  context_length_exceeded: "The prompt, with the tokens asked for (max_tokens), does not fit the model's context (400).",
  parse_timeout: "POST /v1/parse took longer than its deadline (10 s) and its worker was stopped (503).",
  response_not_found: "GET or DELETE /v1/responses/{id}: no response with that id is stored for this tenant (404).",
  previous_response_not_found: "`previous_response_id` names no response stored for this tenant (404).",
  item_not_found: "An `item_reference` input item names no item of a response stored for this tenant (404).",
  store_unavailable: "The shared store (--cot-store) did not answer within 1 s, and this process has no copy of the response (503).",
  upstream_unreachable: "The upstream could not be reached (502).",
  upstream_error: "The upstream answered with an error, before or during the stream (its 4xx kept, else 502).",
  upstream_timeout: "The upstream sent nothing for --upstream-timeout-ms (504).",
  upstream_bad_response:
    "The upstream answered with something that is not its streaming format (ids outside the vocabulary, a choice it was not asked for, usage that is not counts), or past a size bound (502).",
  upstream_broken_stream: "The upstream's stream broke or ended without [DONE] (502).",
  bad_request_target: "The request target is not a path: absolute-form, authority-form, *, or a path starting with // (400).",
  upstream_deadline: "One request to the upstream went on past --upstream-deadline-ms, whatever it sent meanwhile (504).",
  upstream_unauthorized: "The upstream refused the sidecar's credentials (401 or 403): its --api-key needs --upstream-api-key (502).",
  upstream_lost_tokens:
    "The upstream's ids and text disagree in a way the text cannot repair (llama-server: ids held back inside a character that never completed) (502).",
  parse_failed:
    "The sidecar's own parser sessions refused or lost a generation's ops (503 at the memory budget or while draining, else 500); nothing of it is the upstream's.",
  not_found: "No such path (404); GET / lists what is served.",
  upgrade_required: "GET /v1/stream without the WebSocket upgrade (426).",
} as const;

export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES;

/** The upstream's failures, as the OpenAI front reports them. */
export type UpstreamErrorCode = Extract<HttpErrorCode, `upstream_${string}` | "context_length_exceeded" | "parse_failed">;

/**
 * Codes of the errors the project's own code raises outside any answer to a
 * peer: a command's refusals, a client that cannot reach its server, a file
 * the build writes that is missing, and bugs. Thrown (each in a coded error
 * class, or `bug: …` in the message), printed by the CLI, or logged.
 */
export const PROCESS_ERROR_CODES = {
  usage: "A flag, setting or option refused: one line that names it (the CLI exits with status 2).",
  listen_failed: "An edge could not listen: a port in use, an address that is not this machine's (the CLI exits with status 2).",
  unreachable:
    "A client (the bundled client, the load tester) could not reach its server, was refused, or lost the connection before the answer.",
  not_built: "A file the build writes is missing (a worker thread's entry point, the proto/ directory): run make build.",
  bug: "An invariant of the code does not hold: a bug, never the input's fault.",
} as const;

export type ProcessErrorCode = keyof typeof PROCESS_ERROR_CODES;

/** Any code of the tables above (close codes and recovery kinds aside). */
export type ErrorCode =
  ParseErrorCode | InputErrorCode | ServiceErrorCode | RenderErrorCode | RequestErrorCode | HttpErrorCode | ProcessErrorCode;

/**
 * An error that carries its code: the base of every error class the code
 * throws, so that whoever catches one can say which code it is; the message
 * is the text a person reads.
 */
export class CodedError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The body of an error answer on the service's own HTTP paths
 * (`/v1/render`, `/v1/parse`, `/metrics`, `/inspect`, …):
 * `{"error": {"code", "message", …}}`, with `extra` fields after them (a
 * render's `path`). The OpenAI paths answer in OpenAI's shape instead
 * (src/transport/respond.ts).
 */
export function errorBody(code: ErrorCode, message: string, extra?: Readonly<Record<string, unknown>>): { error: Record<string, unknown> } {
  return { error: { code, message, ...extra } };
}

/** WebSocket close codes the service ends a connection with (1002, 1007, 1008 and 1009 are sent by `ws` itself). */
export const CLOSE_CODES = {
  normal: 1000,
  going_away: 1001,
  protocol_error: 1002,
  invalid_payload: 1007,
  policy_violation: 1008,
  message_too_big: 1009,
  idle_timeout: 4408,
  slow_reader: 4409,
} as const;

export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];
