export { loadHarmonyEncoding, type HarmonyEncoding, type LoadOptions } from "./tiktoken.js";
