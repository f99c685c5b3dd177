/**
 * A response's output in the client's terms, after the adapter
 * (./responses.ts) made it from the parser's events. The adapter knows
 * Harmony's names only; the request says more:
 * - a function that stands for a `custom` tool (./responses-input.ts,
 *   `responsesTools`) comes out as a `custom_tool_call` item whose `input`
 *   is the string the model passed (`{"input": …}`), streamed as
 *   `response.custom_tool_call_input.delta/done` once the call is whole;
 * - a function that stands for a `namespace` member (`ns__name`) comes out
 *   with the client's `name` and its `namespace`;
 * - with `summary` (the request asked for `reasoning.summary`), each
 *   reasoning item's `summary` carries its text too (one `summary_text`
 *   part: the raw chain of thought, the sidecar has no summarizer), with
 *   the `response.reasoning_summary_*` events clients that read summaries
 *   listen to;
 * - with `carry` (`include: ["reasoning.encrypted_content"]`), each
 *   reasoning item's `encrypted_content` carries its text, so a client that
 *   sends back only that (stateless, `store: false`) sends the reasoning
 *   back too.
 * Events are renumbered (`sequence_number` 0, 1, 2, … over what is sent).
 * Pure: no I/O, no clock.
 */
import { isObj, type JsonObject as Obj } from "../core/json.js";
import { carryReasoning, type ToolRoute } from "./responses-input.js";

export interface OutputOptions {
  /** What each Harmony function name is to the client (absent: a plain function of that name). */
  routes: ReadonlyMap<string, ToolRoute>;
  /** Reasoning items carry their text in `summary` too. */
  summary: boolean;
  /** Reasoning items carry their text in `encrypted_content`. */
  carry: boolean;
}

/** A custom tool's input from the call's arguments: `{"input": "…"}` as asked, else a JSON string, else the arguments as written. */
export function customInput(args: string): string {
  try {
    const v: unknown = JSON.parse(args);
    if (isObj(v) && typeof v.input === "string") return v.input;
    if (typeof v === "string") return v;
  } catch {
    // not JSON: the model wrote the input itself
  }
  return args;
}

/** The marks textDelta cuts a text delta event's JSON at. */
const SEQ = '"sequence_number":';
const DELTA = ',"delta":';
const ITEM_ID = '"item_id":';
const OUTPUT_INDEX = ',"output_index":';
const REASONING_DELTA = '{"type":"response.reasoning_text.delta",';
const OUTPUT_DELTA = '{"type":"response.output_text.delta",';
const SUMMARY_DELTA = "response.reasoning_summary_text.delta";

export class ResponsesOutput {
  private seq = 0;
  /** Custom calls in progress, by output index. */
  private readonly custom = new Set<number>();

  /** Whether anything is rewritten at all (a plain request's events pass through untouched); asked of every event, so found once. */
  readonly active: boolean;

  constructor(private readonly options: OutputOptions) {
    let routed = false;
    for (const r of options.routes.values()) if (r.kind === "custom" || r.namespace) routed = true;
    this.active = options.summary || options.carry || routed;
  }

  /** An output item in the client's terms (a new object; `item` is left as it is). */
  item(item: Obj): Obj {
    if (item.type === "function_call" && typeof item.name === "string") {
      const route = this.options.routes.get(item.name);
      if (route?.kind === "custom") {
        const id = typeof item.id === "string" ? item.id.replace(/^fc_/, "ctc_") : item.id;
        const args = typeof item.arguments === "string" ? item.arguments : "";
        const out: Obj = { type: "custom_tool_call", id, call_id: item.call_id, name: route.name, input: customInput(args) };
        if (item.status !== undefined) out.status = item.status;
        if (route.namespace) out.namespace = route.namespace;
        return out;
      }
      if (route?.namespace) return { ...item, name: route.name, namespace: route.namespace };
      return item;
    }
    if (item.type === "reasoning" && (this.options.summary || this.options.carry)) {
      const text = Array.isArray(item.content)
        ? item.content.map((p) => (isObj(p) && typeof p.text === "string" ? p.text : "")).join("")
        : "";
      const out: Obj = { ...item };
      if (this.options.summary) out.summary = text === "" ? [] : [{ type: "summary_text", text }];
      if (this.options.carry && item.status !== "in_progress") out.encrypted_content = carryReasoning(text);
      return out;
    }
    return item;
  }

  /** A response object in the client's terms (its output items rewritten in place). */
  response(response: Obj): Obj {
    if (Array.isArray(response.output)) response.output = response.output.map((i) => (isObj(i) ? this.item(i) : i));
    return response;
  }

  /**
   * A text delta event of `type` as its JSON, as the adapter's plainDelta
   * writes it (./responses.ts: `{"type":"response.output_text.delta" or
   * "response.reasoning_text.delta",…,"sequence_number":N,"delta":"…"}`, its
   * `item_id` a JSON string) → to `send`, the type and JSON of each event
   * event() would send instead: the bytes JSON.stringify writes of them,
   * made from the JSON's own bytes with no object
   * (test/openai/responses-output.test.ts). The renumbered event keeps its
   * keys' order; a reasoning delta with summaries asked is followed by its
   * summary delta. JSON of another shape goes through event().
   */
  textDelta(type: string, json: string, send: (type: string, json: string) => void): void {
    const reasoning = json.startsWith(REASONING_DELTA);
    const at = reasoning || json.startsWith(OUTPUT_DELTA) ? json.indexOf(SEQ) : -1;
    const end = at < 0 ? -1 : json.indexOf(DELTA, at);
    const summary = this.options.summary && reasoning;
    // the item's id (a JSON string, so no bare `,"output_index":` in it) and output index, from the head
    const id = summary ? json.indexOf(ITEM_ID) : 0;
    const index = summary && id >= 0 ? json.indexOf(OUTPUT_INDEX, id) : 0;
    if (end < 0 || id < 0 || index < 0 || index > at || !json.endsWith("}")) {
      for (const e of this.event(JSON.parse(json) as Obj)) send(e.type as string, JSON.stringify(e));
      return;
    }
    send(type, `${json.slice(0, at + SEQ.length)}${this.seq++}${json.slice(end)}`);
    if (!summary) return;
    const itemId = json.slice(id + ITEM_ID.length, index);
    const outputIndex = json.slice(index + OUTPUT_INDEX.length, at - 1);
    const delta = json.slice(end + DELTA.length, -1);
    send(
      SUMMARY_DELTA,
      `{"type":"${SUMMARY_DELTA}","item_id":${itemId},"output_index":${outputIndex},"summary_index":0,"delta":${delta},"sequence_number":${this.seq++}}`,
    );
  }

  /** One event of the adapter's stream → the events to send instead (renumbered). */
  event(ev: Obj): Obj[] {
    const out: Obj[] = [];
    const send = (e: Obj) => out.push({ ...e, sequence_number: this.seq++ });
    const at = typeof ev.output_index === "number" ? ev.output_index : -1;
    switch (ev.type) {
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = isObj(ev.item) ? this.item(ev.item) : ev.item;
        if (isObj(item) && item.type === "custom_tool_call") {
          if (ev.type === "response.output_item.added") {
            item.input = "";
            this.custom.add(at);
          } else this.custom.delete(at);
        }
        send({ ...ev, item });
        break;
      }
      case "response.function_call_arguments.delta":
        if (!this.custom.has(at)) send(ev);
        break;
      case "response.function_call_arguments.done": {
        if (!this.custom.has(at)) {
          const route = typeof ev.name === "string" ? this.options.routes.get(ev.name) : undefined;
          send(route?.namespace ? { ...ev, name: route.name } : ev);
          break;
        }
        // a custom call's input is known once its arguments are whole
        const input = customInput(typeof ev.arguments === "string" ? ev.arguments : "");
        const itemId = typeof ev.item_id === "string" ? ev.item_id.replace(/^fc_/, "ctc_") : ev.item_id;
        send({ type: "response.custom_tool_call_input.delta", item_id: itemId, output_index: at, delta: input });
        send({ type: "response.custom_tool_call_input.done", item_id: itemId, output_index: at, input });
        break;
      }
      case "response.content_part.added":
        send(ev);
        if (this.options.summary && isObj(ev.part) && ev.part.type === "reasoning_text")
          send({
            type: "response.reasoning_summary_part.added",
            item_id: ev.item_id,
            output_index: at,
            summary_index: 0,
            part: { type: "summary_text", text: "" },
          });
        break;
      case "response.reasoning_text.delta":
        send(ev);
        if (this.options.summary)
          send({ type: "response.reasoning_summary_text.delta", item_id: ev.item_id, output_index: at, summary_index: 0, delta: ev.delta });
        break;
      case "response.reasoning_text.done":
        send(ev);
        if (this.options.summary) {
          send({ type: "response.reasoning_summary_text.done", item_id: ev.item_id, output_index: at, summary_index: 0, text: ev.text });
          send({
            type: "response.reasoning_summary_part.done",
            item_id: ev.item_id,
            output_index: at,
            summary_index: 0,
            part: { type: "summary_text", text: ev.text },
          });
        }
        break;
      default:
        if (isObj(ev.response)) send({ ...ev, response: this.response({ ...ev.response }) });
        else send(ev);
    }
    return out;
  }
}
