/**
 * What the commands say when they cannot start: one line that names the
 * flag (or the port) and what to do, never a stack trace. A usage error
 * (a flag or value the command refuses, a file it could not write) exits
 * with {@link USAGE_EXIT}, apart from a load test's "found losses" (1).
 */
import { accessSync, constants, statSync } from "node:fs";
import path from "node:path";
import { CodedError } from "../core/errors.js";
import { HARMONY } from "../core/preset.js";

/** The exit status of a usage error or a start-up failure. */
export const USAGE_EXIT = 2;

/** A mistake in how the command was called: said in one line, exit 2 (code `usage`). */
export class UsageError extends CodedError {
  constructor(message: string) {
    super("usage", message);
  }
}

/** `<|channel|>final<|message|>Hi!<|return|>` as the token ids an engine streams (`final` 17196, `Hi` 12194, `!` 0), for the examples. */
export const EXAMPLE_IDS = [HARMONY.tokens.channel, 17196, HARMONY.tokens.message, 12194, 0, HARMONY.tokens.return].join(" ");

/** Node's error code (`EADDRINUSE`, …), read from the error or, for grpc-js (which puts it in its text), from the message. */
function errorCode(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  const m = /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN)\b/.exec(e instanceof Error ? e.message : String(e));
  if (m) return m[1]!;
  if (/Name resolution failed/.test(e instanceof Error ? e.message : "")) return "ENOTFOUND";
  return "";
}

/**
 * Why a server could not listen on `host:port`, in one line that says what
 * to do: `flag` is the one that sets the port (`--port`, `--grpc-port`).
 */
export function listenProblem(e: unknown, where: { host: string; port: number; flag: string; what: string }): string {
  const { host, port, flag, what } = where;
  const at = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  switch (errorCode(e)) {
    case "EADDRINUSE":
      return `${what} port ${port} on ${host} is in use (another harmony-sidecar, or make run, may hold it): stop that process, or pick another port with ${flag} N (0: any free port)`;
    case "EACCES":
      return `${what} port ${port} on ${host} needs privileges this process lacks: pick a port above 1023 with ${flag} N`;
    case "EADDRNOTAVAIL":
      return `cannot listen on ${at}: ${host} is not an address of this machine; give one with --host (127.0.0.1, or 0.0.0.0 for every interface)`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `cannot listen on ${at}: the host name ${JSON.stringify(host)} does not resolve; give an address with --host (127.0.0.1, or 0.0.0.0 for every interface)`;
    default: {
      const message = (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
      return `cannot listen on ${at} (${flag}): ${message}`;
    }
  }
}

/**
 * Refuse, before any work, an output file that could not be written: its
 * directory must exist and be writable, and the path must not be a
 * directory. `flag` names the option that gave it.
 */
export function checkWritable(flag: string, file: string): void {
  const abs = path.resolve(file);
  const dir = path.dirname(abs);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // missing: said below
  }
  if (!isDir) throw new UsageError(`${flag} ${file}: the directory ${dir} does not exist; create it first, or write somewhere else`);
  try {
    if (statSync(abs).isDirectory()) throw new UsageError(`${flag} ${file} is a directory; give a file name inside it`);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    // not there yet: fine
  }
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new UsageError(`${flag} ${file}: the directory ${dir} is not writable by this user; write somewhere else`);
  }
}
