/**
 * Streamed answers compared whatever the timing: ready tokens coalesce.
 * Engine chunks that are read together (the loop or the client was behind)
 * go to the parser as one run, so one delta carries several tokens' text
 * (issue #35), and how many depends on timing. Two answers are compared
 * with consecutive deltas of the same text joined (and the Responses events
 * numbered again): what a client reads either way.
 */
type Obj = Record<string, unknown>;

type Piece = { key: string; text: string; set: (t: string) => void };

/** A Chat chunk that only carries one choice's text, or one call's next arguments: its (choice, field) and text; else null. */
function chatPiece(o: Obj): Piece | null {
  const choices = o.choices as Obj[] | undefined;
  if (!Array.isArray(choices) || choices.length !== 1 || o.harmony !== undefined || o.usage != null) return null;
  const c = choices[0]!;
  if (c.finish_reason !== null || c.logprobs != null) return null;
  const delta = c.delta as Obj;
  const keys = Object.keys(delta);
  if (keys.length !== 1) return null;
  const k = keys[0]!;
  if ((k === "content" || k === "reasoning" || k === "reasoning_content") && typeof delta[k] === "string") {
    return { key: `${String(c.index)}:${k}`, text: delta[k], set: (t) => (delta[k] = t) };
  }
  const calls = delta.tool_calls as Obj[] | undefined;
  if (k !== "tool_calls" || !Array.isArray(calls) || calls.length !== 1) return null;
  const call = calls[0]!;
  const fn = call.function as Obj | undefined;
  if (call.id !== undefined || !fn || Object.keys(fn).join() !== "arguments" || typeof fn.arguments !== "string") return null;
  return { key: `${String(c.index)}:call:${String(call.index)}`, text: fn.arguments, set: (t) => (fn.arguments = t) };
}

/** A Responses text or arguments delta event: the item it adds to, and its text; else null. */
function responsesPiece(o: Obj): Piece | null {
  if (typeof o.type !== "string" || !o.type.endsWith(".delta") || typeof o.delta !== "string") return null;
  return {
    key: `${o.type}:${String(o.item_id)}:${String(o.output_index)}:${String(o.content_index)}`,
    text: o.delta,
    set: (t) => (o.delta = t),
  };
}

/** `objs` with consecutive pieces of the same key joined into the first, and `sequence_number`s counted again. */
function joined(objs: Obj[], piece: (o: Obj) => Piece | null): Obj[] {
  const out: Obj[] = [];
  let last: Piece | null = null;
  for (const o of objs) {
    const p = piece(o);
    if (p !== null && last !== null && p.key === last.key) {
      last.text += p.text;
      last.set(last.text);
      continue;
    }
    out.push(o);
    last = p;
  }
  let seq = 0;
  for (const o of out) if (typeof o.sequence_number === "number") o.sequence_number = seq++;
  return out;
}

/** A streamed Chat answer's chunks or Responses answer's events with consecutive text deltas joined (mutated in place). */
export function joinedDeltas(objs: Obj[]): Obj[] {
  return joined(objs, (o) => (o.object === "chat.completion.chunk" ? chatPiece(o) : responsesPiece(o)));
}
