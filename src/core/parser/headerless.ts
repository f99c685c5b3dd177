/**
 * Rule 13's record: the assistant's text with no header, while nobody
 * knows yet whether it is reasoning or the answer. Its message_end waits
 * for the decision (another message follows: reasoning; the completion
 * ends with none: the answer too).
 */
import type { StopKind } from "../events.js";
import type { ParsedHeader } from "../header.js";

export class Headerless {
  /** The text's message index, or -1 (none waits). */
  index = -1;
  /** How it ended; null while it is still open. */
  stop: StopKind | null = null;
  /** Its header's fields (a content type or name read with it), once it has ended. */
  header: ParsedHeader | null = null;
  /** Its tokens, [from, to). */
  from = 0;
  to = 0;
  /** Its text outgrew MAX_HEADERLESS_CHARS: what was kept is what is given again. */
  cut = false;
  /** A final answer or a call came: headerless text after it is never the answer. */
  answered = false;

  reset(): void {
    this.index = -1;
    this.stop = null;
    this.header = null;
    this.from = this.to = 0;
    this.cut = false;
    this.answered = false;
  }
}
