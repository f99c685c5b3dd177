/**
 * Peer baseline: OpenAI's reference StreamableParser, as compiled to WASM by
 * the unofficial `openai-harmony` npm package (0.4.0, a fork of the
 * openai/harmony crate older than v0.0.8: no strict option, no process_eos in
 * its JS API, no unprimed parser).
 *
 * The package fetches its .wasm and the `o200k_base.tiktoken` vocabulary
 * with `fetch`, which cannot reach the network here and cannot read `file:`
 * URLs in Node 20. We regenerate the vocabulary file from the `tiktoken`
 * package's ranks (its sha256 must equal the one the reference checks) and
 * answer those two fetches from disk while the package loads.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import o200k from "tiktoken/encoders/o200k_base.json" with { type: "json" };

const VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d";
const ORIGIN = "http://vocab.invalid/";

/** tiktoken's compact ranks ("! <offset> <b64> <b64> …" lines) → the .tiktoken text format. */
function tiktokenFile(): string {
  const pairs: [string, number][] = [];
  for (const line of o200k.bpe_ranks.split("\n")) {
    if (line === "") continue;
    const parts = line.split(" ");
    if (line.startsWith("!")) {
      const offset = Number(parts[1]);
      for (let i = 2; i < parts.length; i++) pairs.push([parts[i]!, offset + i - 2]);
    } else pairs.push([parts[0]!, Number(parts[1])]);
  }
  pairs.sort((a, b) => a[1] - b[1]);
  return pairs.map(([b64, rank]) => `${b64} ${rank}\n`).join("");
}

function vocabDir(): string {
  const dir = path.join(os.tmpdir(), "harmony-sidecar-bench");
  const file = path.join(dir, "o200k_base.tiktoken");
  if (!existsSync(file)) {
    const text = tiktokenFile();
    const sha = createHash("sha256").update(text).digest("hex");
    if (sha !== VOCAB_SHA256) throw new Error(`regenerated vocabulary has sha256 ${sha}, expected ${VOCAB_SHA256}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(file, text);
  } else if (createHash("sha256").update(readFileSync(file)).digest("hex") !== VOCAB_SHA256) {
    throw new Error(`${file} is corrupt; delete it`);
  }
  return dir;
}

interface WasmParser {
  process(token: number): void;
  free(): void;
  readonly messages: string;
}

export interface ReferencePeer {
  readonly name: string;
  /** Parse each completion with a fresh primed parser, one process() per token; returns messages. */
  parseCompletions(completions: Uint32Array[]): number;
}

export async function loadReferencePeer(): Promise<ReferencePeer> {
  const dir = vocabDir();
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const file = url.startsWith("file:") ? fileURLToPath(url) : url.startsWith(ORIGIN) ? path.join(dir, url.slice(ORIGIN.length)) : null;
    if (file === null) return realFetch(input, init);
    const res = new Response(await readFile(file), {
      headers: { "content-type": file.endsWith(".wasm") ? "application/wasm" : "application/octet-stream" },
    });
    Object.defineProperty(res, "url", { value: url }); // the WASM side parses response.url
    return res;
  };
  try {
    const mod = (await import("openai-harmony")) as unknown as {
      load_harmony_encoding(name: string, base: string): Promise<unknown>;
      JsStreamableParser: new (enc: unknown, role: string) => WasmParser;
    };
    const enc = await mod.load_harmony_encoding("HarmonyGptOss", ORIGIN);
    return {
      name: "openai-harmony 0.4.0 (WASM build of the reference StreamableParser)",
      parseCompletions(completions) {
        let messages = 0;
        for (const ids of completions) {
          const p = new mod.JsStreamableParser(enc, "assistant");
          for (let i = 0; i < ids.length; i++) p.process(ids[i]!);
          messages += (JSON.parse(p.messages) as unknown[]).length;
          p.free();
        }
        return messages;
      },
    };
  } finally {
    globalThis.fetch = realFetch;
  }
}
