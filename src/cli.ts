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
import { FAULT_KINDS } from "./loadtest/generate.js";

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
  .description("hammer a server with fault-injected gpt-oss streams and prove nothing is lost")
  .option("--url <ws-url>", "a running server's WebSocket URL (ws://host:port/v1/stream)")
  .option("--grpc <host:port>", "a running server's gRPC address")
  .option("--token <secret>", "bearer token for the server")
  .option("--streams <n>", "streams to run", "2000")
  .option("--concurrency <n>", "streams open at once", "256")
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
  .option("--only <index>", "replay one stream and print it in full")
  .option("--json <file>", "write the report as JSON")
  .option("--html <file>", "write the report as one self-contained HTML page (charts inline, no network)")
  .option("--no-progress", "no progress bar")
  .action(async (flags: LoadtestFlags) => {
    const { runLoadtestCommand } = await import("./commands/loadtest.js");
    process.exitCode = await runLoadtestCommand(flags);
  });

await program.parseAsync(process.argv);
