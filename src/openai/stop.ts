/**
 * Chat Completions' `stop` with OpenAI's meaning, on the sidecar's side of
 * the parse: the answer (a choice's `content`) ends before the first stop
 * string it contains; the reasoning is never searched, and no stop string is
 * sent to the engine (which would search the text of the whole completion,
 * reasoning and Harmony headers included). While the answer streams, text
 * that might be the start of a stop string is held back until it is known not
 * to be; it goes out when the answer ends. `stop` has been checked first
 * (src/openai/sampling.ts: a string or at most 16 of them, each at most 1024
 * characters).
 */

/** One stop string as a Knuth–Morris–Pratt matcher: how much of it the text seen so far ends with. */
class Matcher {
  /** For each prefix length, the longest proper prefix that is also its suffix. */
  private readonly fail: Int32Array;
  /** Characters of the stop string the text seen so far ends with. */
  state = 0;

  constructor(readonly stop: string) {
    const f = new Int32Array(stop.length);
    for (let i = 1, k = 0; i < stop.length; i++) {
      while (k > 0 && stop[i] !== stop[k]) k = f[k - 1]!;
      if (stop[i] === stop[k]) k++;
      f[i] = k;
    }
    this.fail = f;
  }

  /** One more character; true when the stop string ends with it. */
  step(c: string): boolean {
    let q = this.state;
    const s = this.stop;
    while (q > 0 && s[q] !== c) q = this.fail[q - 1]!;
    if (s[q] === c) q++;
    if (q === s.length) {
      this.state = this.fail[q - 1]!;
      return true;
    }
    this.state = q;
    return false;
  }
}

export class StopStrings {
  private readonly matchers: Matcher[];
  /** Characters that may still be a stop string's beginning (at most the longest one's length less one). */
  private held = "";
  private hit = false;

  private constructor(stops: string[]) {
    this.matchers = stops.map((s) => new Matcher(s));
  }

  /** The request's `stop` (a string or strings), or null when it names none. */
  static of(stop: unknown): StopStrings | null {
    const list = typeof stop === "string" ? [stop] : Array.isArray(stop) ? stop : [];
    const stops = list.filter((s): s is string => typeof s === "string" && s !== "");
    return stops.length > 0 ? new StopStrings(stops) : null;
  }

  /** Whether a stop string has been found (the answer has ended). */
  get stopped(): boolean {
    return this.hit;
  }

  /**
   * More of the answer: what may go out now (each character looked at once
   * per stop string). At the first stop string to end, the text before it
   * goes out and nothing ever after.
   */
  push(text: string): string {
    if (this.hit || text === "") return "";
    const all = this.held + text;
    for (let i = this.held.length; i < all.length; i++) {
      const c = all[i]!;
      for (const m of this.matchers) {
        if (m.step(c)) {
          this.hit = true;
          this.held = "";
          return all.slice(0, i + 1 - m.stop.length);
        }
      }
    }
    let keep = 0;
    for (const m of this.matchers) if (m.state > keep) keep = m.state;
    this.held = all.slice(all.length - keep);
    return all.slice(0, all.length - keep);
  }

  /** The answer's text ended (the choice ends, or a call comes between): what was held goes out, and matching starts afresh. */
  flush(): string {
    const out = this.hit ? "" : this.held;
    this.held = "";
    for (const m of this.matchers) m.state = 0;
    return out;
  }
}
