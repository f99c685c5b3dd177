/**
 * Container-aware defaults (src/service/service.ts): the cgroup CPU and
 * memory limits, read from cgroup v2 or v1 files laid out in a temporary
 * directory as the kernel lays them out.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cgroupCpuLimit, cgroupMemoryLimit, defaultWorkers, usableCores } from "../../src/service/service.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fake /sys/fs/cgroup and /proc/self/cgroup: `files` by path under the root. */
function layout(self: string, files: Record<string, string>) {
  const root = mkdtempSync(path.join(tmpdir(), "hs-cgroup-"));
  dirs.push(root);
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    writeFileSync(path.join(root, f), text);
  }
  writeFileSync(path.join(root, "self"), self);
  return { root, self: path.join(root, "self") };
}

describe("cgroup limits", () => {
  it("v2: cpu.max and memory.max of the process's cgroup, the tightest on the way up", () => {
    const p = layout("0::/kubepods/pod1/c1\n", {
      "cpu.max": "max 100000\n",
      "kubepods/pod1/cpu.max": "400000 100000\n",
      "kubepods/pod1/c1/cpu.max": "250000 100000\n",
      "kubepods/pod1/c1/memory.max": "1073741824\n",
      "kubepods/memory.max": "max\n",
    });
    expect(cgroupCpuLimit(p)).toBe(2.5);
    expect(cgroupMemoryLimit(p)).toBe(1024 ** 3);
  });

  it("v2 inside a container's namespace (the cgroup is /): the root's files", () => {
    const p = layout("0::/\n", { "cpu.max": "150000 100000\n", "memory.max": "536870912\n" });
    expect(cgroupCpuLimit(p)).toBe(1.5);
    expect(cgroupMemoryLimit(p)).toBe(512 * 1024 ** 2);
  });

  it("no limit: max, or v1's -1 and its page-rounded 2^63", () => {
    expect(cgroupCpuLimit(layout("0::/\n", { "cpu.max": "max 100000\n", "memory.max": "max\n" }))).toBeNull();
    const v1 = layout("4:memory:/\n2:cpu,cpuacct:/\n", {
      "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
      "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
      "memory/memory.limit_in_bytes": "9223372036854771712\n",
    });
    expect(cgroupCpuLimit(v1)).toBeNull();
    expect(cgroupMemoryLimit(v1)).toBeNull();
    expect(cgroupCpuLimit(layout("", {}))).toBeNull();
  });

  it("v1: cpu.cfs_quota_us / cpu.cfs_period_us and memory.limit_in_bytes", () => {
    const p = layout("5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", {
      "cpu/docker/abc/cpu.cfs_quota_us": "300000\n",
      "cpu/docker/abc/cpu.cfs_period_us": "100000\n",
      "memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
    });
    expect(cgroupCpuLimit(p)).toBe(3);
    expect(cgroupMemoryLimit(p)).toBe(2 * 1024 ** 3);
  });

  it("worker threads follow the CPU limit, not the node's cores", () => {
    expect(usableCores(null, 16)).toBe(16);
    expect(usableCores(2, 16)).toBe(2);
    expect(usableCores(2.5, 16)).toBe(3);
    expect(usableCores(0.5, 16)).toBe(1);
    expect(usableCores(32, 4)).toBe(4);
    expect([usableCores(2, 16), usableCores(4, 16), usableCores(1.5, 64)].map(defaultWorkers)).toEqual([0, 3, 0]);
  });
});
