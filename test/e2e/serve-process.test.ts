/** The real binary: `serve` starts with flags, drains on SIGTERM and exits. */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import { applyV8Flag, resolveOptions, resolveV8Settings } from "../../src/commands/serve.js";
import { V8_DEFAULTS } from "../../src/core/defaults.js";
import { defaultWorkers, usableCores } from "../../src/service/service.js";
import { wsMasking } from "../../src/transport/http.js";
import { harmony } from "../helpers.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { enc } = harmony();

describe("harmony-sidecar serve", () => {
  it("reads flags over environment over defaults, and rejects bad values", () => {
    const o = resolveOptions({ port: "9000" }, { HARMONY_PORT: "9100", HARMONY_GRPC_PORT: "-1", HARMONY_TOKEN: "t" });
    expect(o).toMatchObject({ host: "127.0.0.1", port: 9000, grpcPort: -1, token: "t" });
    expect(resolveOptions({}, {})).toMatchObject({ port: 8765, grpcPort: 8766, token: undefined });
    expect(() => resolveOptions({ workers: "zero" }, {})).toThrow(/--workers/);
    expect(resolveOptions({ workers: "0", inline: "4" }, {})).toMatchObject({ workers: 0, inline: 4 });
    expect(resolveOptions({}, { HARMONY_INLINE: "0" })).toMatchObject({ inline: 0 });
    expect(() => resolveOptions({ inline: "-1" }, {})).toThrow(/--inline/);
    // an empty variable is unset (it used to read as 0: a random port); other non-decimal values are errors
    expect(resolveOptions({}, { HARMONY_PORT: "", HARMONY_WORKERS: "" })).toMatchObject({
      port: 8765,
      workers: defaultWorkers(usableCores()),
    });
    expect(() => resolveOptions({ port: "" }, {})).toThrow(/^--port must be an integer from 0 to 65535, got ""$/);
    expect(() => resolveOptions({ workers: "0x2" }, {})).toThrow(/--workers/);
    expect(() => resolveOptions({}, { HARMONY_MAX_STREAMS: "1e3" })).toThrow(
      /^--max-streams \(set by HARMONY_MAX_STREAMS\) must be an integer ≥ 1, got "1e3"$/,
    );
    expect(resolveOptions({}, { HARMONY_COT_STORE_BYTES: "0" }).cotStore).toMatchObject({ maxBytes: 0 });
    expect(resolveOptions({ cotStoreTtlMs: "60000" }, {}).cotStore).toMatchObject({ ttlMs: 60000, maxBytes: 64 * 1024 * 1024 });
  });

  it("gives V8 its two settings (heap growth, inlining budget) unless one is 0 or node has its own flag", () => {
    const v8 = (heapGrowth: number, inlineBudget: number) => [
      { flag: "--heap-growing-percent", value: heapGrowth },
      { flag: "--max-inlined-bytecode-size-cumulative", value: inlineBudget },
    ];
    const defaults = v8(V8_DEFAULTS.heapGrowth, V8_DEFAULTS.inlineBudget);
    expect(resolveV8Settings({}, {})).toEqual(defaults);
    expect(resolveV8Settings({}, { HARMONY_HEAP_GROWTH: "0", HARMONY_INLINE_BUDGET: "0" })).toEqual(v8(0, 0));
    expect(
      resolveV8Settings({ heapGrowth: "150", inlineBudget: "2000" }, { HARMONY_HEAP_GROWTH: "0", HARMONY_INLINE_BUDGET: "0" }),
    ).toEqual(v8(150, 2000));
    for (const bad of ["-1", "1001", "1.5", "lots", "", "1e2", "0x12c"])
      expect(() => resolveV8Settings({ heapGrowth: bad }, {})).toThrow(/^--heap-growth must be an integer from 0 to 1000/);
    for (const bad of ["-1", "100001", "1.5", "", "3e3"])
      expect(() => resolveV8Settings({ inlineBudget: bad }, {})).toThrow(/^--inline-budget must be an integer from 0 to 100000/);
    expect(resolveV8Settings({}, { HARMONY_HEAP_GROWTH: "", HARMONY_INLINE_BUDGET: "" })).toEqual(defaults);
    const given: string[] = [];
    const node = (execArgv: string[]) => ({ execArgv, setFlags: (f: string) => given.push(f) });
    expect(applyV8Flag("--heap-growing-percent", 300, node(["--max-old-space-size=512"]))).toBe("set");
    expect(applyV8Flag("--max-inlined-bytecode-size-cumulative", 3000, node(["--max-inlined-bytecode-size=500"]))).toBe("set");
    expect(given).toEqual(["--heap-growing-percent=300", "--max-inlined-bytecode-size-cumulative=3000"]);
    expect(applyV8Flag("--heap-growing-percent", 0, node([]))).toBe("off");
    expect(applyV8Flag("--heap-growing-percent", 300, node(["--heap-growing-percent=100"]))).toBe("node flag");
    expect(applyV8Flag("--heap-growing-percent", 300, node(["--heap_growing_percent", "50"]))).toBe("node flag");
    expect(applyV8Flag("--max-inlined-bytecode-size-cumulative", 3000, node(["--max_inlined_bytecode_size_cumulative=920"]))).toBe(
      "node flag",
    );
    expect(given).toHaveLength(2);
  });

  it("says whether ws unmasks natively: bufferutil's binary where it has one for this platform, else a JS loop", () => {
    const prebuilt = existsSync(
      fileURLToPath(new URL(`../../node_modules/bufferutil/prebuilds/${process.platform}-${process.arch}/`, import.meta.url)),
    );
    const saved = process.env.WS_NO_BUFFER_UTIL;
    try {
      delete process.env.WS_NO_BUFFER_UTIL;
      expect(wsMasking()).toBe(prebuilt ? "native" : "js");
      process.env.WS_NO_BUFFER_UTIL = "1";
      expect(wsMasking()).toBe("js");
    } finally {
      if (saved === undefined) delete process.env.WS_NO_BUFFER_UTIL;
      else process.env.WS_NO_BUFFER_UTIL = saved;
    }
    expect(resolveOptions({ cotStoreBytes: String(2 ** 30) }, {}).cotStore?.maxBytes).toBe(2 ** 30);
    expect(() => resolveOptions({ cotStoreBytes: String(2 ** 30 + 1) }, {})).toThrow(
      /--cot-store-bytes must be an integer from 0 to 1073741824/,
    );
  });

  it("defaults to no worker threads on 1 or 2 cores, CPU count − 1 (at most 8) beyond", () => {
    expect([1, 2, 3, 4, 8, 16].map(defaultWorkers)).toEqual([0, 0, 2, 3, 7, 8]);
    expect(resolveOptions({}, {})).toMatchObject({ workers: defaultWorkers(usableCores()), inline: 16 });
  });

  it("drains open streams on SIGTERM and exits 0", async () => {
    const child = spawn(process.execPath, [CLI, "serve", "--port", "0", "--grpc-port", "-1", "--workers", "1"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const lines = createInterface({ input: child.stdout! });
    const logs: Record<string, unknown>[] = [];
    const port = await new Promise<number>((resolve, reject) => {
      lines.on("line", (l) => {
        const rec = JSON.parse(l) as Record<string, unknown>;
        logs.push(rec);
        if (rec.msg === "harmony-sidecar serving") resolve(rec.port as number);
      });
      child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const client = await HarmonyClient.connect(`ws://127.0.0.1:${port}/v1/stream`);
    const st = client.open("s");
    st.write(enc.encode("<|channel|>final<|message|>partial"));
    // wait until the worker answered, so the stream is live
    const first = await st[Symbol.asyncIterator]().next();
    expect(first.value).toMatchObject({ type: "message_start" });
    child.kill("SIGTERM");
    const rest = await st.collect();
    expect(rest.find((e) => e.type === "error")).toMatchObject({ code: "shutting_down" });
    expect(rest.at(-1)).toMatchObject({ type: "done", finish_reason: "abort" });
    expect(await exited).toBe(0);
    expect(logs.some((l) => l.msg === "stopped")).toBe(true);
    const serving = logs.find((l) => l.msg === "harmony-sidecar serving")!;
    expect(serving.ws_masking).toBe(wsMasking());
    const v8 = logs.filter((l) => l.msg === "V8 flag");
    expect(v8).toEqual([
      expect.objectContaining({ flag: "--heap-growing-percent", value: V8_DEFAULTS.heapGrowth, outcome: "set" }),
      expect.objectContaining({ flag: "--max-inlined-bytecode-size-cumulative", value: V8_DEFAULTS.inlineBudget, outcome: "set" }),
    ]);
    await client.close();
  });
});
