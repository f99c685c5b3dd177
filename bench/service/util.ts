/** Small helpers shared by the bench's modules. */

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A progress line on stderr (the report goes to stdout). */
export const log = (s: string) => process.stderr.write(`[service-bench] ${s}\n`);
