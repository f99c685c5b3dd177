/**
 * What a generated completion means to an OpenAI client: the reasoning, the
 * text a Chat answer's `content` carries, the final answer, the function
 * calls, and the finish reason. The engine simulator reports it for every
 * choice it generates; `loadtest --openai` compares it with what came back.
 */
import type { ReferenceMessage } from "../core/events.js";

export interface IntendedCall {
  /** The function's name, without the `functions.` namespace. */
  name: string;
  /** The arguments as the model meant them (JSON text). */
  arguments: string;
}

export interface Intent {
  /** The analysis channel's text (messages without a recipient), joined. */
  reasoning: string;
  /** A Chat answer's `content`: preambles (commentary without a recipient) and the final answer, in order. */
  content: string;
  /** The final channel's text only (a Responses `final_answer` message). */
  answer: string;
  /** Complete function calls, in order (a call cut by the end of the output is not one). */
  calls: IntendedCall[];
  /** `length` when the output ends without a stop, else `tool_calls` after a call, else `stop`. */
  finish: "stop" | "tool_calls" | "length";
}

/**
 * The intent of `intended` messages. `ended`: the output ends at a stop the
 * engine honours; `lastPartial`: the output was cut inside its last message.
 */
export function intentOf(intended: readonly ReferenceMessage[], ended: boolean, lastPartial = false): Intent {
  const intent: Intent = { reasoning: "", content: "", answer: "", calls: [], finish: "stop" };
  intended.forEach((m, i) => {
    if (m.role !== "assistant") return;
    const cut = lastPartial && i === intended.length - 1;
    if (m.recipient !== undefined) {
      if (m.recipient.startsWith("functions.") && !cut)
        intent.calls.push({ name: m.recipient.slice("functions.".length), arguments: m.content });
      return;
    }
    if (m.channel === "analysis") intent.reasoning += m.content;
    else if (m.channel === "final") {
      intent.answer += m.content;
      intent.content += m.content;
    } else if (m.channel === "commentary") intent.content += m.content;
  });
  intent.finish = !ended ? "length" : intent.calls.length > 0 ? "tool_calls" : "stop";
  return intent;
}
