/**
 * A Responses answer being written: the parser sessions' events in the
 * client's terms (../../openai/responses-output.ts), streamed as
 * server-sent events or kept for the one response; its end (usage, the
 * structured answer's check, what was recovered), and the response stored
 * for the next turn before it is announced complete.
 */
import type http from "node:http";
import { isObj, type JsonObject as Obj } from "../../core/json.js";
import type { FrontPlan } from "../../openai/plan.js";
import { responsesUsage, storedInputItems, type ToolRoute } from "../../openai/responses-input.js";
import { ResponsesOutput } from "../../openai/responses-output.js";
import { isClosing, type GenerationSink } from "../../service/generate.js";
import type { Service } from "../../service/service.js";
import type { UpstreamError, UpstreamUsage } from "../../upstream/engine.js";
import type { ClientFlow } from "../client-flow.js";
import { GeneratedIds, logRepaired } from "../repair-log.js";
import { sendJson } from "../respond.js";
import { checkAnswers, clientFlow, errorType, harmonyOf, refuse, setupSse, type CheckNote } from "./common.js";

export class ResponsesAnswer implements GenerationSink {
  readonly flow: ClientFlow;
  private started = false;
  private final: Obj | null = null;
  private readonly generated = new GeneratedIds();
  private repaired: Record<string, number> | undefined;
  private dropped: unknown[] = [];
  /** store defaults to true, as in OpenAI's API; with storing off it is ignored, as vLLM does without its store. */
  private readonly storing: boolean;
  private readonly previousId: unknown;
  /** The output in the client's terms: custom and namespaced tools, reasoning in summary / encrypted_content when asked. */
  private readonly output: ResponsesOutput;

  constructor(
    private readonly svc: Service,
    private readonly res: http.ServerResponse,
    private readonly plan: FrontPlan,
    request: Obj,
    private readonly tenant: string,
    routes: ReadonlyMap<string, ToolRoute>,
    /** The input items (references resolved), stored with the response. */
    private readonly items: unknown[],
  ) {
    this.storing = svc.responses.enabled && request.store !== false;
    this.previousId = request.previous_response_id ?? null;
    this.flow = clientFlow(svc, res);
    if (plan.format !== null) svc.warmChecker();
    const reasoningAsked = isObj(request.reasoning) ? (request.reasoning.summary ?? request.reasoning.generate_summary) : undefined;
    this.output = new ResponsesOutput({
      routes,
      summary: typeof reasoningAsked === "string" && reasoningAsked !== "none",
      carry: Array.isArray(request.include) && request.include.includes("reasoning.encrypted_content"),
    });
  }

  private write(obj: Obj): void {
    this.writeJson(obj.type as string, JSON.stringify(obj));
  }

  /** writeJson as a function (ResponsesOutput.textDelta sends through it). */
  private readonly sendJson = (type: string, json: string): void => this.writeJson(type, json);

  private writeJson(type: string, json: string): void {
    if (!this.started) {
      setupSse(this.res);
      this.started = true;
    }
    this.flow.write(`event: ${type}\ndata: ${json}\n\n`);
  }

  /**
   * A text delta event as its JSON, `type` its type (the parser sessions
   * send most steps so: src/pool/host.ts `plainText`). Streamed with nothing
   * to make of it (no custom tools, summary or carried reasoning), it is
   * written as it came: the bytes write() writes of that event. With those,
   * ResponsesOutput makes what event() would write of it from the JSON
   * itself (renumbered, a summary delta after a reasoning delta); a response
   * not streamed writes no delta.
   */
  text(_choice: number, type: string, json: string): void {
    if (!this.plan.stream) return;
    if (!this.output.active) return this.writeJson(type, json);
    this.output.textDelta(type, json, this.sendJson);
  }

  ids(choice: number, ids: readonly number[]): void {
    this.generated.add(choice, ids);
  }

  /** While the streaming client is behind: what to await before the engine's next chunk. */
  wait(): Promise<void> | null {
    return this.plan.stream ? this.flow.wait() : null;
  }

  /** One event of the response from the parser sessions (one choice: 0). */
  event(_choice: number, obj: Obj, usage: UpstreamUsage | null): void {
    if (obj.harmony_error) return;
    if (!this.output.active) return this.onEvent(obj, usage);
    for (const ev of this.output.event(obj)) this.onEvent(ev, usage);
  }

  private onEvent(obj: Obj, usage: UpstreamUsage | null): void {
    if (isObj(obj.response)) {
      obj.response.previous_response_id = this.previousId;
      obj.response.store = this.storing;
    }
    if (isClosing(obj)) {
      this.final = obj;
      const reasoningTokens = isObj(obj.harmony) && typeof obj.harmony.reasoning_tokens === "number" ? obj.harmony.reasoning_tokens : 0;
      if (isObj(obj.harmony) && Array.isArray(obj.harmony.recoveries)) this.dropped = obj.harmony.recoveries;
      if (isObj(obj.harmony) && isObj(obj.harmony.repairs)) this.repaired = obj.harmony.repairs as Record<string, number>;
      delete obj.harmony;
      if (usage && isObj(obj.response)) obj.response.usage = responsesUsage(usage, reasoningTokens);
      // a stored response is announced complete only once it is stored (the next turn may go to another
      // replica), a structured one once its answer is checked
      if (this.storing || this.plan.format !== null) return;
    }
    if (this.plan.stream) this.write(obj);
  }

  /** The generation ended: the response checked, stored, and answered (or its stream ended). */
  async finish({ error }: { usage: UpstreamUsage | null; error: UpstreamError | null }): Promise<void> {
    const { svc, res, plan } = this;
    if (error) svc.logger.warn({ code: error.code, status: error.upstreamStatus }, error.message);
    const finished = this.final;
    const response = finished && isObj(finished.response) ? finished.response : null;
    const responseId = response && typeof response.id === "string" ? response.id : "";
    logRepaired(svc, { response: responseId, choice: 0, recoveries: this.repaired, tools: plan.tools, calls: plan.calls }, this.generated);
    const format = plan.format;
    let note: CheckNote = null;
    if (format !== null && response && response.status === "completed") {
      // a response that only calls functions has no answer to check
      const text = typeof response.output_text === "string" && response.output_text !== "" ? response.output_text : null;
      note = await checkAnswers(svc, format, [text], responseId);
    }
    const harmony = response ? harmonyOf(this.dropped, note) : null;
    if (response && harmony !== null) response.harmony = harmony;
    if (this.storing && response && typeof response.id === "string") {
      const id = response.id;
      const outcome = await svc.responses.put(this.tenant, id, { response, input: storedInputItems(this.items, id.replace(/^resp_/, "")) });
      svc.metrics.responses.inc({ op: "store", outcome });
      if (outcome === "too_large") {
        response.store = false;
        svc.logger.warn({ response: id }, "a response's conversation is over the stored size bound: answered, not stored");
      }
    }
    if (res.destroyed) return;
    if (!plan.stream) {
      if (error && (!response || response.status !== "completed"))
        return refuse(res, error.status, errorType(error.status), error.code, error.message);
      sendJson(res, 200, response);
      return;
    }
    if ((this.storing || format !== null) && finished) this.write(finished);
    // what was held for a client behind, or written in this turn, goes first, in the one write of the stream's end
    const rest = this.flow.rest();
    if (!this.started) {
      if (error) return refuse(res, error.status, errorType(error.status), error.code, error.message);
      setupSse(res);
    }
    if (rest !== "") res.write(rest);
    if (error)
      res.write(`event: error\ndata: ${JSON.stringify({ type: "error", code: error.code, message: error.message, param: null })}\n\n`);
    res.end();
  }
}
