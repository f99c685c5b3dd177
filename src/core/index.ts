export * from "./events.js";
export * from "./errors.js";
export * from "./header.js";
export * from "./parser.js";
export * from "./preset.js";
export * from "./utf8.js";
export * from "./vocab.js";
