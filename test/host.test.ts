/** The session host shared by worker threads and the main thread's inline slot. */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { SessionHost } from "../src/pool/host.js";
import type { OpenSpec } from "../src/pool/task.js";
import { schema } from "../src/protocol/schema.js";
import { harmony } from "./helpers.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const { enc, vocab } = harmony();

const spec = (name: string): OpenSpec & { name: string } => ({
  name,
  role: "assistant",
  mode: "resilient",
  wholeMessages: false,
  nonStrict: false,
  callIdPrefix: "call_t_",
  rememberReasoning: true,
  format: { kind: "events" },
});

function heldBytes(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

describe("SessionHost", () => {
  it("a dropped connection's sessions are freed, including those of the last batch it answered", () => {
    const host = new SessionHost(vocab, schema());
    const ids = Uint32Array.from(enc.encode("<|channel|>analysis<|message|>We need to think about this carefully"));
    const open = (conn: number, n: number) => {
      host.begin(conn, false);
      for (let i = 1; i <= n; i++) {
        host.openStream(i, spec(`s${i}`));
        host.tokens(i, ids, 0, ids.length);
      }
      return host.finish();
    };
    open(1, 200); // warm caches (token strings, code)
    host.drop(1);
    const before = heldBytes();
    expect(open(2, 5000).sessions).toBe(5000);
    const full = heldBytes();
    expect(full - before).toBeGreaterThan(4 * 2 ** 20); // the sessions are really held (~1.7 KiB each)
    expect(host.drop(2)).toBe(0);
    const after = heldBytes();
    // what may stay is the host's reusable answer buffer (at most 1 MiB), not the sessions
    expect(after - before).toBeLessThan(1.5 * 2 ** 20);
  });

  it("answers a batch in op order and counts what it did", () => {
    const host = new SessionHost(vocab, schema());
    const ids = Uint32Array.from(enc.encode("<|channel|>final<|message|>Hello<|return|>"));
    const r = host.run({
      t: "ops",
      conn: 7,
      json: true,
      kinds: [1, 2, 3],
      sids: [1, 1, 1],
      offs: [0, 0, 0, ids.length, 0, 0],
      ids,
      extra: [
        [0, spec("a")],
        [2, "eos"],
      ],
    });
    const types = r.json!.map((t) => Object.keys(JSON.parse(t) as object).find((k) => k !== "stream"));
    expect(types).toEqual(["message_start", "delta", "message_end", "done"]);
    expect(r.counts.tokens).toBe(ids.length);
    expect(r.counts.events).toMatchObject({ delta: 1, done: 1 });
    expect(r.sessions).toBe(0);
  });
});
