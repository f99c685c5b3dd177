/**
 * The streaming Harmony parser's public face; its rooms are in ./parser/
 * (machine.ts is the state machine, stream.ts lists what a stream holds).
 */
export { HarmonyParser } from "./parser/machine.js";
export type { ParseMode, ParserOptions } from "./parser/options.js";
export { AFTER_STOP_RAW_BYTES, MAX_ARGUMENT_BYTES, MAX_HEADERLESS_CHARS, REPEAT_LIMIT } from "./parser/constants.js";
