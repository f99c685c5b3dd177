/** The `parse` command, in process (same code path as the binary). */
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { BATCH_TUNING, parseIdList, readLines, runParse, type ParseCommandOptions } from "../../src/commands/parse.js";
import { fcParams, harmony, loadJsonl } from "../helpers.js";

const { enc } = harmony();
const defaults: ParseCommandOptions = {
  input: "ids",
  role: "assistant",
  strict: false,
  nonStrict: false,
  output: "events",
  batch: false,
};

async function run(stdin: string | string[], opts: Partial<ParseCommandOptions>, tuning = BATCH_TUNING) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (c) => (out += c));
  stderr.on("data", (c) => (err += c));
  const pieces = typeof stdin === "string" ? [stdin] : stdin;
  const code = await runParse({ ...defaults, ...opts }, { stdin: Readable.from(pieces), stdout, stderr }, enc, tuning);
  return {
    code,
    lines: out
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l)),
    err,
  };
}

describe("parse", () => {
  it("reads ids separated by spaces, commas or as a JSON array", () => {
    expect(parseIdList("1 2,3\n4")).toEqual([1, 2, 3, 4]);
    expect(parseIdList("[5, 6]")).toEqual([5, 6]);
    expect(parseIdList("  ")).toEqual([]);
  });

  it("prints events for Harmony text", async () => {
    const r = await run("<|channel|>final<|message|>Hi!<|return|>\n", { input: "text" });
    expect(r.code).toBe(0);
    expect(r.lines.map((e) => e.type)).toEqual(["message_start", "delta", "message_end", "done"]);
  });

  it("prints the messages object, strict errors included", async () => {
    const ids = enc.encode("<|channel|>final<|message|>A<|end|><|return|>").join(" ");
    const r = await run(ids, { strict: true, output: "messages" });
    expect(r.lines).toEqual([
      {
        messages: [{ role: "assistant", content: "A", channel: "final" }],
        first_error: { message: "Unexpected token 200002 while expecting start token 200006", index: 5, token: 200002 },
        recoveries: [],
      },
    ]);
  });

  it("rejects ids that are not integers with a code and status 2", async () => {
    const r = await run("1 2 x", {});
    expect(r.code).toBe(2);
    expect(r.err).toContain("bad_token_id");
  });

  it("answers a batch line per case, in order, matching the reference in strict mode", async () => {
    const cases = loadJsonl("malformed.jsonl").slice(0, 40);
    const input = cases.map((c) => JSON.stringify({ id: c.id, tokens: c.tokens, role: c.role })).join("\n");
    const r = await run(input, { batch: true, strict: true });
    expect(r.code).toBe(0);
    expect(r.lines.map((l) => l.id)).toEqual(cases.map((c) => c.id));
    for (const [i, c] of cases.entries()) {
      expect(r.lines[i].messages).toEqual(c.reference.messages);
      const fe = c.reference.first_error;
      expect(r.lines[i].first_error).toEqual(
        fe && { message: fe.message, index: fe.index === "eos" ? c.tokens.length : fe.index, token: fe.token ?? null },
      );
    }
  });

  it("keeps going past bad batch lines, reporting each with a code", async () => {
    const good = JSON.stringify({ id: "ok", tokens: enc.encode("<|channel|>final<|message|>x<|end|>") });
    const input = [
      "not json",
      JSON.stringify({ id: "a", tokens: "nope" }),
      JSON.stringify({ id: "b", tokens: [1, 2.5] }),
      JSON.stringify({ id: "c", tokens: [1], role: "user" }),
      "[1,2]",
      good,
    ].join("\n");
    const r = await run(input, { batch: true });
    expect(r.code).toBe(2);
    expect(r.lines.map((l) => l.error?.code ?? "ok")).toEqual(["bad_json", "bad_tokens", "bad_token_id", "bad_role", "bad_case", "ok"]);
    expect(r.lines.at(-1).messages).toEqual([{ role: "assistant", content: "x", channel: "final" }]);
  });

  it("answers a large batch in one run (its speed is measured in bench/)", async () => {
    const cases = loadJsonl("wellformed.jsonl");
    const input = Array.from({ length: 4 }, () => cases.map((c) => JSON.stringify({ id: c.id, tokens: c.tokens, role: c.role })))
      .flat()
      .join("\n");
    const r = await run(input, { batch: true, strict: true });
    expect(r.lines).toHaveLength(1200);
  });

  it("answers a batch the same with a helper thread as without, every kind of line and its number, in order", async () => {
    // the helper (workers/batch.ts, a real thread) from the first byte, a unit every few lines: each line's
    // answer may come from either thread, and the answers must be the one thread's, byte for byte
    const cases = loadJsonl("wellformed.jsonl");
    const lines: string[] = [];
    for (const [i, c] of cases.entries()) {
      const r = i % 11;
      if (r === 1) lines.push("");
      else if (r === 2) lines.push(`{"id":"x${i}","tokens":[1,2,"a"]}`);
      else if (r === 3) lines.push(`not json ${i}`);
      else if (r === 4) lines.push(JSON.stringify({ id: `r${i}`, role: null, tokens: c.tokens }));
      else if (r === 5) lines.push(`{"id": "s${i}", "tokens": ${JSON.stringify(c.tokens)}}\r`);
      else if (r === 6) lines.push("[1,2,3]");
      lines.push(JSON.stringify({ id: c.id, tokens: c.tokens }));
    }
    const input = lines.join("\n");
    // the input cut into pieces of ~2 KiB, as a pipe cuts it (a unit is what one read gives)
    const pieces: string[] = [];
    for (let at = 0; at < input.length; at += 2048) pieces.push(input.slice(at, at + 2048));
    const answer = (helper: boolean) => run(pieces, { batch: true }, { ...BATCH_TUNING, helper, helperAfterBytes: 0, unitBytes: 1024 });
    const one = await answer(false);
    const two = await answer(true);
    expect(one.code).toBe(2);
    expect(two).toEqual(one);
    const errors = one.lines.filter((l) => l.error?.code === "bad_json");
    expect(errors.length).toBeGreaterThan(10);
    // the line numbers in the messages are the input's (line 6 is the first "not json": lines 2 and 4 are a blank and a bad id)
    expect(errors[0].error.message).toMatch(/^line 6 is not usable JSON/);
  });

  it("answers a batch line of the plain shape as the general path answers the same case spaced out", async () => {
    // `{"id":"…","tokens":[…]}` is read from its bytes; with a space anywhere it takes JSON.parse and the checks
    const raw = async (lines: string[]) => {
      const stdout = new PassThrough();
      let out = "";
      stdout.on("data", (c) => (out += c));
      const code = await runParse(
        { ...defaults, batch: true },
        { stdin: Readable.from([lines.join("\n")]), stdout, stderr: new PassThrough() },
        enc,
      );
      // JSON.parse's messages name a position (and, from Node 22, a line and column), one further on in the spaced line
      return { code, out: out.replace(/position \d+/g, "position N").replace(/\(line \d+ column \d+\)/g, "(line L column C)") };
    };
    const spaced = (line: string) => `{ ${line.slice(1)}`;
    const hi = enc.encode('<|channel|>final<|message|>Hi “there” \\ "x"\n\t\u0001<|return|>').join(",");
    const edges = [
      `{"id":"a","tokens":[${hi}]}`,
      `{"id":"","tokens":[]}`,
      `{"id":"a","tokens":[0]}`,
      `{"id":"a","tokens":[0,0,1]}`,
      `{"id":"a","tokens":[01]}`,
      `{"id":"a","tokens":[1,]}`,
      `{"id":"a","tokens":[,1]}`,
      `{"id":"a","tokens":[1,,2]}`,
      `{"id":"a","tokens":[-1]}`,
      `{"id":"a","tokens":[-0]}`,
      `{"id":"a","tokens":[1e3]}`,
      `{"id":"a","tokens":[1.0]}`,
      `{"id":"a","tokens":[1.5]}`,
      `{"id":"a","tokens":[999999999]}`,
      `{"id":"a","tokens":[1000000000]}`,
      `{"id":"a","tokens":[99999999999999999999]}`,
      `{"id":"a","tokens":[1]]}`,
      `{"id":"a","tokens":[1]}}`,
      `{"id":"a","tokens":[1],"x":[2]}`,
      `{"id":"a","tokens":[1],"role":null}`,
      `{"id":"a\\"b","tokens":[1]}`,
      `{"id":"a\\u0041","tokens":[1]}`,
      `{"id":"é","tokens":[1]}`,
      `{"id":"a","id":"b","tokens":[1]}`,
      `{"id":"a","tokens":"1"}`,
      `{"id":"a","tokens":[1]`,
      `{"id":"a`,
    ];
    const a = await raw(edges);
    const b = await raw(edges.map(spaced));
    expect(a).toEqual(b);
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            id: fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: "binary", maxLength: 4 })),
            tokens: fc.array(fc.oneof(fc.nat(200_100), fc.constantFrom(200_002, 200_005, 200_006, 200_007, 200_008, 200_012)), {
              maxLength: 40,
            }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        async (cases) => {
          const lines = cases.map((c) => JSON.stringify(c));
          expect(await raw(lines)).toEqual(await raw(lines.map(spaced)));
        },
      ),
      fcParams(100),
    );
  });

  it("reads batch lines as they arrive, however the input is cut, with a bound on a line's bytes", async () => {
    const collect = async (chunks: Buffer[], max?: number) => {
      const out: (string | null)[] = [];
      for await (const lines of readLines(Readable.from(chunks), max)) out.push(...lines);
      return out;
    };
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string({ unit: "grapheme", maxLength: 30 }), fc.constant("x".repeat(40))), { maxLength: 8 }),
        fc.boolean(),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 6 }),
        async (lines, crlf, last, cuts) => {
          const text = lines.map((l) => l + (crlf ? "\r\n" : "\n")).join("") + (last ? "tail" : "");
          const bytes = Buffer.from(text);
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...at, bytes.length].slice(1).map((end, i, ends) => bytes.subarray(i === 0 ? 0 : ends[i - 1], end));
          // the bound counts a line's bytes before its newline, a CR among them
          const want = [...lines.map((l) => (Buffer.byteLength(l) + (crlf ? 1 : 0) > 32 ? null : l)), ...(last ? ["tail"] : [])];
          expect(
            await collect(
              chunks.filter((c) => c.length > 0),
              32,
            ),
          ).toEqual(want);
        },
      ),
      fcParams(300),
    );
  });

  it("refuses a batch line past the bound with line_too_long and answers the lines after it", async () => {
    const good = JSON.stringify({ id: "ok", tokens: enc.encode("<|channel|>final<|message|>x<|end|>") });
    const stdout = new PassThrough();
    let out = "";
    stdout.on("data", (c) => (out += c));
    const huge = Buffer.alloc(65 * 1024 * 1024, 0x20);
    const input = Readable.from([
      Buffer.from(good + "\n"),
      huge.subarray(0, 40 << 20),
      huge.subarray(40 << 20),
      Buffer.from("\n" + good + "\n"),
    ]);
    const code = await runParse({ ...defaults, batch: true }, { stdin: input, stdout, stderr: new PassThrough() }, enc);
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(code).toBe(2);
    expect(lines.map((l) => l.error?.code ?? l.id)).toEqual(["ok", "line_too_long", "ok"]);
  });
});
