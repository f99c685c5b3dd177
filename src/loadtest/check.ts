/**
 * Checking a stream's events against what the model meant. A stream passes
 * only if every intended message arrives exactly (so every tool call with its
 * recipient and arguments, the answer text, the reasoning), with no protocol
 * error and a `done` at the end.
 */
import type { HarmonyEvent, ReferenceMessage } from "../core/events.js";
import { isJson } from "../core/json.js";

export const FAILURE_KINDS = [
  "missing_done",
  "protocol_error",
  "lost_tool_call",
  "wrong_arguments",
  "answer_mismatch",
  "reasoning_lost",
  "silent_empty_turn",
  "message_mismatch",
  "call_end_mismatch",
] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export interface Observed {
  messages: ReferenceMessage[];
  recoveries: string[];
  errors: { code: string; message: string }[];
  raw: string[];
  done: boolean;
  /** Per tool call message (by message index): its tool_call_end's arguments, or null when none came. */
  callEnds: { message: number; arguments: string | null; validJson: boolean }[];
}

/**
 * Rebuild messages from events (message_start fields + deltas). Text with
 * no header (docs/resilience.md, rule 13) starts with no channel and streams as
 * reasoning; when it turns out to be the answer it is given again, as
 * content, at the end: such a message is the analysis message of its
 * reasoning, or the final message of its answer.
 */
export function observe(events: readonly HarmonyEvent[]): Observed {
  const byIndex = new Map<number, ReferenceMessage>();
  /** Rule 13's messages: no channel, reasoning deltas first; and the answer given again, if it was. */
  const headerless = new Map<number, { answer: string | null }>();
  const order: number[] = [];
  const o: Observed = { messages: [], recoveries: [], errors: [], raw: [], done: false, callEnds: [] };
  const ends = new Map<number, { arguments: string; validJson: boolean }>();
  const calls: number[] = [];
  for (const ev of events) {
    switch (ev.type) {
      case "message_start": {
        const m = { role: ev.role } as ReferenceMessage;
        if (ev.name !== null) m.name = ev.name;
        if (ev.recipient !== null) m.recipient = ev.recipient;
        m.content = "";
        if (ev.channel !== null) m.channel = ev.channel;
        if (ev.content_type !== null) m.content_type = ev.content_type;
        byIndex.set(ev.index, m);
        order.push(ev.index);
        break;
      }
      case "tool_call_start":
        calls.push(ev.index);
        break;
      case "tool_call_end":
        ends.set(ev.index, { arguments: ev.arguments, validJson: ev.valid_json });
        break;
      case "delta": {
        const m = byIndex.get(ev.index);
        const h = headerless.get(ev.index);
        if (m && m.channel === undefined && m.recipient === undefined && m.content === "" && ev.kind === "reasoning") {
          headerless.set(ev.index, { answer: null });
          m.content += ev.text;
        } else if (m && h !== undefined && ev.kind === "content") h.answer = (h.answer ?? "") + ev.text;
        else if (m) m.content += ev.text;
        else o.errors.push({ code: "delta_without_message", message: `delta for message ${ev.index} before its start` });
        break;
      }
      case "recovery":
        for (let k = 0; k < (ev.count ?? 1); k++) o.recoveries.push(ev.kind);
        if (ev.raw) o.raw.push(ev.raw);
        break;
      case "error":
        o.errors.push({ code: ev.code, message: ev.message });
        break;
      case "done":
        o.done = true;
        break;
      default:
        break;
    }
  }
  for (const [i, h] of headerless) {
    const m = byIndex.get(i)!;
    m.channel = h.answer === null ? "analysis" : "final";
    if (h.answer !== null) m.content = h.answer;
  }
  o.messages = order.map((i) => byIndex.get(i)!);
  o.callEnds = calls.map((i) => ({
    message: order.indexOf(i),
    arguments: ends.get(i)?.arguments ?? null,
    validJson: ends.get(i)?.validJson ?? false,
  }));
  return o;
}

export interface Failure {
  kind: FailureKind;
  detail: string;
}

const same = (a: ReferenceMessage, b: ReferenceMessage) => JSON.stringify(a) === JSON.stringify(b);

export interface CheckResult {
  failures: Failure[];
  toolCalls: number;
  toolCallsRecovered: number;
}

export function check(intended: readonly ReferenceMessage[], got: Observed): CheckResult {
  const failures: Failure[] = [];
  const fail = (kind: FailureKind, detail: string) => failures.push({ kind, detail });
  if (!got.done) fail("missing_done", "the stream never got its done event");
  if (got.errors.length > 0) fail("protocol_error", got.errors.map((e) => `${e.code}: ${e.message}`).join("; "));

  const calls = intended.filter((m) => m.recipient !== undefined && m.role === "assistant");
  let recovered = 0;
  for (const call of calls) {
    const byRecipient = got.messages.filter((m) => m.recipient === call.recipient);
    if (byRecipient.some((m) => m.content === call.content)) recovered++;
    else if (byRecipient.length > 0)
      fail("wrong_arguments", `${call.recipient}: got ${JSON.stringify(byRecipient[0]!.content.slice(0, 80))}`);
    else fail("lost_tool_call", `${call.recipient} never arrived as a tool call`);
  }
  const finals = (ms: readonly ReferenceMessage[]) =>
    ms.filter((m) => m.channel === "final" && m.recipient === undefined).map((m) => m.content);
  if (JSON.stringify(finals(intended)) !== JSON.stringify(finals(got.messages))) {
    fail("answer_mismatch", `answer ${JSON.stringify(finals(got.messages).join("").slice(0, 80))}`);
  }
  for (const r of intended.filter((m) => m.channel === "analysis" && m.recipient === undefined)) {
    if (!got.messages.some((m) => m.channel === "analysis" && m.content === r.content)) {
      fail("reasoning_lost", `reasoning ${JSON.stringify(r.content.slice(0, 60))} missing`);
    }
  }
  // every call is completed by its tool_call_end; arguments that are JSON come through as generated
  for (const end of got.callEnds) {
    const content = got.messages[end.message]?.content ?? "";
    if (end.arguments === null) fail("call_end_mismatch", `call in message ${end.message} got no tool_call_end`);
    else if (isJson(content) && (end.arguments !== content || !end.validJson)) {
      fail("call_end_mismatch", `tool_call_end arguments ${JSON.stringify(end.arguments.slice(0, 80))} differ from the call's JSON`);
    }
  }
  const generatedText = intended.some((m) => m.content !== "");
  if (generatedText && got.messages.length === 0 && got.raw.length === 0) {
    fail("silent_empty_turn", "text was generated but nothing was delivered");
  }
  if (failures.length === 0 && (intended.length !== got.messages.length || intended.some((m, i) => !same(m, got.messages[i]!)))) {
    const i = intended.findIndex((m, k) => !got.messages[k] || !same(m, got.messages[k]!));
    const at = i < 0 ? intended.length : i;
    fail(
      "message_mismatch",
      `message ${at}: intended ${JSON.stringify(intended[at] ?? null).slice(0, 160)}, got ${JSON.stringify(got.messages[at] ?? null).slice(0, 160)}`,
    );
  }
  return { failures, toolCalls: calls.length, toolCallsRecovered: recovered };
}
