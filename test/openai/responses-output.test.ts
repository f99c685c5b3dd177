/**
 * ResponsesOutput.textDelta (src/openai/responses-output.ts): a text delta
 * event's JSON, as the Responses adapter's plainDelta writes it, rewritten
 * from its bytes gives what event() gives of the parsed event, stringified:
 * renumbered, and with reasoning summaries asked, the summary delta after a
 * reasoning delta. Item ids carry what the cuts look for (quotes,
 * `"sequence_number":`, `,"output_index":`, `,"delta":`), the deltas any
 * text; JSON of another shape (a call's arguments, a custom call's, which
 * event() drops) goes through event().
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/json.js";
import type { ToolRoute } from "../../src/openai/responses-input.js";
import { ResponsesOutput } from "../../src/openai/responses-output.js";

/** A text delta event's JSON in plainDelta's key order (src/openai/responses.ts; test/transport/responses-text.test.ts holds plainDelta to it). */
function deltaJson(reasoning: boolean, itemId: string, outputIndex: number, seq: number, delta: string): string {
  const ev: JsonObject = reasoning
    ? { type: "response.reasoning_text.delta", content_index: 0, item_id: itemId, output_index: outputIndex, sequence_number: seq, delta }
    : {
        type: "response.output_text.delta",
        content_index: 0,
        logprobs: [],
        item_id: itemId,
        output_index: outputIndex,
        sequence_number: seq,
        delta,
      };
  return JSON.stringify(ev);
}

const tricky = fc.oneof(fc.string(), fc.constantFrom('rs_"x', 'msg_","output_index":7,"sequence_number":9,"delta":"', "a\\b", "é🦀", ""));
const step = fc.record({
  reasoning: fc.boolean(),
  itemId: tricky,
  outputIndex: fc.nat(1000),
  seq: fc.nat(100000),
  delta: fc.oneof(fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" }), tricky),
});

const ROUTES: ReadonlyMap<string, ToolRoute> = new Map([["apply_patch", { kind: "custom", name: "apply_patch", namespace: null }]]);

/** Two outputs of the same options in lockstep: one fed the JSON, one the events. */
function pair(summary: boolean, carry: boolean) {
  const options = { routes: ROUTES, summary, carry };
  const byBytes = new ResponsesOutput(options);
  const byEvents = new ResponsesOutput(options);
  return {
    feed(type: string, json: string): { bytes: string[]; events: string[] } {
      const bytes: string[] = [];
      byBytes.textDelta(type, json, (t, j) => {
        expect(t).toBe((JSON.parse(j) as JsonObject).type);
        bytes.push(j);
      });
      const events = byEvents.event(JSON.parse(json) as JsonObject).map((e) => JSON.stringify(e));
      return { bytes, events };
    },
    event(ev: JsonObject): void {
      byBytes.event(ev);
      byEvents.event(ev);
    },
  };
}

describe("ResponsesOutput.textDelta", () => {
  it("gives the bytes event() gives of the parsed event, with and without summaries and carried reasoning", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.array(step, { minLength: 1, maxLength: 12 }), (summary, carry, steps) => {
        const p = pair(summary, carry);
        for (const s of steps) {
          const json = deltaJson(s.reasoning, s.itemId, s.outputIndex, s.seq, s.delta);
          const { bytes, events } = p.feed(s.reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", json);
          expect(bytes).toEqual(events);
          expect(bytes.length).toBe(summary && s.reasoning ? 2 : 1);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a reasoning delta with summaries asked: renumbered, then its summary delta, numbered next", () => {
    const p = pair(true, true);
    const { bytes } = p.feed("response.reasoning_text.delta", deltaJson(true, "rs_1", 0, 41, 'think "hard"\n'));
    expect(bytes).toEqual([
      '{"type":"response.reasoning_text.delta","content_index":0,"item_id":"rs_1","output_index":0,"sequence_number":0,"delta":"think \\"hard\\"\\n"}',
      '{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"think \\"hard\\"\\n","sequence_number":1}',
    ]);
  });

  it("JSON of another shape goes through event(): a custom call's arguments are dropped, a plain call's renumbered", () => {
    const p = pair(false, false);
    const added = (name: string, index: number): JsonObject => ({
      type: "response.output_item.added",
      output_index: index,
      sequence_number: 0,
      item: { type: "function_call", id: `fc_${index}`, call_id: `c${index}`, name, arguments: "", status: "in_progress" },
    });
    p.event(added("apply_patch", 0));
    const args = (index: number) =>
      JSON.stringify({
        type: "response.function_call_arguments.delta",
        item_id: `fc_${index}`,
        output_index: index,
        sequence_number: 5,
        delta: "{",
      });
    const custom = p.feed("response.function_call_arguments.delta", args(0));
    expect(custom.bytes).toEqual([]);
    expect(custom.events).toEqual([]);
    p.event(added("get_weather", 1));
    const plain = p.feed("response.function_call_arguments.delta", args(1));
    expect(plain.bytes).toEqual(plain.events);
    expect(plain.bytes[0]).toContain('"sequence_number":2');
  });
});
