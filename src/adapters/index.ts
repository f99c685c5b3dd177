/** Adapters from harmony parser events to OpenAI wire formats (pure, deterministic, no I/O). */
export * from "./openai-chat.js";
export * from "./openai-responses.js";
