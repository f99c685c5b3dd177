/**
 * JSON values ↔ google.protobuf.Struct messages (as protobufjs objects).
 * The JSON mapping of a Struct is the plain object, which is what text-frame
 * clients see; binary clients decode the Struct back with `fromStruct`.
 */
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function toValue(v: unknown): Record<string, unknown> {
  if (v === null || v === undefined) return { nullValue: 0 };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  if (typeof v === "object") return { structValue: toStruct(v as Record<string, unknown>) };
  return { stringValue: String(v) };
}

export function toStruct(o: Record<string, unknown>): { fields: Record<string, unknown> } {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = toValue(v);
  return { fields };
}

export function fromValue(v: Record<string, unknown> | null | undefined): Json {
  if (!v) return null;
  if ("structValue" in v && v.structValue) return fromStruct(v.structValue as { fields?: Record<string, Record<string, unknown>> });
  if ("listValue" in v && v.listValue) return ((v.listValue as { values?: Record<string, unknown>[] }).values ?? []).map(fromValue);
  if ("stringValue" in v && typeof v.stringValue === "string") return v.stringValue;
  if ("numberValue" in v && typeof v.numberValue === "number") return v.numberValue;
  if ("boolValue" in v && typeof v.boolValue === "boolean") return v.boolValue;
  return null;
}

export function fromStruct(s: { fields?: Record<string, Record<string, unknown>> } | null | undefined): { [k: string]: Json } {
  const out: { [k: string]: Json } = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = fromValue(v);
  return out;
}
