/**
 * Which regular-expression engine runs a response format's `pattern`s
 * (src/service/answer-schema.ts): V8's own (backtracking), V8's linear engine
 * (`--enable-experimental-regexp-engine`, the `l` flag) and re2js, each as
 * Ajv's `code.regExp`. For each: which of a set of common patterns it
 * compiles and answers as V8's own does, a typical schema's compile and check
 * times (medians of 9), and the time of `^(a+)+$` on 28 a's and a b and on
 * 1 MiB of a's (V8's own only on the short one: the long one would run for
 * ever).
 *
 *   node dist/bench/answer-check/main.js
 */
import { setFlagsFromString } from "node:v8";
import { Ajv } from "ajv";
import { RE2JS } from "re2js";

setFlagsFromString("--enable-experimental-regexp-engine");

type Engine = ((pattern: string, u: string) => { test(s: string): boolean }) & { code: string };
const engine = (code: string, make: (p: string, u: string) => { test(s: string): boolean }): Engine =>
  Object.assign(
    (p: string, u: string) => {
      const r = make(p, u);
      return { test: (s: string) => r.test(s), toString: () => `${code}:${p}` };
    },
    { code },
  );

const ENGINES: Record<string, Engine> = {
  "V8 (backtracking)": Object.assign((p: string, u: string) => new RegExp(p, u), { code: "new RegExp" }),
  "V8 linear (l flag)": engine("v8l", (p) => new RegExp(p, "l")),
  re2js: engine("re2js", (p) => RE2JS.compile(RE2JS.translateRegExp(p), RE2JS.LOOKBEHINDS)),
};

/** Patterns of the kinds structured outputs use, and a string each matches. */
const PATTERNS: [string, string][] = [
  ["^[A-Z]{2}$", "US"],
  ["^\\d{4}-\\d{2}-\\d{2}$", "2024-01-31"],
  ["^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$", "a.b@example.com"],
  ["^\\+?[1-9]\\d{1,14}$", "+14155550123"],
  ["^[a-z0-9_-]{1,64}$", "my_name"],
  ["^\\p{Lu}\\p{Ll}+$", "Émile"],
  ["^(?<y>\\d{4})$", "2024"],
  ["^\\u00e9$", "é"],
  ["^[^\\s@]+$", "abc"],
  ["^.{1,300}$", "x"],
  ["^(?=.*[A-Z]).{8,}$", "Password1"],
  ["^(a)\\1$", "aa"],
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const time = (f: () => void) => {
  const t = performance.now();
  f();
  return performance.now() - t;
};

const schema = {
  type: "object",
  properties: {
    email: { type: "string", pattern: "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$" },
    date: { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}$" },
    tags: { type: "array", items: { type: "string", pattern: "^[a-z0-9_-]{1,32}$" } },
  },
  required: ["email"],
};
const answer = { email: "someone.else@example.com", date: "2024-05-06", tags: Array.from({ length: 20 }, (_, i) => `tag_${i}`) };

const lines = [`Answer-check engines — node ${process.version}`, ""];
lines.push(
  "| engine | common patterns compiled and answered as V8's own (of 12) | refused | typical schema: compile ms | check µs | `^(a+)+$` on 28 a's + b, ms | on 1 MiB of a's + !, ms |",
);
lines.push("|---|---:|---|---:|---:|---:|---:|");
for (const [name, regExp] of Object.entries(ENGINES)) {
  const ajv = new Ajv({ strict: false, validateSchema: false, logger: false, code: { regExp } });
  const native = new Ajv({ strict: false, validateSchema: false, logger: false });
  let same = 0;
  const refused: string[] = [];
  for (const [p, s] of PATTERNS) {
    try {
      const v = ajv.compile({ type: "string", pattern: p });
      if (v(s) === native.compile({ type: "string", pattern: p })(s)) same++;
      else refused.push(`${p} (answers differently)`);
    } catch {
      refused.push(p);
    }
  }
  let compileMs = "refused";
  let checkUs = "–";
  try {
    const compiles = Array.from({ length: 9 }, () =>
      time(() => new Ajv({ strict: false, logger: false, code: { regExp } }).compile(schema)),
    );
    const v = ajv.compile(schema);
    // 1000 checks: the median of 9 in ms is µs per check
    const checks = Array.from({ length: 9 }, () => time(() => Array.from({ length: 1000 }, () => v(answer))));
    compileMs = median(compiles).toFixed(2);
    checkUs = median(checks).toFixed(1);
  } catch {
    // the engine refuses one of the typical schema's patterns
  }
  const evil = ajv.compile({ type: "string", pattern: "^(a+)+$" });
  let short = "–";
  let long = "–";
  try {
    short = time(() => evil(`${"a".repeat(28)}b`)).toFixed(1);
    if (name !== "V8 (backtracking)") long = time(() => evil(`${"a".repeat(1 << 20)}!`)).toFixed(1);
  } catch (e) {
    short = `(${(e as Error).message.slice(0, 40)})`;
  }
  lines.push(
    `| ${name} | ${same} | ${refused.map((r) => `\`${r}\``).join(", ") || "–"} | ${compileMs} | ${checkUs} | ${short} | ${long} |`,
  );
}
console.log(lines.join("\n"));
