/**
 * The Harmony format as data. The state machine in `parser.ts` interprets
 * this object; it holds every id, word and marker the format defines.
 */
export interface HarmonyPreset {
  readonly name: string;
  /** Every id in [0, vocabLimit) decodes; ids at or above it are not tokens. */
  readonly vocabLimit: number;
  /** First id of the special-token block (ids below it are BPE text). */
  readonly firstSpecial: number;
  /** Named special tokens, id by literal text. */
  readonly specials: Readonly<Record<string, number>>;
  /** Literal text of the reserved specials that have no other name. */
  readonly reservedName: (id: number) => string;
  readonly tokens: {
    readonly start: number;
    readonly message: number;
    readonly channel: number;
    readonly constrain: number;
    readonly end: number;
    readonly return: number;
    readonly call: number;
  };
  /** Tokens that end a message's content. */
  readonly stopTokens: readonly number[];
  /** Textual markers as they appear in a decoded header. */
  readonly markers: { readonly channel: string; readonly constrain: string; readonly recipient: string };
  readonly roles: readonly string[];
  readonly channels: {
    readonly reasoning: string;
    readonly commentary: string;
    readonly final: string;
  };
  /** Channel given to text that arrived with no header at all. */
  readonly headerlessChannel: string;
  /** Role assumed for an implicit `<|start|>` (a header with no start token). */
  readonly implicitRole: string;
  /** The recipient that addresses the model itself (tool results). */
  readonly selfRecipient: string;
}

const NAMED_SPECIALS: Record<string, number> = {
  "<|startoftext|>": 199998,
  "<|endoftext|>": 199999,
  "<|return|>": 200002,
  "<|constrain|>": 200003,
  "<|channel|>": 200005,
  "<|start|>": 200006,
  "<|end|>": 200007,
  "<|message|>": 200008,
  "<|call|>": 200012,
};

/**
 * o200k_harmony as openai-harmony v0.0.8 builds it: o200k_base ranks
 * 0..199997, the named specials above, and `<|reserved_N|>` for every other
 * id up to and including 201088.
 */
export const HARMONY: HarmonyPreset = Object.freeze({
  name: "o200k_harmony",
  vocabLimit: 201089,
  firstSpecial: 199998,
  specials: Object.freeze({ ...NAMED_SPECIALS }),
  reservedName: (id: number) => `<|reserved_${id}|>`,
  tokens: Object.freeze({
    start: 200006,
    message: 200008,
    channel: 200005,
    constrain: 200003,
    end: 200007,
    return: 200002,
    call: 200012,
  }),
  stopTokens: Object.freeze([200002, 200007, 200012]),
  markers: Object.freeze({ channel: "<|channel|>", constrain: "<|constrain|>", recipient: "to=" }),
  roles: Object.freeze(["user", "assistant", "system", "developer", "tool"]),
  channels: Object.freeze({ reasoning: "analysis", commentary: "commentary", final: "final" }),
  headerlessChannel: "final",
  implicitRole: "assistant",
  selfRecipient: "assistant",
});

/** Literal text of a special id under `preset`, or undefined for a BPE id. */
export function specialText(preset: HarmonyPreset, id: number): string | undefined {
  if (id < preset.firstSpecial || id >= preset.vocabLimit) return undefined;
  for (const [text, sid] of Object.entries(preset.specials)) if (sid === id) return text;
  return preset.reservedName(id);
}
