/** The messages between the pool (main thread) and its workers. */
import type { SchemaJson } from "../protocol/schema.js";
import type { VocabTable } from "../core/vocab.js";
import type { WireEvent } from "../protocol/events.js";

export const K_OPEN = 1;
export const K_TOKENS = 2;
export const K_CLOSE = 3;

export interface OpenSpec {
  role: string | null;
  mode: "resilient" | "strict";
  wholeMessages: boolean;
  nonStrict: boolean;
  callIdPrefix: string;
  /** Keep the stream's reasoning so each tool call's CoT can be remembered. */
  rememberReasoning: boolean;
  /** The prefix of the stream's memo keys: its tenant's scope (src/store/store.ts). */
  memoScope: string;
  /** Output as parser events, or as OpenAI objects. */
  format: OutputFormat;
  /** After the stop that ends a primed completion: drop (default) or parse on (docs/resilience.md, rule 8). */
  afterStop: "drop" | "parse";
  /** Declared tools (rule 11); null: none declared. */
  tools: string[] | null;
  /** Which calls the stream may make: any, none (tool_choice none), one (parallel_tool_calls false). */
  calls: "any" | "none" | "one";
}

export type OutputFormat =
  | { kind: "events" }
  | { kind: "openai.chat"; id: string; model: string; created: number; reasoningField: "reasoning" | "reasoning_content" }
  | { kind: "openai.responses"; id: string; model: string; created: number };

/** An open op as a host receives it: the spec, the stream's name and its handle (0: none). */
export type OpenWith = OpenSpec & { name: string; handle: number };

/** The reasoning that preceded a tool call the parser emitted. */
import type { ReasoningMemo } from "../store/cot-buffer.js";

export type { ReasoningMemo };

/** The ops of one frame that belong to one worker, in frame order. */
export interface OpsTask {
  t: "ops";
  conn: number;
  /** Answer with JSON texts (text-frame clients) instead of protobuf bytes. */
  json: boolean;
  /** Answer with the events as objects (an in-process client: src/service/door.ts); implies `json`'s path, without the text. */
  objects?: boolean;
  /** Typed arrays for tasks sent to a worker (cheap to clone); plain arrays inline. */
  kinds: ArrayLike<number>;
  /** Per op: the stream's number on its connection (names travel once, with open). */
  sids: ArrayLike<number>;
  /** Per op: [start, end) into `ids` (tokens ops). */
  offs: ArrayLike<number>;
  ids: Uint32Array;
  /** For open and close ops only, in op order: [op index, open spec with the stream's name | close reason]. */
  extra: [number, OpenWith | string][];
}

/** Forget a connection's streams (it went away). */
export interface DropTask {
  t: "drop";
  conn: number;
}

/**
 * Fault drills (tests only): `crash` ends the thread as a crash would;
 * `throw` makes the handler throw, as a bug in the session code would.
 */
export type DrillTask = { t: "crash" } | { t: "throw" };

export type Task = OpsTask | DropTask | DrillTask;

export interface Counts {
  tokens: number;
  events: Record<string, number>;
  recoveries: Record<string, number>;
  errors: Record<string, number>;
}

export interface RecoveryNote {
  stream: string;
  /** For streams opened with a handle. */
  handle?: number;
  kind: string;
  at: number;
  detail: string;
}

export interface OpsResult {
  /** ServerFrame bytes (a fragment: frames concatenate) when !json. */
  bin: Uint8Array | null;
  /** One JSON text per wire event when json (and not objects). */
  json: string[] | null;
  /** The wire events themselves when objects. */
  objects?: WireEvent[] | null;
  counts: Counts;
  /** Recoveries made in this task (for warn-level logs), at most 64. */
  notes: RecoveryNote[];
  /** Reasoning to remember, per tool call emitted in this task. */
  memos: ReasoningMemo[];
  /** Streams this worker holds after the task. */
  sessions: number;
}

export interface WorkerData {
  table: VocabTable;
  /** The wire schema as JSON: a worker rebuilds it without parsing the .proto files. */
  schema: SchemaJson;
}
