/**
 * The OpenAI front's log line for an answer the parser repaired: the
 * response id the client got (`chatcmpl-…`, `resp_…`), the choice, the
 * repairs by kind, and an `/inspect` link that reproduces the parse (the
 * completion's token ids, the declared tools and the calls allowed), so an
 * operator gets from a bad answer to the page that shows what happened.
 *
 * A choice's ids are kept as they go to the parser, up to
 * {@link MAX_LINK_IDS}; a longer completion's line says so instead of
 * linking (a log line of hundreds of kilobytes helps nobody).
 */
import type { Service } from "../service/service.js";

/** The most ids an inspect link holds (a link of about 60 KB). */
export const MAX_LINK_IDS = 8192;

/** The token ids of each choice of one generation, as the parser got them (the ids the sidecar put in too). */
export class GeneratedIds {
  private readonly ids: number[][] = [];
  private readonly over: boolean[] = [];
  private readonly counts: number[] = [];

  add(choice: number, ids: readonly number[]): void {
    const kept = (this.ids[choice] ??= []);
    this.counts[choice] = (this.counts[choice] ?? 0) + ids.length;
    if (this.over[choice]) return;
    if (kept.length + ids.length > MAX_LINK_IDS) {
      this.over[choice] = true;
      this.ids[choice] = [];
      return;
    }
    for (const id of ids) kept.push(id);
  }

  /** The choice's ids, or null when there were more than a link holds. */
  of(choice: number): number[] | null {
    return this.over[choice] ? null : (this.ids[choice] ?? []);
  }

  count(choice: number): number {
    return this.counts[choice] ?? 0;
  }
}

/** `/inspect#ids=…` with the parse's options when they are not the page's defaults (src/inspect/logic.ts, encodeFragment). */
export function inspectLink(ids: readonly number[], tools: readonly string[], calls: string): string {
  let link = `/inspect#ids=${ids.join(",")}`;
  if (tools.length > 0) link += `&tools=${tools.map(encodeURIComponent).join(",")}`;
  if (calls !== "any") link += `&calls=${calls}`;
  return link;
}

/** Log a repaired choice (nothing when the parser repaired nothing). */
export function logRepaired(
  svc: Pick<Service, "logger">,
  what: { response: string; choice: number; recoveries: Record<string, number> | undefined; tools: readonly string[]; calls: string },
  ids: GeneratedIds,
): void {
  const recoveries = what.recoveries;
  if (!recoveries || Object.keys(recoveries).length === 0) return;
  const kept = ids.of(what.choice);
  svc.logger.warn(
    {
      response: what.response,
      choice: what.choice,
      recoveries,
      ...(kept !== null
        ? { inspect: inspectLink(kept, what.tools, what.calls) }
        : {
            inspect: null,
            inspect_omitted: `the completion is ${ids.count(what.choice)} ids, more than the ${MAX_LINK_IDS} a link holds`,
          }),
    },
    "recovered malformed model output",
  );
}
