/**
 * A Chat Completions answer being written: each choice's chunks as the
 * parser sessions make them (one completion id across choices, reasoning
 * left out when asked, stop strings applied, logprobs beside), streamed as
 * server-sent events or gathered into one completion, and its end (usage,
 * the structured answer's check, what was recovered).
 */
import type http from "node:http";
import type { JsonObject as Obj } from "../../core/json.js";
import { ChatCompletionAccumulator, type HarmonyChatCompletionChunk } from "../../openai/chat.js";
import { ContentLogprobs } from "../../openai/logprobs.js";
import type { ChatPlan } from "../../openai/plan.js";
import { chatUsage } from "../../openai/responses-input.js";
import { StopStrings } from "../../openai/stop.js";
import type { GenerationSink } from "../../service/generate.js";
import type { Service } from "../../service/service.js";
import type { TokenLogprob, UpstreamError, UpstreamUsage } from "../../upstream/engine.js";
import type { ClientFlow } from "../client-flow.js";
import { GeneratedIds, logRepaired } from "../repair-log.js";
import { openaiError, sendJson } from "../respond.js";
import { checkAnswers, clientFlow, errorType, harmonyOf, refuse, setupSse, type CheckNote } from "./common.js";

const CHUNK_KEYS = ["id", "object", "created", "model", "choices"];
const CHOICE_KEYS = ["index", "delta", "finish_reason", "logprobs"];
/** What follows a text delta's JSON in its line. */
const TEXT_FOOT = '},"finish_reason":null,"logprobs":null}]}\n\n';

export class ChatAnswer implements GenerationSink {
  readonly flow: ClientFlow;
  /** End a choice here (its answer reached a stop string): the generation's endChoice. */
  endChoice: (choice: number) => void = () => undefined;
  private readonly id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly accumulators: ChatCompletionAccumulator[];
  /** logprobs: asked of the engine for every id; the content tokens' kept, per choice (../../openai/logprobs.ts). */
  private readonly logprobs: ContentLogprobs[] | null;
  /** `stop`: each choice's answer ends before its first stop string (../../openai/stop.ts); the engine is never asked. */
  private readonly stops: StopStrings[] | null;
  /** response_format (already checked by the render): each choice's streamed answer, to check at the end. */
  private readonly streamed: (string | null)[];
  private readonly called: boolean[];
  /** Calls dropped where none were allowed, by choice: said in the answer. */
  private readonly dropped: Obj[] = [];
  private started = false;
  private reasoningTokens = 0;
  /** Each choice's ids and repairs, for the log line of a repaired answer (../repair-log.ts). */
  private readonly generated = new GeneratedIds();
  private readonly repaired: (Record<string, number> | undefined)[] = [];

  constructor(
    private readonly svc: Service,
    private readonly res: http.ServerResponse,
    private readonly plan: ChatPlan,
  ) {
    const { n, model } = plan;
    const { id, created } = this;
    this.accumulators = Array.from(
      { length: n },
      (_, i) => new ChatCompletionAccumulator({ id, model, created, reasoningField: plan.reasoningField, choiceIndex: i }),
    );
    this.logprobs = plan.logprobs ? Array.from({ length: n }, () => new ContentLogprobs(svc.vocabulary(), plan.logprobs!.top)) : null;
    this.stops = StopStrings.of(plan.stop) ? Array.from({ length: n }, () => StopStrings.of(plan.stop)!) : null;
    this.streamed = Array.from({ length: n }, () => null);
    this.called = Array.from({ length: n }, () => false);
    this.flow = clientFlow(svc, res);
    if (plan.format !== null) svc.warmChecker();
  }

  /** A chunk of the front's own (logprobs, a schema mismatch, usage): no choices unless `fields` has some. */
  private extraChunk(fields: object): object {
    return { id: this.id, object: "chat.completion.chunk", created: this.created, model: this.plan.model, choices: [], ...fields };
  }

  private send(chunk: object): void {
    this.writeLine(`data: ${JSON.stringify(chunk)}\n\n`);
  }

  /** One SSE line to the client (the stream's head set first). */
  private writeLine(line: string): void {
    if (!this.started) {
      setupSse(this.res);
      this.started = true;
    }
    this.flow.write(line);
  }

  /**
   * A chunk of the parser's: most carry one choice's text and nothing else
   * (the adapter's shape, ../../openai/chat.ts), written from the fixed
   * text around it, the same bytes JSON.stringify gives; any other goes whole.
   */
  private sendChunk(chunk: HarmonyChatCompletionChunk): void {
    const line = this.textLine(chunk);
    if (line === null) return this.send(chunk);
    this.writeLine(line);
  }

  /** The fixed text before a text delta's JSON, by choice and field. */
  private readonly heads = new Map<string, string>();

  /** `chunk` as its SSE line when it is one choice's text delta in the adapter's shape; else null. */
  private textLine(chunk: HarmonyChatCompletionChunk): string | null {
    const choices = chunk.choices;
    if (choices.length !== 1 || chunk.object !== "chat.completion.chunk" || chunk.model !== this.plan.model) return null;
    const c = choices[0]!;
    if (c.finish_reason !== null || c.logprobs !== null) return null;
    let field: string | null = null;
    for (const k in c.delta) {
      if (field !== null) return null;
      field = k;
    }
    if (field !== "content" && field !== "reasoning" && field !== "reasoning_content") return null;
    const text = c.delta[field];
    if (typeof text !== "string") return null;
    // exactly the adapter's keys, in its order (id, object, created, model, choices; index, delta, finish_reason, logprobs)
    let keys = 0;
    for (const k in chunk) if (k !== CHUNK_KEYS[keys++]) return null;
    if (keys !== CHUNK_KEYS.length) return null;
    keys = 0;
    for (const k in c) if (k !== CHOICE_KEYS[keys++]) return null;
    if (keys !== CHOICE_KEYS.length) return null;
    return `${this.head(c.index, field)}${JSON.stringify(text)}${TEXT_FOOT}`;
  }

  /** The last head given, and its choice and field: a stream's text deltas are one choice's, in one field, in a run. */
  private lastHead = "";
  private lastChoice = -1;
  private lastField = "";

  /** The fixed text before the JSON of a text delta of `choice` in `field`. */
  private head(choice: number, field: string): string {
    // (no key made and looked up a token: the same head as the last, most of the time)
    if (choice === this.lastChoice && field === this.lastField) return this.lastHead;
    const key = `${choice}:${field}`;
    let head = this.heads.get(key);
    if (head === undefined) {
      const fixed = JSON.stringify({ ...this.extraChunk({}), choices: [{ index: choice, delta: { [field]: "" } }] });
      head = `data: ${fixed.slice(0, fixed.length - '""}}]}'.length)}`;
      this.heads.set(key, head);
    }
    this.lastHead = head;
    this.lastChoice = choice;
    this.lastField = field;
    return head;
  }

  /** The model the parser sessions' chunks name (set by the first of them: a choice's role chunk comes before its text). */
  private chunkModel: unknown = undefined;

  /**
   * A choice's text where the parser sessions' chunk would be that text
   * alone (src/pool/host.ts). Streamed, with no stop strings, answer check or
   * hidden reasoning to apply and the chunks naming the plan's model, its
   * line is written from the fixed text around it: the bytes sendChunk
   * writes for that chunk. Otherwise the chunk itself goes to event().
   */
  text(choice: number, field: string, text: string): void {
    const plan = this.plan;
    if (plan.stream && this.stops === null && plan.format === null && this.chunkModel === plan.model) {
      if (field === "content" || plan.includeReasoning) this.writeLine(`${this.head(choice, field)}${JSON.stringify(text)}${TEXT_FOOT}`);
      return;
    }
    const chunk = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.chunkModel,
      choices: [{ index: choice, delta: { [field]: text }, finish_reason: null, logprobs: null }],
    };
    this.event(choice, chunk as unknown as Obj);
  }

  /** Every id of a choice as it goes to the parser: kept for the repair log, and its logprobs (streamed as they come). */
  ids(choice: number, ids: readonly number[], lps: readonly (TokenLogprob | null)[] | null): void {
    this.generated.add(choice, ids);
    if (!this.logprobs) return;
    const content = this.logprobs[choice]?.push(ids, lps) ?? [];
    // streamed: the content tokens' logprobs in a chunk of their own (an empty delta), as they arrive
    if (this.plan.stream && content.length > 0)
      this.send(this.extraChunk({ choices: [{ index: choice, delta: {}, logprobs: { content, refusal: null }, finish_reason: null }] }));
  }

  /** While the streaming client is behind: what to await before the engine's next chunk. */
  wait(): Promise<void> | null {
    return this.plan.stream ? this.flow.wait() : null;
  }

  /** One of a choice's chunks from the parser sessions. */
  event(choice: number, obj: Obj): void {
    if (obj.harmony_error) return;
    const { plan } = this;
    const chunk = obj as unknown as HarmonyChatCompletionChunk;
    if (this.chunkModel === undefined) this.chunkModel = chunk.model;
    // one completion id across choices; each choice its own index
    chunk.id = this.id;
    chunk.created = this.created;
    for (const c of chunk.choices) {
      c.index = choice;
      if (!plan.includeReasoning) {
        // include_reasoning: false (vLLM's field): the chain of thought stays with the sidecar
        delete c.delta.reasoning;
        delete c.delta.reasoning_content;
      }
    }
    const stop = this.stops?.[choice];
    if (stop) {
      // after the stop string nothing of the answer goes out; the parser's reasoning count still does
      if (stop.stopped && !(chunk.harmony && !chunk.harmony.tool_call_end)) return;
      for (const c of chunk.choices) {
        if (stop.stopped) break;
        if (c.delta.content) c.delta.content = stop.push(c.delta.content);
        if (stop.stopped) {
          delete c.delta.tool_calls;
          c.finish_reason = "stop";
          this.endChoice(choice);
        } else if (c.finish_reason || c.delta.tool_calls) {
          // the answer's text ends here (a call follows, or the choice ends): what was held goes out first
          const rest = stop.flush();
          if (rest) c.delta.content = (c.delta.content ?? "") + rest;
        }
        if (c.delta.content === "") delete c.delta.content;
      }
      if (!chunk.harmony && chunk.choices.length > 0 && chunk.choices.every((c) => Object.keys(c.delta).length === 0 && !c.finish_reason))
        return; // all of it held back for now
    }
    if (
      !plan.includeReasoning &&
      chunk.choices.length > 0 &&
      chunk.choices.every((c) => Object.keys(c.delta).length === 0 && !c.finish_reason)
    ) {
      return; // a chunk that only carried reasoning
    }
    const h = chunk.harmony;
    if (h) {
      if (h.tool_call_end) {
        // a call's whole (maybe repaired) arguments: for the non-streaming answer only
        h.tool_call_end.choice = choice;
        if (!plan.stream) this.accumulators[choice]!.addChunk(chunk);
        return;
      }
      // the choice's reasoning tokens, for usage, and its repairs, for the log (not sent on)
      this.reasoningTokens += h.reasoning_tokens ?? 0;
      for (const r of h.recoveries ?? []) this.dropped.push({ ...r, choice });
      this.repaired[choice] = h.repairs;
      return;
    }
    if (plan.stream) {
      if (plan.format !== null)
        for (const c of chunk.choices) {
          if (c.delta.content) this.streamed[choice] = (this.streamed[choice] ?? "") + c.delta.content;
          if (c.finish_reason === "tool_calls") this.called[choice] = true; // no answer to check
        }
      this.sendChunk(chunk);
    } else this.accumulators[choice]!.addChunk(chunk);
  }

  /** The generation ended: the answer's last chunks (or the whole completion), its usage and its check. */
  async finish({ usage, error }: { usage: UpstreamUsage | null; error: UpstreamError | null }): Promise<void> {
    const { svc, res, plan, id } = this;
    const usageObj = usage && chatUsage(usage, this.reasoningTokens);
    if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
    for (let choice = 0; choice < plan.n; choice++)
      logRepaired(svc, { response: id, choice, recoveries: this.repaired[choice], tools: plan.tools, calls: plan.calls }, this.generated);
    if (res.destroyed) return;
    const format = plan.format;
    if (!plan.stream) {
      if (error) return refuse(res, error.status, errorType(error.status), error.code, error.message);
      const results = this.accumulators.map((a) => a.result());
      const note: CheckNote =
        format === null
          ? null
          : await checkAnswers(
              svc,
              format,
              results.map((r) => (r.choices[0]!.finish_reason === "tool_calls" ? null : r.choices[0]!.message.content)),
              id,
            );
      if (res.destroyed) return;
      const choices = results.flatMap((r) => r.choices);
      const logprobs = this.logprobs;
      if (logprobs) choices.forEach((c, i) => ((c as { logprobs: unknown }).logprobs = { content: logprobs[i]!.content, refusal: null }));
      const harmony = harmonyOf(this.dropped, note);
      sendJson(res, 200, {
        ...results[0]!,
        choices,
        ...(usageObj ? { usage: usageObj } : {}),
        ...(harmony !== null ? { harmony } : {}),
      });
      return;
    }
    const note =
      format === null || error
        ? null
        : await checkAnswers(
            svc,
            format,
            this.streamed.map((text, i) => (this.called[i] ? null : (text ?? ""))),
            id,
          );
    if (res.destroyed) return;
    // what was held for a client behind, or written in this turn, goes first, in the one write of the answer's end
    const rest = this.flow.rest();
    if (!this.started) {
      if (error) return refuse(res, error.status, errorType(error.status), error.code, error.message);
      setupSse(res);
    }
    if (rest !== "") res.write(rest);
    if (error) res.write(`data: ${JSON.stringify(openaiError(error.status, error.code, error.message, { type: "upstream_error" }))}\n\n`);
    const harmony = harmonyOf(this.dropped, note);
    if (harmony !== null) res.write(`data: ${JSON.stringify(this.extraChunk({ harmony }))}\n\n`);
    if (plan.includeUsage && usageObj) res.write(`data: ${JSON.stringify(this.extraChunk({ usage: usageObj }))}\n\n`);
    res.end("data: [DONE]\n\n");
  }
}
