/**
 * `harmony-sidecar render`: an OpenAI-style chat request (JSON on stdin) →
 * the Harmony prompt that continues it: {"ids", "text", "restored"}. The
 * command has no memory of earlier streams, so it restores nothing; the
 * service's POST /v1/render and Render op do.
 */
import type { Readable, Writable } from "node:stream";
import { parseJson } from "../core/json.js";
import { renderRequest } from "../openai/render.js";
import { loadHarmonyEncoding, type HarmonyEncoding } from "../vocab/index.js";

export async function runRender(
  opts: { output: "json" | "text" | "ids" },
  io: { stdin: Readable; stdout: Writable; stderr: Writable },
  encoding?: HarmonyEncoding,
): Promise<number> {
  const chunks: Buffer[] = [];
  for await (const c of io.stdin) chunks.push(typeof c === "string" ? Buffer.from(c) : (c as Buffer));
  const parsed = parseJson(Buffer.concat(chunks).toString("utf8"));
  if (!parsed.ok) {
    io.stderr.write(`render: ${parsed.code}: ${parsed.message}\n`);
    return 2;
  }
  const request = parsed.value;
  const enc = encoding ?? loadHarmonyEncoding();
  const r = renderRequest(request, { encodeOrdinary: enc.encodeOrdinary });
  if (!r.ok) {
    io.stderr.write(`render: ${r.error.code}${r.error.path ? ` at ${r.error.path}` : ""}: ${r.error.message}\n`);
    return 2;
  }
  if (opts.output === "text") io.stdout.write(r.text + "\n");
  else if (opts.output === "ids") io.stdout.write(r.ids.join(" ") + "\n");
  else io.stdout.write(JSON.stringify({ ids: r.ids, text: r.text, restored: r.restored }) + "\n");
  return 0;
}
