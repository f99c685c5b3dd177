#!/usr/bin/env node
/** The `harmony-sidecar` binary: one entry point, one subcommand per job. */
import { Command, Option } from "commander";
import { runParse, type ParseCommandOptions } from "./commands/parse.js";

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
  .addOption(new Option("--output <form>", "events (JSON Lines) or messages").choices(["events", "messages"]).default("events"))
  .option("--batch", 'read JSON Lines cases {"id","tokens","role"?}; write one result line each', false)
  .action(async (opts: ParseCommandOptions) => {
    process.exitCode = await runParse(opts, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
  });

await program.parseAsync(process.argv);
