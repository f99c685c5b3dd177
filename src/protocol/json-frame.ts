/**
 * Reading the JSON form of a ClientFrame (WebSocket text frames: the
 * protobuf JSON mapping, fields by proto or lowerCamelCase name), validated
 * by hand so that every mistake gets a precise message. Errors are returned
 * as data, never thrown.
 */
import { describeValue, parseJson, isObj, type JsonObject } from "../core/json.js";
import { LIMIT_DEFAULTS } from "../core/defaults.js";
import { OP_CLOSE, OP_OPEN, OP_RENDER, OpErrors, OpList, refused, type OpError, type ReadFrame } from "./ops.js";
import { IdSink } from "./wire.js";

/** A field by its proto name or its lowerCamelCase JSON name. */
function field(o: JsonObject, name: string): unknown {
  if (name in o) return o[name];
  const camel = name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
  return o[camel];
}

function stringField(o: JsonObject, name: string): string | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : new Error(`${name} must be a string`);
}

/** A repeated string field: an array of strings (absent or null: none). */
function stringsField(o: JsonObject, name: string): string[] | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return new Error(`${name} must be an array of strings`);
  const out: string[] = [];
  for (const x of v) {
    if (typeof x !== "string") return new Error(`${name} must be an array of strings`);
    out.push(x);
  }
  return out;
}

function boolField(o: JsonObject, name: string): boolean | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return false;
  return typeof v === "boolean" ? v : new Error(`${name} must be true or false`);
}

/** A uint32 field: a number, or a decimal string as the protobuf JSON mapping allows. */
function uint32Field(o: JsonObject, name: string): number | Error {
  const v = field(o, name);
  if (v === undefined || v === null) return 0;
  const n = typeof v === "string" && /^[0-9]{1,10}$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 0xffffffff) return new Error(`${name} must be an integer in 0..2^32-1`);
  return n;
}

/** Read the JSON form (a text frame) of a ClientFrame. */
export function readJsonFrame(text: string, maxIds: number, maxOps: number = LIMIT_DEFAULTS.maxOpsPerFrame): ReadFrame {
  const fatal = (message: string): ReadFrame => refused("bad_frame", message);
  const parsed = parseJson(text);
  if (!parsed.ok)
    return parsed.code === "too_deep" ? refused("too_deep", parsed.message) : fatal(`text frame is not JSON: ${parsed.message}`);
  const doc = parsed.value;
  if (!isObj(doc)) return fatal("a ClientFrame must be a JSON object");
  const list = doc.ops ?? [];
  if (!Array.isArray(list)) return fatal("ops must be an array");
  if (list.length > maxOps) return refused("too_many_ops", `the frame carries more than ${maxOps} ops`);
  const ops = new OpList();
  const errors = new OpErrors();
  const sink = new IdSink(64);
  for (const [i, op] of list.entries()) {
    if (!isObj(op)) {
      errors.push({ code: "bad_frame", message: `ops[${i}] must be an object`, stream: "" });
      continue;
    }
    const inner = (["open", "tokens", "close", "render"] as const).filter((k) => op[k] !== undefined && op[k] !== null);
    if (inner.length !== 1) {
      errors.push({
        code: inner.length === 0 ? "unknown_op" : "bad_frame",
        message: `ops[${i}] must hold exactly one of open, tokens, close, render`,
        stream: "",
      });
      continue;
    }
    if (inner[0] === "render") {
      const body = op.render;
      const id = isObj(body) ? field(body, "request_id") : undefined;
      const json = isObj(body) ? field(body, "request_json") : undefined;
      if (typeof id !== "string" || typeof json !== "string") {
        errors.push({
          code: "bad_frame",
          message: `ops[${i}].render needs request_id and request_json strings`,
          stream: typeof id === "string" ? id : "",
        });
        continue;
      }
      ops.other({ kind: OP_RENDER, stream: id, handle: 0, json });
      continue;
    }
    const key = inner[0]!;
    const body = op[key];
    if (!isObj(body)) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key} must be an object`, stream: "" });
      continue;
    }
    const stream = stringField(body as JsonObject, "stream");
    if (stream instanceof Error) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key}: ${stream.message}`, stream: "" });
      continue;
    }
    const handle = uint32Field(body, "handle");
    if (handle instanceof Error) {
      errors.push({ code: "bad_frame", message: `ops[${i}].${key}: ${handle.message}`, stream });
      continue;
    }
    const bad = (code: OpError["code"], message: string) =>
      errors.push({ code, message: `ops[${i}].${key}: ${message}`, stream, ...(handle !== 0 && key !== "open" ? { handle } : {}) });
    if (key === "open") {
      const role = stringField(body, "role");
      const mode = stringField(body, "mode");
      const whole = boolField(body, "whole_messages");
      const nonStrict = boolField(body, "non_strict");
      const format = stringField(body, "format");
      const reasoningField = stringField(body, "reasoning_field");
      const model = stringField(body, "model");
      const afterStop = stringField(body, "after_stop");
      const tools = stringsField(body, "tools");
      const calls = stringField(body, "calls");
      const err = [role, mode, whole, nonStrict, format, reasoningField, model, afterStop, tools, calls].find((v) => v instanceof Error) as
        Error | undefined;
      if (err) {
        bad("bad_frame", err.message);
        continue;
      }
      ops.other({
        kind: OP_OPEN,
        stream,
        handle,
        role: role as string,
        mode: mode as string,
        whole_messages: whole as boolean,
        non_strict: nonStrict as boolean,
        format: format as string,
        reasoning_field: reasoningField as string,
        model: model as string,
        after_stop: afterStop as string,
        tools: tools as string[],
        calls: calls as string,
      });
    } else if (key === "close") {
      const reason = stringField(body, "reason");
      if (reason instanceof Error) {
        bad("bad_frame", reason.message);
        continue;
      }
      ops.other({ kind: OP_CLOSE, stream, handle, reason });
    } else {
      const ids = field(body, "ids") ?? [];
      if (!Array.isArray(ids)) {
        bad("bad_token_id", "ids must be an array of token ids");
        continue;
      }
      const wrong = ids.findIndex((v) => typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffffffff);
      if (wrong >= 0) {
        bad("bad_token_id", `ids[${wrong}] is not a uint32 token id: ${describeValue(ids[wrong])}`);
        continue;
      }
      if (sink.n + ids.length > maxIds) return refused("too_many_ids", `the frame carries more than ${maxIds} token ids`);
      const start = sink.n;
      for (const v of ids as number[]) sink.push(v);
      ops.tokens(stream, handle, start, sink.n);
    }
  }
  return { ops, ids: sink.ids.subarray(0, sink.n), errors: errors.done() };
}
