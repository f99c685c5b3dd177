/**
 * Calls the model made where none were allowed (the request declares no
 * tools, or says tool_choice "none"). The parser reads such a message as
 * text on its channel, after a `call_not_allowed` recovery (counted in
 * `harmony_recoveries_total` and logged at warn level like every
 * recovery); a call's arguments are no answer, so the adapters drop that
 * message's text and say so in the answer (`harmony.recoveries`). Pure.
 */
import type { HarmonyEvent } from "../core/events.js";

/** A dropped call, as the answer says it. */
export interface DroppedCall {
  kind: "call_not_allowed";
  detail: string;
}

export class DroppedCalls {
  readonly recoveries: DroppedCall[] = [];
  /** A recovery was seen: the next message that starts (or first speaks) is the call read as text. */
  private pending = false;
  private dropped = -1;
  private lastEnded = -1;

  /** Whether a delta of message `index` is kept with nothing to note: no recovery waits for its message, and it is not the dropped one (what drops() says of it, without a change). */
  keeps(index: number): boolean {
    return !this.pending && index !== this.dropped;
  }

  /** Whether `event` belongs to a dropped call (and is to be left out); notes the recoveries. */
  drops(event: HarmonyEvent): boolean {
    switch (event.type) {
      case "recovery":
        if (event.kind === "call_not_allowed") {
          this.recoveries.push({ kind: "call_not_allowed", detail: event.detail });
          this.pending = true;
        }
        return false;
      case "message_start":
        if (this.pending) {
          this.pending = false;
          this.dropped = event.index;
        }
        return event.index === this.dropped;
      case "delta":
        // a primed completion's first message has no message_start
        if (this.pending && event.index > this.lastEnded) {
          this.pending = false;
          this.dropped = event.index;
        }
        return event.index === this.dropped;
      case "message_end":
        this.lastEnded = Math.max(this.lastEnded, event.index);
        return event.index === this.dropped;
      default:
        return false;
    }
  }
}
