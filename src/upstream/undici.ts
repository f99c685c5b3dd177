/**
 * undici (the engines' HTTP client), loaded on the first request to an
 * engine: a process that never talks to one (serve without --upstream, the
 * CLI's parse) never pays its start-up, the largest of any dependency's in
 * a profile of serve's start.
 */
import { createRequire } from "node:module";

let loaded: typeof import("undici") | undefined;

export function undici(): typeof import("undici") {
  return (loaded ??= createRequire(import.meta.url)("undici") as typeof import("undici"));
}
