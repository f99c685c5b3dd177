/**
 * A streamed completion chunk read in place (src/upstream/chunk-template.ts):
 * what a match gives is what JSON.parse gives of the event's text, for the
 * chunks engines send and for generated and mangled ones; an event the
 * template does not fit is left to be read as text, never misread.
 *
 * The chunks' shape is vLLM's streamed `/v1/completions` with
 * `return_token_ids` (./vllm-step.ts names the source).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkTemplate, MAX_TEMPLATE_CHARS, MAX_TEMPLATES } from "../../src/upstream/chunk-template.js";
import { HEAD, step } from "./vllm-step.js";

/** An event as the SSE reader hands it on: its data's bytes, somewhere inside a piece. */
function bytesOf(data: string): { piece: Buffer; start: number; end: number } {
  const piece = Buffer.from(`data: ${data}\n\n`);
  return { piece, start: 6, end: piece.length - 2 };
}

/** Read `data` the way readEvents does: in place when the template fits, else parsed (and learnt from). */
function readOne(t: ChunkTemplate, data: string): { inPlace: boolean; chunk: unknown } {
  const { piece, start, end } = bytesOf(data);
  const read = t.read(piece, start, end);
  if (read !== null) return { inPlace: true, chunk: read.chunk() };
  const chunk: unknown = JSON.parse(data);
  t.learn(data, chunk);
  return { inPlace: false, chunk };
}

describe("ChunkTemplate", () => {
  it("reads a request's step chunks in place from the second like them, each equal to JSON.parse of its text", () => {
    const t = new ChunkTemplate();
    const events = [
      step("", [200005, 35644, 200008], { prompt: [200006, 17360, 200008] }),
      step("We", [2167]),
      step(" need", [1309]),
      step(' to\nanswer "quoted" \\ é 中', [316, 6052, 392]),
      step("", []),
      step(".", [13], { finish: "stop" }),
    ].map((c) => JSON.stringify(c));
    const read = events.map((e) => readOne(t, e));
    for (let k = 0; k < events.length; k++) expect(read[k]!.chunk).toStrictEqual(JSON.parse(events[k]!));
    // the first (its prompt ids) and second (learnt from) as text; the finish differs in a literal
    expect(read.map((r) => r.inPlace)).toEqual([false, false, true, true, true, false]);
  });

  it("an older vLLM's usage: null and SGLang's key order are templates too; the usage chunk is none", () => {
    const t = new ChunkTemplate();
    const a = JSON.stringify(step("a", [64], { usage: true }));
    const b = JSON.stringify(step("b", [65], { usage: true }));
    expect(readOne(t, a).inPlace).toBe(false);
    expect(readOne(t, b)).toStrictEqual({ inPlace: true, chunk: JSON.parse(b) });
    // ids before the text
    const u = new ChunkTemplate();
    const order = (text: string, ids: number[]) =>
      JSON.stringify({ ...HEAD, choices: [{ index: 0, token_ids: ids, text, finish_reason: null }] });
    readOne(u, order("x", [1]));
    expect(readOne(u, order("y\t", [2, 3]))).toStrictEqual({ inPlace: true, chunk: JSON.parse(order("y\t", [2, 3])) });
    const usage = JSON.stringify({ ...HEAD, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } });
    expect(readOne(u, usage).inPlace).toBe(false);
  });

  it("takes no template it cannot prove: values that are objects, two choices, a text with an escape, a key twice, a finish", () => {
    const none = (chunk: unknown, data = JSON.stringify(chunk)) => expect(ChunkTemplate.shapeOf(data, chunk)).toBeNull();
    const lp = step("a", [64]);
    (lp.choices as Record<string, unknown>[])[0]!.logprobs = { tokens: ["a"], token_logprobs: [-0.1] };
    none(lp);
    none({ ...HEAD, usage: { prompt_tokens: 1, completion_tokens: 1 }, choices: step("a", [64]).choices });
    none({ ...HEAD, choices: [...(step("a", [1]).choices as unknown[]), ...(step("b", [2]).choices as unknown[])] });
    none(step('say "hi"', [1]));
    // the text a later key overrides: filling the first "text" changes nothing JSON.parse keeps
    const twice = '{"choices":[{"index":0,"text":"a","text" :"b","token_ids":[1]}]}';
    none(JSON.parse(twice), twice);
    // a key twice, the later copy (which JSON.parse keeps) holding what a probe might be: the holes are in the copy it
    // drops (found in review: the probes must differ from the values the chunk has, not only from the holes' bytes)
    for (const dup of [
      '{"id":"c","choices":[{"index":0,"text":"a","text" :"x","token_ids":[1],"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"text":"a","text" :"y","token_ids":[1],"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"text":"a","token_ids":[1],"token_ids" :[7],"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"token_ids":[1],"text":"a","token_ids" :[8],"finish_reason":null}]}',
      '{"id":"c","choices":[{"index":0,"text":"a","token_ids":[1]}],"choices" :[{"index":0,"text" :"x","token_ids" :[7]}]}',
    ])
      none(JSON.parse(dup), dup);
    // the parse given is not the text's (outside the holes)
    none({ ...step("a", [1]), created: 5 }, JSON.stringify(step("a", [1])));
    // a choice's last chunk: nothing like it follows
    none(step("a", [1], { finish: "stop" }));
    expect(ChunkTemplate.shapeOf(JSON.stringify(step("a", [1])), step("a", [1]))).not.toBeNull();
  });

  it("leaves to the text reading every event that differs from the template but in a valid text and id list", () => {
    const t = new ChunkTemplate();
    readOne(t, JSON.stringify(step("a", [1])));
    const base = JSON.stringify(step("b", [2, 3]));
    expect(readOne(t, base).inPlace).toBe(true);
    for (const bad of [
      base.replace('"token_ids":[2,3]', '"token_ids":[02,3]'), // a leading zero: JSON refuses it
      base.replace('"token_ids":[2,3]', '"token_ids":[2,3,]'),
      base.replace('"token_ids":[2,3]', '"token_ids":[2, 3]'), // whitespace: valid, left to JSON.parse
      base.replace('"token_ids":[2,3]', '"token_ids":[2.5]'),
      base.replace('"token_ids":[2,3]', '"token_ids":[-2]'),
      base.replace('"token_ids":[2,3]', '"token_ids":[1234567890]'),
      base.replace('"text":"b"', '"text":"b\\x"'), // an escape JSON refuses
      base.replace('"text":"b"', '"text":"b\u0001"'), // a control character
      base.replace('"text":"b"', '"text":"b\\u12"'),
      `${base} `,
      base.slice(0, -1),
      base.replace('"created":1765100000', '"created":1765100001'),
    ]) {
      const { piece, start, end } = bytesOf(bad);
      expect(t.read(piece, start, end)).toBeNull();
    }
  });

  it("a match is JSON.parse's value of the event, for generated texts and ids and mangled bytes", () => {
    const template = JSON.stringify(step("t", [7]));
    const event = fc.record({
      text: fc.string({ unit: "binary", maxLength: 12 }),
      ids: fc.array(fc.nat(300_000), { maxLength: 5 }),
      // bytes of the event changed: one overwritten, inserted or removed at a position
      mangle: fc.option(
        fc.record({ at: fc.nat(400), byte: fc.integer({ min: 0, max: 255 }), how: fc.constantFrom("set", "insert", "remove") }),
        {
          freq: 2,
        },
      ),
    });
    fc.assert(
      fc.property(event, ({ text, ids, mangle }) => {
        const t = new ChunkTemplate();
        t.learn(template, JSON.parse(template));
        let bytes = Buffer.from(JSON.stringify(step(text, ids)));
        if (mangle !== null) {
          const at = mangle.at % (bytes.length + 1);
          const b = Buffer.from([mangle.byte]);
          if (mangle.how === "set" && at < bytes.length) bytes[at] = mangle.byte;
          else if (mangle.how === "insert") bytes = Buffer.concat([bytes.subarray(0, at), b, bytes.subarray(at)]);
          else bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]);
        }
        const piece = Buffer.concat([Buffer.from("data: "), bytes, Buffer.from("\n\n")]);
        const read = t.read(piece, 6, piece.length - 2);
        let parsed: unknown = undefined;
        try {
          parsed = JSON.parse(bytes.toString("utf8"));
        } catch {
          // not JSON: the template must not have read it
          expect(read).toBeNull();
          return;
        }
        if (read !== null) {
          expect(read.chunk()).toStrictEqual(parsed);
          // what a reader of the filled event takes without the chunk: the same text and ids
          const choice = (parsed as { choices: { text: string; token_ids: number[] }[] }).choices[0]!;
          expect(read.text).toBe(choice.text);
          expect(read.ids).toStrictEqual(choice.token_ids);
        }
        // an unchanged event of plain ids is always read in place
        if (mangle === null) expect(read).not.toBeNull();
      }),
      { numRuns: 3000 },
    );
  });

  it("keeps a template a choice: n = 2's chunks, alternating, are read in place", () => {
    const t = new ChunkTemplate();
    const of = (index: number, text: string, ids: number[]) => {
      const c = step(text, ids);
      (c.choices as Record<string, unknown>[])[0]!.index = index;
      return JSON.stringify(c);
    };
    const read = [];
    for (let k = 0; k < 40; k++) read.push(readOne(t, of(k % 2, `t${k}`, [k + 1])));
    expect(read.slice(0, 2).map((r) => r.inPlace)).toEqual([false, false]);
    expect(read.slice(2).every((r) => r.inPlace)).toBe(true);
    for (let k = 0; k < 40; k++) expect(read[k]!.chunk).toStrictEqual(JSON.parse(of(k % 2, `t${k}`, [k + 1])));
  });

  it("a template is its own copy: the chunk it was learnt from, changed by its reader, changes nothing read after", () => {
    const t = new ChunkTemplate();
    const first = JSON.stringify(step("a", [1]));
    const chunk = JSON.parse(first) as Record<string, unknown>;
    t.learn(first, chunk);
    chunk.model = "changed";
    ((chunk.choices as unknown[])[0] as Record<string, unknown>).index = 9;
    const next = JSON.stringify(step("b", [2]));
    expect(readOne(t, next)).toStrictEqual({ inPlace: true, chunk: JSON.parse(next) });
  });

  it("learns at most MAX_TEMPLATES times a request, not again while its template fits, and never from a long event", () => {
    const t = new ChunkTemplate();
    const shapeOf = ChunkTemplate.shapeOf;
    let learnt = 0;
    ChunkTemplate.shapeOf = (d, c) => (learnt++, shapeOf(d, c));
    try {
      const usage = JSON.stringify({ ...HEAD, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
      for (let k = 0; k < MAX_TEMPLATES + 5; k++) readOne(t, usage);
      expect(learnt).toBe(MAX_TEMPLATES);
      const u = new ChunkTemplate();
      learnt = 0;
      for (let k = 0; k < 20; k++) readOne(u, JSON.stringify(step(k % 3 === 2 ? "a\nb" : "c", [k + 1])));
      expect(learnt).toBe(1);
      // nor from a long event (its proof would parse it twice more)
      const w = new ChunkTemplate();
      learnt = 0;
      readOne(w, JSON.stringify(step("a", new Array<number>(MAX_TEMPLATE_CHARS).fill(1))));
      expect(learnt).toBe(0);
    } finally {
      ChunkTemplate.shapeOf = shapeOf;
    }
  });
});
