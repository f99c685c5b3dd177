/** The real binary: `serve` starts with flags, drains on SIGTERM and exits. */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { HarmonyClient } from "../../src/client/index.js";
import { applyHeapGrowth, DEFAULT_HEAP_GROWTH, resolveHeapGrowth, resolveOptions } from "../../src/commands/serve.js";
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
    expect(() => resolveOptions({ workers: "zero" }, {})).toThrow(/workers/);
    expect(resolveOptions({ workers: "0", inline: "4" }, {})).toMatchObject({ workers: 0, inline: 4 });
    expect(resolveOptions({}, { HARMONY_INLINE: "0" })).toMatchObject({ inline: 0 });
    expect(() => resolveOptions({ inline: "-1" }, {})).toThrow(/inline/);
    // an empty variable is unset (it used to read as 0: a random port); other non-decimal values are errors
    expect(resolveOptions({}, { HARMONY_PORT: "", HARMONY_WORKERS: "" })).toMatchObject({
      port: 8765,
      workers: defaultWorkers(usableCores()),
    });
    expect(() => resolveOptions({ port: "" }, {})).toThrow(/port \(HARMONY_PORT\)/);
    expect(() => resolveOptions({ workers: "0x2" }, {})).toThrow(/workers/);
    expect(() => resolveOptions({}, { HARMONY_MAX_STREAMS: "1e3" })).toThrow(/maxStreams/);
    expect(resolveOptions({}, { HARMONY_COT_STORE_BYTES: "0" }).cotStore).toMatchObject({ maxBytes: 0 });
    expect(resolveOptions({ cotStoreTtlMs: "60000" }, {}).cotStore).toMatchObject({ ttlMs: 60000, maxBytes: 64 * 1024 * 1024 });
  });

  it("gives V8 the heap growth setting unless it is 0 or node has its own flag", () => {
    expect(resolveHeapGrowth({}, {})).toBe(DEFAULT_HEAP_GROWTH);
    expect(resolveHeapGrowth({}, { HARMONY_HEAP_GROWTH: "0" })).toBe(0);
    expect(resolveHeapGrowth({ heapGrowth: "150" }, { HARMONY_HEAP_GROWTH: "0" })).toBe(150);
    for (const bad of ["-1", "1001", "1.5", "lots", "", "1e2", "0x12c"])
      expect(() => resolveHeapGrowth({ heapGrowth: bad }, {})).toThrow(/heapGrowth \(HARMONY_HEAP_GROWTH\)/);
    expect(resolveHeapGrowth({}, { HARMONY_HEAP_GROWTH: "" })).toBe(DEFAULT_HEAP_GROWTH);
    const given: string[] = [];
    const node = (execArgv: string[]) => ({ execArgv, setFlags: (f: string) => given.push(f) });
    expect(applyHeapGrowth(300, node(["--max-old-space-size=512"]))).toBe("set");
    expect(given).toEqual(["--heap-growing-percent=300"]);
    expect(applyHeapGrowth(0, node([]))).toBe("off");
    expect(applyHeapGrowth(300, node(["--heap-growing-percent=100"]))).toBe("node flag");
    expect(applyHeapGrowth(300, node(["--heap_growing_percent", "50"]))).toBe("node flag");
    expect(given).toHaveLength(1);
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
    expect(() => resolveOptions({ cotStoreBytes: String(2 ** 30 + 1) }, {})).toThrow(/cotStoreBytes.*at most/);
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
    expect(logs.find((l) => l.msg === "V8 heap growth")).toMatchObject({ heap_growth: "set", heap_growing_percent: DEFAULT_HEAP_GROWTH });
    await client.close();
  });
});
