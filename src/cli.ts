#!/usr/bin/env node
/**
 * The `harmony-sidecar` binary: one entry point, one subcommand per job.
 * Each subcommand's code is loaded when it runs, so `parse` of one line
 * does not load the server: `serve`'s settings table (its flags) reads the
 * defaults of the whole service, and is loaded only when serve's flags are
 * needed (to run it or to show its help).
 */
import { Command, Option } from "commander";
import type { ParseCommandOptions } from "./commands/parse.js";
import type { ServeFlags } from "./commands/settings.js";
import type { LoadtestFlags } from "./commands/loadtest.js";
import type { SimulateFlags } from "./commands/simulate.js";
import { EXAMPLE_IDS, USAGE_EXIT } from "./commands/usage.js";
import { packageVersion } from "./commands/version.js";
import { ALL_FAULT_KINDS, ENGINE_FAULT_KINDS, FAULT_KINDS } from "./loadtest/generate.js";

/** The name the examples use: the package's binary is not on PATH unless installed globally. */
const RUN = "npx harmony-sidecar";

const program = new Command();
program
  .name("harmony-sidecar")
  .description("Parse gpt-oss Harmony token streams into structured events, resiliently.")
  .version(packageVersion(), "-V, --version", "print the version")
  // a usage error is one line and the usage line, exit 2 (not the whole help, not 1: a load test's losses are 1)
  .configureOutput({ outputError: (text, write) => write(text.replace(/\n\(Did you mean (.*)\?\)/, " (did you mean $1?)")) })
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : USAGE_EXIT));

/** After a usage error: the command's usage line and where its options are. */
function usageAfterError(cmd: Command): Command {
  const name = cmd.parent ? `harmony-sidecar ${cmd.name()}` : "harmony-sidecar";
  return cmd.showHelpAfterError(`Usage: ${name} ${cmd.usage()}  (${RUN}${cmd.parent ? ` ${cmd.name()}` : ""} --help lists them)`);
}

/** Examples at the end of a command's help: each a command line, with what it does after `#` (printed above it). */
function examples(cmd: Command, lines: string[]): Command {
  const text = lines.map((l) => {
    const at = l.indexOf("  # ");
    if (l.startsWith("# ")) return `  ${l}`;
    return at < 0 ? `  $ ${l}` : `  ${l.slice(at + 2).trim()}\n  $ ${l.slice(0, at).trim()}`;
  });
  return cmd.addHelpText("after", `\nExamples:\n${text.join("\n")}\n`);
}

examples(usageAfterError(program), [
  `${RUN} serve                                   # WebSocket + HTTP on 127.0.0.1:8765, gRPC on :8766, the inspector at /inspect`,
  `echo '<|channel|>final<|message|>Hi!<|return|>' | ${RUN} parse --input text`,
  `${RUN} loadtest                                # fault-injected streams against a server it starts itself`,
  `${RUN} <command> --help                        # a command's options and examples`,
]);

const parse = program
  .command("parse")
  .description("parse token ids (or Harmony text) from stdin")
  .addOption(new Option("--input <kind>", "what stdin holds").choices(["ids", "text"]).default("ids"))
  .addOption(
    new Option("--role <role>", "role the first header is primed with (assistant: a completion)")
      .choices(["assistant", "none"])
      .default("assistant"),
  )
  .option("--strict", "reproduce openai-harmony v0.0.8 exactly (errors instead of repairs)", false)
  .option("--non-strict", "strict mode with the reference's ParseOptions{strict:false}", false)
  .addOption(
    new Option(
      "--after-stop <what>",
      "after the <|call|> or <|return|> that ends a completion: drop the rest (one after_stop recovery) or parse on",
    )
      .choices(["drop", "parse"])
      .default("drop"),
  )
  .option("--tools <names>", "the tools the completion may call, comma-separated (others get an unknown_tool recovery)")
  .addOption(new Option("--output <form>", "events (JSON Lines) or messages").choices(["events", "messages"]).default("events"))
  .option("--batch", 'read JSON Lines cases {"id","tokens","role"?}; write one result line each', false)
  .action(async (opts: ParseCommandOptions) => {
    const { runParse } = await import("./commands/parse.js");
    process.exitCode = await runParse(opts, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  });
examples(usageAfterError(parse), [
  `echo '<|channel|>final<|message|>Hi!<|return|>' | ${RUN} parse --input text`,
  `echo '${EXAMPLE_IDS}' | ${RUN} parse                 # token ids, as an engine streams them`,
  `${RUN} parse --input text --strict < completion.txt                        # the reference parser's behaviour`,
  `${RUN} parse --batch --output messages < cases.jsonl                       # {"id","tokens"} per line, one answer each`,
]);

const serve = program.command("serve").description("serve parser streams over WebSocket and gRPC, with health and metrics endpoints");
/** serve --help's second group: limits and tuning, after what a first run needs. */
const ADVANCED_HEADING = "Advanced options (limits, stores, tuning):";
if (process.argv.slice(2).some((a) => a === "serve" || a === "help")) {
  const { helpText, SETTINGS } = await import("./commands/settings.js");
  for (const setting of SETTINGS) {
    const o = new Option(setting.flag, helpText(setting));
    if ((setting as { group?: string }).group !== "basic") o.helpGroup(ADVANCED_HEADING);
    serve.addOption(o);
  }
}
serve.action(async (flags: ServeFlags) => {
  const { runServe } = await import("./commands/serve.js");
  await runServe(flags);
});
examples(usageAfterError(serve), [
  `${RUN} serve                                             # defaults: 127.0.0.1:8765 (WebSocket, HTTP, /inspect) and :8766 (gRPC)`,
  `${RUN} serve --port 9000 --grpc-port -1                  # another port, no gRPC`,
  `${RUN} serve --upstream http://127.0.0.1:8000            # an OpenAI-compatible front for vLLM on :8000`,
  `HARMONY_TOKEN=secret ${RUN} serve --host 0.0.0.0         # every setting also reads a HARMONY_* variable`,
]);

const render = program
  .command("render")
  .description("render an OpenAI-style chat request (JSON on stdin) into a Harmony prompt")
  .addOption(new Option("--output <form>", "json {ids,text,restored}, text, or ids").choices(["json", "text", "ids"]).default("json"))
  .action(async (opts: { output: "json" | "text" | "ids" }) => {
    const { runRender } = await import("./commands/render.js");
    process.exitCode = await runRender(opts, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  });
examples(usageAfterError(render), [`echo '{"messages":[{"role":"user","content":"Hi"}]}' | ${RUN} render --output text`]);

const OPENAI_HEADING = "With --openai (any OpenAI-compatible endpoint):";
const TUNING_HEADING = "Advanced options (how streams are sent):";
const loadtestCommand = program
  .command("loadtest")
  .description("hammer a server with fault-injected gpt-oss streams and prove nothing is lost (--openai: any OpenAI-compatible endpoint)")
  .option("--url <ws-url>", "a running server's WebSocket URL (ws://host:port/v1/stream; default: start a server here)")
  .option("--grpc <host:port>", "a running server's gRPC address (host:port, no scheme)")
  .option("--token <secret>", "bearer token for the server")
  .option("--streams <n>", "streams to run", "2000")
  .option("--concurrency <n>", "streams open at once (default 256), or requests in flight with --openai (default 16)")
  .option("--fault-rate <p>", "share of streams with one injected fault", "0.1")
  .option("--faults <kinds>", `comma-separated fault kinds, or all (${FAULT_KINDS.length} kinds)`, "all")
  .option("--seed <n>", "generator seed (failures print how to replay them)", "1")
  .option("--compare-strict", "also run the same streams in strict mode and compare", false)
  .option("--json <file>", "write the report as JSON")
  .option("--html <file>", "write the report as one self-contained HTML page (charts inline, no network)")
  .option("--only <index>", "replay one stream (with --openai: one request) and print it in full")
  .addOption(
    new Option(
      "--openai <url>",
      "drive an OpenAI-compatible endpoint instead (the sidecar's front, an engine's server, simulate-engine)",
    ).helpGroup(OPENAI_HEADING),
  )
  .addOption(
    new Option("--compare <url>", "run the same requests against a second endpoint and report both side by side").helpGroup(OPENAI_HEADING),
  )
  .addOption(new Option("--requests <n>", "requests to send").default("200").helpGroup(OPENAI_HEADING))
  .addOption(new Option("--apis <list>", "chat, responses or both (comma-separated)").default("chat,responses").helpGroup(OPENAI_HEADING))
  .addOption(
    new Option("--stream <how>", "streamed requests, plain ones, or both (mixed)")
      .choices(["both", "on", "off"])
      .default("both")
      .helpGroup(OPENAI_HEADING),
  )
  .addOption(new Option("--model <name>", "the model to name (default: the target's first in GET /v1/models)").helpGroup(OPENAI_HEADING))
  .addOption(new Option("--timeout-ms <n>", "abandon a request after this long").default("120000").helpGroup(OPENAI_HEADING))
  .addOption(
    new Option("--run-id <id>", "names the run's requests in their prompts (the simulator reports by it; default random)").helpGroup(
      OPENAI_HEADING,
    ),
  )
  .addOption(
    new Option("--streams-per-frame <n>", "streams that get tokens in one frame (an engine step)").default("64").helpGroup(TUNING_HEADING),
  )
  .addOption(
    new Option("--chunking <how>", "how a stream's tokens arrive: one per op, random 1–8, whole, or --step-tokens per op")
      .choices(["one", "random", "whole", "step"])
      .default("random")
      .helpGroup(TUNING_HEADING),
  )
  .addOption(new Option("--step-tokens <n>", "tokens per op with --chunking step").default("4").helpGroup(TUNING_HEADING))
  .addOption(
    new Option("--duration <s>", "stop opening streams after this many seconds (0: no cap)").default("0").helpGroup(TUNING_HEADING),
  )
  .addOption(new Option("--mode <mode>", "parser mode").choices(["resilient", "strict"]).default("resilient").helpGroup(TUNING_HEADING))
  .addOption(new Option("--window <n>", "unanswered frames in flight").default("8").helpGroup(TUNING_HEADING))
  .addOption(
    new Option("--handles", "name streams by numeric handle on the wire (Open.handle) instead of by name")
      .default(false)
      .helpGroup(TUNING_HEADING),
  )
  .addOption(new Option("--no-progress", "no progress bar").helpGroup(TUNING_HEADING))
  .action(async (flags: LoadtestFlags) => {
    const { runLoadtestCommand } = await import("./commands/loadtest.js");
    process.exitCode = await runLoadtestCommand(flags);
  });
examples(usageAfterError(loadtestCommand), [
  `${RUN} loadtest                                          # 2,000 streams against a server it starts on a free port`,
  `${RUN} loadtest --url ws://127.0.0.1:8765/v1/stream --compare-strict --html report.html`,
  `${RUN} loadtest --grpc 127.0.0.1:8766 --streams 100000 --fault-rate 0.2 --json report.json`,
  `${RUN} loadtest --openai http://127.0.0.1:8765 --requests 2000 --concurrency 64 --html report.html`,
  `# exit status: 0 nothing lost, 1 losses or failures, 2 a usage error or a target that cannot be reached`,
]);

const simulate = program
  .command("simulate-engine")
  .description(
    "serve a vLLM-compatible gpt-oss engine without a GPU: generated completions with injected faults, for `serve --upstream` and load tests",
  )
  .option("--host <addr>", "address to bind", "127.0.0.1")
  .option("--port <n>", "port (0: any free port)", "8000")
  .option("--served-model-name <name>", "the model it serves (/v1/models; another name in a request is a 404)", "openai/gpt-oss-20b")
  .option("--max-model-len <n>", "context length (vLLM's --max-model-len)", "131072")
  .option("--tokens-per-second <n>", "ids generated per second per sequence (0: as fast as it can)", "100")
  .option("--step-tokens <n>", "ids per engine step per sequence after the first (speculative decoding: more than 1)", "1")
  .option("--stream-interval <n>", "ids gathered per streamed chunk (vLLM's --stream-interval)", "1")
  .option("--max-num-seqs <n>", "sequences generating at once; later requests wait (vLLM's --max-num-seqs)", "256")
  .option("--seed <n>", "generator seed (with a load tester's key in the prompt, a request samples the same every time)", "1")
  .option("--fault-rate <p>", "share of generations with one injected fault", "0.1")
  .option(
    "--faults <kinds>",
    `comma-separated fault kinds; engine (the ${ENGINE_FAULT_KINDS.length} an engine can emit: all but ids outside the vocabulary), all (${ALL_FAULT_KINDS.length}: ${FAULT_KINDS.length} synthetic, ${ALL_FAULT_KINDS.length - FAULT_KINDS.length} real-world shapes) or none`,
    "engine",
  )
  .option("--records <n>", "requests whose injections are kept for GET /simulate/requests", "100000")
  .addOption(
    new Option("--chat <how>", "/v1/chat/completions and /v1/responses: the raw output as text (no Harmony parser), or not served")
      .choices(["raw", "off"])
      .default("raw"),
  )
  .action(async (flags: SimulateFlags) => {
    const { runSimulateCommand } = await import("./commands/simulate.js");
    process.exitCode = await runSimulateCommand(flags);
  });
examples(usageAfterError(simulate), [
  `${RUN} simulate-engine                                   # a vLLM-compatible gpt-oss engine on 127.0.0.1:8000`,
  `${RUN} simulate-engine --port 0 --fault-rate 0.3 --tokens-per-second 0`,
  `${RUN} serve --upstream http://127.0.0.1:8000            # then the sidecar in front of it`,
]);

await program.parseAsync(process.argv);
