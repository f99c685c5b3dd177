/**
 * undici (the engines' HTTP client), loaded on the first request to an
 * engine: a process that never talks to one (serve without --upstream, the
 * CLI's parse) never pays its start-up, the largest of any dependency's in
 * a profile of serve's start.
 */
import { createRequire } from "node:module";
import type { Dispatcher } from "undici";

let loaded: typeof import("undici") | undefined;

export function undici(): typeof import("undici") {
  return (loaded ??= createRequire(import.meta.url)("undici") as typeof import("undici"));
}

let streams: Dispatcher | undefined;

/**
 * The pool the streamed generations are dispatched on: an Agent of this
 * undici's own, not the global dispatcher, which is shared by every copy of
 * undici in the process (a global symbol) and is the older one of Node's
 * own fetch once that has run first, which knows no `onResponseData`
 * handler (Node 20's undici 6: "invalid onError method").
 */
export function streamAgent(): Dispatcher {
  return (streams ??= new (undici().Agent)());
}
