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
