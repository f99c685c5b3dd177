/**
 * The shared conformance corpus, produced by running openai-harmony v0.0.8:
 * strict mode must equal the reference on every vector; resilient mode must
 * equal it on well-formed input and recover the intended messages on
 * malformed input. Every case is also fed one token at a time and in random
 * chunkings, with identical results.
 */
import { describe, expect, it } from "vitest";
import { parseCase, type CaseResult, type Chunker } from "../../src/core/reference.js";
import type { HarmonyEvent } from "../../src/core/events.js";
import { HeaderMemo } from "../../src/core/header.js";
import { HarmonyParser } from "../../src/core/parser.js";
import { HARMONY } from "../../src/core/preset.js";
import { harmony, loadJsonl, loadReferenceCases, rng, type ConformanceCase } from "../helpers.js";

const { vocab } = harmony();

const perToken: Chunker = (t) => Array.from({ length: t.length }, (_, i) => [t[i]!]);
function randomChunks(seed: number): Chunker {
  return (t) => {
    const r = rng(seed);
    const out: number[][] = [];
    for (let i = 0; i < t.length;) {
      const n = 1 + Math.floor(r() * (r() < 0.2 ? 64 : 8));
      out.push(Array.from(t as number[]).slice(i, i + n));
      i += n;
    }
    return out;
  };
}
const CHUNKINGS: [string, Chunker | undefined][] = [
  ["whole", undefined],
  ["per token", perToken],
  ["random A", randomChunks(1)],
  ["random B", randomChunks(2)],
];

function expectedStrict(c: ConformanceCase, which: "reference" | "reference_non_strict") {
  const ref = c[which] as ConformanceCase["reference"];
  const fe = ref.first_error;
  return {
    messages: ref.messages,
    first_error:
      fe === null ? null : { message: fe.message, index: fe.index === "eos" ? c.tokens.length : fe.index, token: fe.token ?? null },
  };
}

const strictOnly = (r: CaseResult) => ({ messages: r.messages, first_error: r.first_error });

describe("reference vectors (strict mode)", () => {
  for (const { file, data } of loadReferenceCases()) {
    it(file, () => {
      const p = data.parser;
      const parser = new HarmonyParser(vocab, {
        mode: "strict",
        nonStrict: !p.strict,
        role: p.role,
        wholeMessages: true,
      });
      const messages: unknown[] = [];
      const errors: unknown[] = [];
      const collect = (evs: HarmonyEvent[]) => {
        for (const e of evs) {
          if (e.type === "message_end") messages.push(e.message);
          if (e.type === "error") errors.push({ at_token_index: e.at, token: e.token, message: e.message });
        }
      };
      let stopped = false;
      for (const t of data.tokens as number[]) {
        collect(parser.write([t]));
        if (errors.length > 0 && p.on_error.startsWith("stop")) {
          stopped = true;
          break;
        }
      }
      const stateBeforeEos = parser.stateName;
      let eos: unknown = null;
      if (!stopped && p.call_process_eos_at_end) {
        const before = errors.length;
        collect(parser.end());
        eos = errors.length > before ? { ok: false, message: (errors.pop() as { message: string }).message } : { ok: true };
      }
      const exp = data.expected;
      expect(messages).toEqual(exp.messages);
      expect(errors).toEqual(exp.errors.map((e) => ({ at_token_index: e.at_token_index, token: e.token, message: e.message })));
      expect(eos).toEqual(exp.process_eos ?? null);
      // the state the reference is left in (after process_eos when it was called)
      const finalState = eos === null ? stateBeforeEos : (eos as { ok: boolean }).ok ? "ExpectStart" : "Header";
      expect(finalState).toBe(exp.final_state);
    });
  }
});

for (const file of ["wellformed.jsonl", "malformed.jsonl"]) {
  describe(file, () => {
    const cases = loadJsonl(file);
    it("has the cases the README promises", () => {
      expect(cases.length).toBe(file === "wellformed.jsonl" ? 300 : 306);
    });
    for (const [name, chunker] of CHUNKINGS) {
      it(`strict mode equals the reference (${name})`, () => {
        for (const c of cases) {
          const got = strictOnly(parseCase(vocab, c.tokens, { mode: "strict", role: c.role }, chunker));
          expect(got, c.id).toEqual(expectedStrict(c, "reference"));
        }
      });
      it(`non-strict option equals the reference's non-strict mode (${name})`, () => {
        for (const c of cases) {
          const got = strictOnly(parseCase(vocab, c.tokens, { mode: "strict", nonStrict: true, role: c.role }, chunker));
          expect(got, c.id).toEqual(expectedStrict(c, "reference_non_strict"));
        }
      });
      it(`resilient mode gives the intended messages (${name})`, () => {
        for (const c of cases) {
          const got = parseCase(vocab, c.tokens, { role: c.role }, chunker);
          // the intended messages, cut at the stop that ends a primed completion (HARMONY.md §4, rule 8)
          expect(got.messages, `${c.id} ${c.fault ?? ""}`).toEqual(c.resilient.messages);
          expect(got.first_error, c.id).toBeNull();
          const afterStop = got.recoveries.filter((r) => r.kind === "after_stop");
          expect(afterStop.length, c.id).toBe(c.resilient.after_stop ? 1 : 0);
          if (c.kind === "wellformed")
            expect(
              got.recoveries.filter((r) => r.kind !== "after_stop"),
              c.id,
            ).toEqual([]);
        }
      });
    }
    if (file === "malformed.jsonl") {
      it("every malformed case reports at least one recovery, except clean truncations", () => {
        for (const c of cases) {
          const got = parseCase(vocab, c.tokens, { role: c.role });
          const clean = c.fault === "truncated_mid_content" || c.fault === "truncated_mid_arguments";
          if (clean) expect(got.recoveries, c.id).toEqual([]);
          else expect(got.recoveries.length, `${c.id} ${c.fault}`).toBeGreaterThan(0);
        }
      });
      it("a header memo shared by all cases (and the thread's, by default) changes no event, in either mode, whole or per token", () => {
        // one memo for the whole corpus (and a tiny one that keeps clearing), as a host shares one
        const memo = new HeaderMemo(HARMONY);
        const tiny = new HeaderMemo(HARMONY, 3);
        const feed = (p: HarmonyParser, chunks: ArrayLike<number>[]) => [...chunks.flatMap((ch) => p.write(ch)), ...p.end()];
        for (const c of [...cases, ...loadJsonl("wellformed.jsonl")]) {
          for (const opts of [{ role: c.role }, { role: c.role, mode: "strict" as const }]) {
            const whole = feed(new HarmonyParser(vocab, { ...opts, headers: null }), [c.tokens]);
            const each = feed(new HarmonyParser(vocab, { ...opts, headers: null }), perToken(c.tokens));
            // and the thread's memo, a parser's default
            expect(feed(new HarmonyParser(vocab, opts), perToken(c.tokens)), c.id).toEqual(each);
            expect(feed(new HarmonyParser(vocab, { ...opts, headers: memo }), [c.tokens]), c.id).toEqual(whole);
            expect(feed(new HarmonyParser(vocab, { ...opts, headers: memo }), perToken(c.tokens)), c.id).toEqual(each);
            expect(feed(new HarmonyParser(vocab, { ...opts, headers: tiny }), perToken(c.tokens)), c.id).toEqual(each);
          }
        }
        // the common headers were read once and are shared since
        const r = memo.reference("<|channel|>analysis", "assistant");
        expect(r.ok).toBe(true);
        expect(memo.reference("<|channel|>analysis", "assistant")).toBe(r);
      });
      it("chunkings give identical recoveries", () => {
        for (const c of cases) {
          const whole = parseCase(vocab, c.tokens, { role: c.role });
          for (const [, chunker] of CHUNKINGS.slice(1)) {
            expect(parseCase(vocab, c.tokens, { role: c.role }, chunker).recoveries, c.id).toEqual(whole.recoveries);
          }
        }
      });
    }
  });
}
