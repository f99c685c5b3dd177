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
import { ALL_FAULT_KINDS, ENGINE_FAULT_KINDS, FAULT_KINDS } from "./loadtest/generate.js";

const program = new Command();
program
  .name("harmony-sidecar")
  .description("Parse gpt-oss Harmony token streams into structured events, resiliently.")
  .showHelpAfterError();

program
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

const serve = program.command("serve").description("serve parser streams over WebSocket and gRPC, with health and metrics endpoints");
if (process.argv.slice(2).some((a) => a === "serve" || a === "help")) {
  const { helpText, SETTINGS } = await import("./commands/settings.js");
  for (const setting of SETTINGS) serve.option(setting.flag, helpText(setting));
}
serve.action(async (flags: ServeFlags) => {
  const { runServe } = await import("./commands/serve.js");
  await runServe(flags);
});

program
  .command("render")
  .description("render an OpenAI-style chat request (JSON on stdin) into a Harmony prompt")
  .addOption(new Option("--output <form>", "json {ids,text,restored}, text, or ids").choices(["json", "text", "ids"]).default("json"))
  .action(async (opts: { output: "json" | "text" | "ids" }) => {
    const { runRender } = await import("./commands/render.js");
    process.exitCode = await runRender(opts, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  });

program
  .command("loadtest")
  .description("hammer a server with fault-injected gpt-oss streams and prove nothing is lost (--openai: any OpenAI-compatible endpoint)")
  .option("--url <ws-url>", "a running server's WebSocket URL (ws://host:port/v1/stream)")
  .option("--grpc <host:port>", "a running server's gRPC address")
  .option("--token <secret>", "bearer token for the server")
  .option("--streams <n>", "streams to run", "2000")
  .option("--concurrency <n>", "streams open at once (default 256), or requests in flight with --openai (default 16)")
  .option("--streams-per-frame <n>", "streams that get tokens in one frame (an engine step)", "64")
  .addOption(
    new Option("--chunking <how>", "how a stream's tokens arrive: one per op, random 1–8, whole, or --step-tokens per op")
      .choices(["one", "random", "whole", "step"])
      .default("random"),
  )
  .option("--step-tokens <n>", "tokens per op with --chunking step", "4")
  .option("--fault-rate <p>", "share of streams with one injected fault", "0.1")
  .option("--faults <kinds>", `comma-separated fault kinds, or all (${FAULT_KINDS.length} kinds)`, "all")
  .option("--seed <n>", "generator seed (failures print how to replay them)", "1")
  .option("--duration <s>", "stop opening streams after this many seconds (0: no cap)", "0")
  .addOption(new Option("--mode <mode>", "parser mode").choices(["resilient", "strict"]).default("resilient"))
  .option("--window <n>", "unanswered frames in flight", "8")
  .option("--compare-strict", "also run the same streams in strict mode and compare", false)
  .option("--handles", "name streams by numeric handle on the wire (Open.handle) instead of by name", false)
  .option("--only <index>", "replay one stream (with --openai: one request) and print it in full")
  .option("--json <file>", "write the report as JSON")
  .option("--html <file>", "write the report as one self-contained HTML page (charts inline, no network)")
  .option("--no-progress", "no progress bar")
  .option("--openai <url>", "drive an OpenAI-compatible endpoint instead (the sidecar's front, an engine's server, simulate-engine)")
  .option("--compare <url>", "with --openai: run the same requests against a second endpoint and report both side by side")
  .option("--requests <n>", "with --openai: requests to send", "200")
  .option("--apis <list>", "with --openai: chat, responses or both (comma-separated)", "chat,responses")
  .addOption(
    new Option("--stream <how>", "with --openai: streamed requests, plain ones, or both (mixed)")
      .choices(["both", "on", "off"])
      .default("both"),
  )
  .option("--model <name>", "with --openai: the model to name (default: the target's first in GET /v1/models)")
  .option("--timeout-ms <n>", "with --openai: abandon a request after this long", "120000")
  .option("--run-id <id>", "with --openai: names the run's requests in their prompts (the simulator reports by it; default random)")
  .action(async (flags: LoadtestFlags) => {
    const { runLoadtestCommand } = await import("./commands/loadtest.js");
    process.exitCode = await runLoadtestCommand(flags);
  });

program
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

await program.parseAsync(process.argv);
