/**
 * Codex CLI (`@openai/codex`, its native binary from the npm package)
 * through the front: `codex exec` with a custom model provider pointing at
 * the front (`wire_api = "responses"`, in a temporary CODEX_HOME's
 * config.toml), where the model calls Codex's shell tool (`exec_command`)
 * and Codex runs it, then `codex exec resume` continues the session; with
 * the reasoning store on and off (./harness.ts).
 *
 * Codex (0.171) sends `store: false`, `include: ["reasoning.encrypted_content"]`,
 * `reasoning.summary: "auto"`, its tools as functions and one `namespace`
 * tool (`multi_agent_v1`, mapped to functions `multi_agent_v1__…`), and a
 * hosted `web_search` tool, which the sidecar refuses by name: the config
 * says `web_search = "disabled"` (docs/clients.md).
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkLoop, useRig, WEATHER_AGENT, type Agent } from "./harness.js";

const CODEX = fileURLToPath(new URL("../../../node_modules/@openai/codex/bin/codex.js", import.meta.url));

const SHELL: Agent = {
  ...WEATHER_AGENT,
  tool: "exec_command",
  args: { cmd: "echo sidecar-ok" },
  cot: "The user wants me to run echo sidecar-ok. I will call exec_command.",
  preamble: "Running the command now.",
  answerCot: "The command printed sidecar-ok. Report it.",
  answer: "The command printed sidecar-ok.",
  followUp: "Glad to help.",
};

const rig = useRig();
let dir: string;
beforeAll(async () => {
  rig.play(SHELL);
  dir = await mkdtemp(join(tmpdir(), "hs-codex-"));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  events: Record<string, unknown>[];
  stderr: string;
}

/** `codex <args> --json` with CODEX_HOME `home`, in `cwd`, stdin closed (else `exec` waits to read more of the prompt); its JSONL events. */
function codex(home: string, cwd: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CODEX, ...args], {
      cwd,
      env: { ...process.env, CODEX_HOME: home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 120_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    child.on("close", (code) => {
      const events = stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, events, stderr });
    });
  });
}

/** The completed items of a run, by their `type`. */
function items(run: Run, type: string): Record<string, unknown>[] {
  return run.events
    .filter((e) => e.type === "item.completed")
    .map((e) => e.item as Record<string, unknown>)
    .filter((i) => i.type === type);
}

describe.each(["on", "off"] as const)("Codex CLI (the reasoning store %s)", (store) => {
  it("codex exec: the model calls the shell tool, Codex runs it; codex exec resume goes on", async () => {
    const home = join(dir, `home-${store}`);
    const work = join(dir, `work-${store}`);
    await rm(home, { recursive: true, force: true });
    await mkdir(home, { recursive: true });
    await mkdir(work, { recursive: true });
    await writeFile(
      join(home, "config.toml"),
      [
        'model = "gpt-oss"',
        'model_provider = "sidecar"',
        'web_search = "disabled"',
        "[model_providers.sidecar]",
        'name = "harmony-sidecar"',
        `base_url = "${rig.fronts[store]}/v1"`,
        'wire_api = "responses"',
        "",
      ].join("\n"),
    );
    const from = rig.mark();
    const flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"];
    const first = await codex(home, work, ["exec", ...flags, "Run echo sidecar-ok and tell me what it printed."]);
    expect(first.code, first.stderr).toBe(0);
    const ran = items(first, "command_execution");
    expect(ran.map((c) => [c.command, c.exit_code])).toEqual([[expect.stringContaining("echo sidecar-ok"), 0]]);
    expect(String(ran[0]!.aggregated_output)).toContain("sidecar-ok");
    expect(items(first, "agent_message").map((m) => m.text)).toContain(SHELL.answer);
    // Codex shows the reasoning summary (the front puts the reasoning there when reasoning.summary is asked)
    expect(items(first, "reasoning").map((r) => r.text)).toEqual(expect.arrayContaining([expect.stringContaining(SHELL.cot)]));
    const thread = first.events.find((e) => e.type === "thread.started")?.thread_id;
    expect(typeof thread).toBe("string");
    const second = await codex(home, work, ["exec", "resume", ...flags, String(thread), "Thanks!"]);
    expect(second.code, second.stderr).toBe(0);
    expect(items(second, "agent_message").map((m) => m.text)).toContain(SHELL.followUp);
    checkLoop({ turns: rig.turns(from), agent: SHELL, result: "sidecar-ok" });
  });
});
