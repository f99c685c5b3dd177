/**
 * The reasoning store: the chain of thought behind each tool call the
 * service emitted, by call id, so that a stateless client's next turn can
 * have it put back into the prompt (docs/protocol.md, "Rendering prompts, and restoring dropped reasoning").
 * One interface: the in-process store (./memory.ts) implements it, and the
 * service's TieredStore (./tiered.ts) puts it in front of a shared Redis or
 * Valkey store (./redis.ts) when one is configured.
 */
/** The tenant of every client when the service has no bearer token. */
export const LOCAL_TENANT = "local";

/**
 * The prefix of a tenant's keys in the store: a tool call id is only
 * recalled for the tenant whose stream emitted it, so another client that
 * learns (or guesses) a call id gets nothing.
 */
export function memoScope(tenant: string): string {
  return `${tenant}:`;
}

export interface ReasoningStore {
  /** False when remembering is switched off (a budget of 0 bytes): streams then keep no reasoning. */
  readonly enabled: boolean;
  /** Remember `utf8` (the reasoning's UTF-8 bytes) for call `id`. */
  remember(id: string, utf8: Uint8Array): void;
  /** Remember `src[start, end)`, valid only during the call. */
  rememberRange(id: string, src: Uint8Array, start: number, end: number): void;
  /** The reasoning remembered for `id`, if any. */
  recall(id: string): string | undefined;
}
