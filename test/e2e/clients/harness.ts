/**
 * Real agent clients through the front (issue #30): what every client's
 * test shares. One vLLM stand-in per file plays a gpt-oss that reads its
 * prompt (test/e2e/stand-ins/vllm.ts `respond`): asked a question, it
 * reasons, writes a preamble and calls the tool; given the tool's result,
 * it reasons again and answers; asked again after an answer, it answers.
 * Two fronts share it: one with the reasoning store on (the default), one
 * with it off (`--cot-store-bytes 0`: what a client sends back is all there
 * is). Every prompt the engine was sent is checked against Harmony's
 * replay rules (HARMONY.md §5): the call's reasoning is in the prompt while
 * the call is in flight, with its preamble on `commentary` (never a
 * `final`), the call's arguments as the model wrote them and the tool's
 * result after it; after a final answer, the earlier turns' reasoning is
 * gone.
 */
import { afterAll, beforeAll, expect } from "vitest";
import type { Server } from "../../../src/server.js";
import { DEFAULT_COT_STORE } from "../../../src/service/service.js";
import { harmony } from "../../helpers.js";
import { startVllm, type VllmStandIn } from "../stand-ins/vllm.js";
import { startTestServer } from "../test-server.js";

const { enc, vocab } = harmony();

/** What the scripted model does in a tool loop. */
export interface Agent {
  /** The function the model calls, and its arguments (as JSON). */
  tool: string;
  args: Record<string, unknown>;
  /** The reasoning before the call, the preamble, the reasoning after the result, the answer, the answer to a follow-up. */
  cot: string;
  preamble: string;
  answerCot: string;
  answer: string;
  followUp: string;
}

export const WEATHER_AGENT: Agent = Object.freeze({
  tool: "get_weather",
  args: { city: "Paris" },
  cot: "The user asks for the weather in Paris. I should call get_weather with city Paris.",
  preamble: "Checking Paris now.",
  answerCot: "The tool says 18 C and sunny. Answer briefly.",
  answer: "It is 18 °C and sunny in Paris.",
  followUp: "You are welcome.",
});

export type TurnKind = "call" | "answer" | "follow-up";

/** One engine request of a tool loop: what the model was asked to do and the prompt it got, as text. */
export interface Turn {
  kind: TurnKind;
  prompt: string;
}

const TOOL_RESULT_AT_END =
  /<\|start\|>functions\.[^<]* to=assistant<\|channel\|>commentary<\|message\|>(?:(?!<\|start\|>)[\s\S])*<\|end\|><\|start\|>assistant$/;

/** The model's turn for a prompt (see the file's comment). */
export function turnOf(prompt: string, agent: Agent): TurnKind {
  if (TOOL_RESULT_AT_END.test(prompt)) return "answer";
  return prompt.includes(`<|channel|>final<|message|>${agent.answer}`) ? "follow-up" : "call";
}

/** What the model samples for a turn, as Harmony text (a completion: the prompt ends with `<|start|>assistant`). */
export function completionOf(kind: TurnKind, agent: Agent, tool: string = agent.tool): string {
  if (kind === "answer")
    return `<|channel|>analysis<|message|>${agent.answerCot}<|end|><|start|>assistant<|channel|>final<|message|>${agent.answer}<|return|>`;
  if (kind === "follow-up") return `<|channel|>final<|message|>${agent.followUp}<|return|>`;
  return (
    `<|channel|>analysis<|message|>${agent.cot}<|end|>` +
    `<|start|>assistant<|channel|>commentary<|message|>${agent.preamble}<|end|>` +
    `<|start|>assistant<|channel|>commentary to=functions.${tool} <|constrain|>json<|message|>${JSON.stringify(agent.args)}<|call|>`
  );
}

export interface Rig {
  vllm: VllmStandIn;
  /** Base URLs (`http://127.0.0.1:PORT`) of the fronts with the reasoning store on and off. */
  fronts: { on: string; off: string };
  /** The engine requests since `mark()`, as turns. */
  turns(since: number): Turn[];
  /** The number of engine requests so far (for `turns`). */
  mark(): number;
  /** Script the model as `agent` (with `tool`: the name it calls, e.g. a namespaced one). */
  play(agent: Agent, tool?: string): void;
  close(): Promise<void>;
}

/** One stand-in and two fronts (reasoning store on, off) for a test file; started once, closed once. */
export async function startRig(): Promise<Rig> {
  const vllm = await startVllm({ maxModelLen: 65536 });
  const upstream = { url: vllm.url, idleTimeoutMs: 30_000, reasoningField: "reasoning" as const };
  const servers: Server[] = [];
  const on = await startTestServer({ grpcPort: -1, upstream });
  servers.push(on.server);
  const off = await startTestServer({ grpcPort: -1, upstream, cotStore: { ...DEFAULT_COT_STORE, maxBytes: 0 } });
  servers.push(off.server);
  const text = (body: Record<string, unknown>) => (body.prompt as number[]).map((id) => vocab.text(id)).join("");
  let agent: Agent = WEATHER_AGENT;
  let tool = agent.tool;
  vllm.respond((body) => ({ tokens: enc.encode(completionOf(turnOf(text(body), agent), agent, tool)) }));
  return {
    vllm,
    fronts: { on: on.http, off: off.http },
    mark: () => vllm.completions().length,
    turns: (since) =>
      vllm
        .completions()
        .slice(since)
        .map((r) => {
          const prompt = text(r.body!);
          return { kind: turnOf(prompt, agent), prompt };
        }),
    play: (a, t) => {
      agent = a;
      tool = t ?? a.tool;
    },
    close: async () => {
      for (const s of servers) await s.stop();
      await vllm.close();
    },
  };
}

/**
 * The file's rig: started before its tests, closed after them. What it
 * returns reads through to the rig once started.
 */
export function useRig(): Rig {
  let rig: Rig | undefined;
  beforeAll(async () => {
    rig = await startRig();
  });
  afterAll(async () => {
    await rig?.close();
  });
  const started = (): Rig => {
    if (!rig) throw new Error("the rig is used before beforeAll has started it");
    return rig;
  };
  return {
    get vllm() {
      return started().vllm;
    },
    get fronts() {
      return started().fronts;
    },
    turns: (since) => started().turns(since),
    mark: () => started().mark(),
    play: (a, t) => started().play(a, t),
    close: () => started().close(),
  };
}

/** What the weather tool answers in every client's loop. */
export const WEATHER_RESULT = '{"temp_c":18,"sky":"sunny"}';

/** Where `needle` is in `hay` (expected there). */
function at(hay: string, needle: string, what: string): number {
  const i = hay.indexOf(needle);
  expect(i, `${what} is in the prompt:\n${needle}\n--- prompt:\n${hay}`).toBeGreaterThanOrEqual(0);
  return i;
}

export interface LoopCheck {
  /** The turns of the loop, in order (from `rig.turns`). */
  turns: Turn[];
  agent?: Agent;
  /** The tool's result as the client sent it (a substring of the tool message). */
  result: string;
  /** The call's recipient as the prompt renders it (default `functions.<tool>`). */
  recipient?: string;
  /** Whether the client sent the reasoning back, or the store put it back (false: a stateless client with the store off: checked absent). */
  reasoningKept?: boolean;
  /** Whether the client sent the preamble back. */
  preambleKept?: boolean;
}

/**
 * The turns of one tool loop (a call, its answer, maybe a follow-up)
 * against Harmony's replay rules.
 */
export function checkLoop(c: LoopCheck): void {
  const agent = c.agent ?? WEATHER_AGENT;
  const kinds = c.turns.map((t) => t.kind);
  expect(kinds.slice(0, 2)).toEqual(["call", "answer"]);
  const [call, answer, follow] = c.turns;
  // the first turn: a fresh question, no reasoning of anyone's
  expect(call!.prompt).not.toContain("<|channel|>analysis");
  const p = answer!.prompt;
  const recipient = c.recipient ?? `functions.${agent.tool}`;
  // the call as the model wrote it, arguments intact
  const callAt = at(p, `<|start|>assistant to=${recipient}<|channel|>commentary <|constrain|>json<|message|>`, "the call");
  const argsText = p.slice(p.indexOf("<|message|>", callAt) + "<|message|>".length, p.indexOf("<|call|>", callAt));
  expect(JSON.parse(argsText)).toEqual(agent.args);
  const resultAt = at(p, `<|start|>${recipient} to=assistant<|channel|>commentary<|message|>`, "the tool's result");
  expect(p.slice(resultAt)).toContain(c.result);
  expect(resultAt).toBeGreaterThan(callAt);
  // the preamble is commentary of the call's turn, never a final answer
  expect(p).not.toContain(`<|channel|>final<|message|>${agent.preamble}`);
  if (c.preambleKept !== false) {
    const preAt = at(p, `<|start|>assistant<|channel|>commentary<|message|>${agent.preamble}<|end|>`, "the preamble on commentary");
    expect(preAt).toBeLessThan(callAt);
  }
  // the call is in flight: its reasoning stays in the prompt, before it (HARMONY.md §5)
  const cot = `<|start|>assistant<|channel|>analysis<|message|>${agent.cot}<|end|>`;
  if (c.reasoningKept !== false) {
    expect(at(p, cot, "the call's reasoning")).toBeLessThan(callAt);
    // once: what the client sent back and what the store keeps are not both rendered
    expect(p.split(agent.cot).length - 1, `the call's reasoning once in the prompt:\n${p}`).toBe(1);
  } else expect(p).not.toContain(agent.cot);
  if (follow) {
    expect(follow.kind).toBe("follow-up");
    // after a final answer, the earlier turns' reasoning is dropped
    expect(follow.prompt).not.toContain(agent.cot);
    expect(follow.prompt).not.toContain(agent.answerCot);
    at(follow.prompt, `<|channel|>final<|message|>${agent.answer}<|end|>`, "the answer");
  }
}
