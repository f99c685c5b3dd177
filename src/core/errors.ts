/**
 * Stable error codes. The single table of codes, with reasons, is
 * docs/errors.md; `test/errors-doc.test.ts` keeps the two in step.
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
} as const;

export type InputErrorCode = keyof typeof INPUT_ERROR_CODES;

/** Codes the service sends as `error` events (stream-level or connection-level). */
export const SERVICE_ERROR_CODES = {
  bad_frame: "A frame (or one op in it) could not be decoded, or a field has the wrong type.",
  unknown_op: "An op with none of open, tokens, close (a newer client?).",
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
} as const;

export type ServiceErrorCode = keyof typeof SERVICE_ERROR_CODES;
