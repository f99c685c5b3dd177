export { loadHarmonyEncoding, tableFilePath, type HarmonyEncoding, type LoadOptions } from "./encoding.js";
