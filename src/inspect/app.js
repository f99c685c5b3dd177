// @ts-check
/**
 * The stream inspector page (GET /inspect): reads the input (the text box,
 * a dropped or opened file, or the URL fragment), asks POST /v1/parse for
 * the resilient and the strict parse, and shows both. The pure parts live
 * in ./logic.js (src/inspect/logic.ts, unit-tested); this file only touches
 * the page. Typechecked with `npx tsc -p src/inspect/tsconfig.json`.
 */
import {
  chunksUpTo,
  collectMessages,
  decodeFragment,
  describeKind,
  detectInput,
  encodeFragment,
  eventsAtStep,
  groupMarks,
  PageError,
  parseIdList,
  positions,
  readSseLog,
  segmentTokens,
  summarize,
} from "./logic.js";

/** @typedef {import("./logic.js").InspectEvent} InspectEvent */
/** @typedef {import("./logic.js").ParseAnswer} ParseAnswer */
/** @typedef {import("./logic.js").FragmentInput} FragmentInput */
/** @typedef {import("./logic.js").StreamedChunk} StreamedChunk */
/** @typedef {{ step(k: number): void }} StepView */

/** Tokens drawn per pane; the rest are summarised (the messages are always whole). */
const MAX_TOKENS_SHOWN = 20000;
/** Rows drawn per events or chunks list; the rest are summarised. */
const MAX_ROWS_SHOWN = 5000;
const EXAMPLE =
  '<|start|>assistant to=functions.get_weather<|channel|>commentary<|end|><|start|>assistant<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>';

/**
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
function byId(id, type) {
  const el = document.getElementById(id);
  if (!(el instanceof type)) throw new PageError("bug", `#${id} is missing`);
  return el;
}

const form = byId("input-form", HTMLFormElement);
const input = byId("input", HTMLTextAreaElement);
const role = byId("role", HTMLSelectElement);
const afterStop = byId("after-stop", HTMLSelectElement);
const tools = byId("tools", HTMLInputElement);
const calls = byId("calls", HTMLSelectElement);
const detected = byId("detected", HTMLSpanElement);
const stepper = byId("stepper", HTMLDivElement);
const stepInput = byId("step", HTMLInputElement);
const stepLabel = byId("step-label", HTMLOutputElement);
const token = byId("token", HTMLInputElement);
const tokenLabel = byId("token-label", HTMLLabelElement);
const status = byId("status", HTMLSpanElement);
const notes = byId("notes", HTMLUListElement);
const link = byId("link", HTMLInputElement);
const fileInput = byId("file", HTMLInputElement);
const overlay = byId("drop-overlay", HTMLDivElement);

token.value = sessionStorage.getItem("harmony-inspect-token") ?? "";
if (token.value) tokenLabel.hidden = false;

/**
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {(Node | string | null)[]} [children]
 * @returns {HTMLElement}
 */
function h(tag, attrs = {}, children = []) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null) el.append(c);
  return el;
}

function selectedKind() {
  const checked = form.querySelector('input[name="kind"]:checked');
  return checked instanceof HTMLInputElement ? checked.value : "auto";
}

/** @param {string} kind */
function setKind(kind) {
  const radio = form.querySelector(`input[name="kind"][value="${kind}"]`);
  if (radio instanceof HTMLInputElement) radio.checked = true;
}

function toolList() {
  return tools.value
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "");
}

/**
 * What to send: ids or text, from the box as the chosen kind reads it.
 * @returns {{ ids?: number[], text?: string, notes: string[] }}
 */
function readInput() {
  const raw = input.value;
  let kind = selectedKind();
  if (kind === "auto") {
    kind = detectInput(raw);
    detected.textContent = raw.trim() === "" ? "" : `(found ${describeKind(/** @type {any} */ (kind))})`;
  }
  if (kind === "ids") return { ids: parseIdList(raw), notes: [] };
  if (kind === "sse") {
    const r = readSseLog(raw);
    const head = `SSE log: ${r.chunks} chunk${r.chunks === 1 ? "" : "s"} (${r.format})`;
    if (r.ids) return { ids: r.ids, notes: [`${head}: ${r.ids.length} token ids`, ...r.notes] };
    if (r.text !== null) return { text: r.text, notes: [head, ...r.notes] };
    throw new PageError("bad_json", [head, ...r.notes].join("; "));
  }
  // one trailing newline (as editors and echo leave) is not part of the stream, as in `parse --input text`
  return { text: raw.replace(/\r?\n$/, ""), notes: [] };
}

/**
 * @param {Record<string, unknown>} body
 * @returns {Promise<ParseAnswer>}
 */
async function parse(body) {
  /** @type {Record<string, string>} */
  const headers = { "content-type": "application/json" };
  if (token.value) headers.authorization = `Bearer ${token.value}`;
  const res = await fetch("/v1/parse", { method: "POST", headers, body: JSON.stringify(body) });
  const answer = await res.json().catch(() => null);
  if (res.status === 401) {
    tokenLabel.hidden = false;
    token.focus();
  }
  if (!res.ok) {
    const e = answer && answer.error;
    throw new PageError("unreachable", e && e.code ? `${res.status} ${e.code}: ${e.message}` : `HTTP ${res.status}`);
  }
  return answer;
}

let running = 0;

/** The parse shown: each view's stepping, and the number of tokens (the stepper runs 0 … n + 1). */
const shown = { n: 0, views: /** @type {StepView[]} */ ([]) };

const PANES = ["#pane-resilient", "#pane-strict", "#events-resilient", "#events-strict", "#chunks-chat", "#chunks-responses"];

/** @param {string} selector */
function paneBody(selector) {
  const body = document.querySelector(`${selector} .pane-body`);
  if (!(body instanceof HTMLElement)) throw new PageError("bug", `${selector} is missing`);
  return body;
}

/**
 * Say an error in every view, in place of what an earlier parse left there (which no longer matches the input).
 * @param {string} message
 */
function showFailure(message) {
  for (const sel of PANES) paneBody(sel).replaceChildren(h("p", { class: "failure", role: "alert" }, [message]));
  shown.views = [];
  stepper.hidden = true;
  status.textContent = message;
}

async function run() {
  const mine = ++running;
  notes.replaceChildren();
  let what;
  try {
    what = readInput();
  } catch (e) {
    showFailure(`Could not read the input: ${/** @type {Error} */ (e).message}`);
    return;
  }
  const kind = selectedKind() === "auto" ? detected.textContent : "";
  for (const n of what.notes) notes.append(h("li", {}, [n]));
  if (token.value) sessionStorage.setItem("harmony-inspect-token", token.value);
  const options = {
    role: /** @type {any} */ (role.value),
    afterStop: /** @type {any} */ (afterStop.value),
    tools: toolList(),
    calls: /** @type {any} */ (calls.value),
  };
  /** @type {FragmentInput} */
  const frag = what.ids ? { kind: "ids", value: what.ids.join(","), ...options } : { kind: "text", value: what.text ?? "", ...options };
  const hash = encodeFragment(frag);
  if (location.hash !== hash) history.replaceState(null, "", hash);
  link.hidden = true;
  const base = {
    ...(what.ids ? { ids: what.ids } : { text: what.text }),
    role: role.value,
    after_stop: afterStop.value,
    ...(toolList().length > 0 ? { tools: toolList() } : {}),
    ...(calls.value !== "any" ? { calls: calls.value } : {}),
    tokens: true,
  };
  status.textContent = "Parsing…";
  const t0 = performance.now();
  const [resilient, strict] = await Promise.allSettled([
    parse({ ...base, mode: "resilient", chunks: true }),
    parse({ ...base, mode: "strict" }),
  ]);
  if (mine !== running) return; // a later run took over
  status.textContent = `Parsed in ${Math.round(performance.now() - t0)} ms${kind ? `: ${kind.slice(1, -1)}` : ""}.`;
  /** @type {StepView[]} */
  const views = [];
  let n = 0;
  for (const [mode, r] of /** @type {const} */ ([
    ["resilient", resilient],
    ["strict", strict],
  ])) {
    const pane = paneBody(`#pane-${mode}`);
    const events = paneBody(`#events-${mode}`);
    if (r.status === "fulfilled") {
      n = r.value.tokens?.length ?? 0;
      const p = renderPane(mode, r.value);
      pane.replaceChildren(...p.nodes);
      const ev = renderEvents(r.value);
      events.replaceChildren(...ev.nodes);
      views.push(p, ev);
      if (mode === "resilient") {
        const chat = renderChunks(r.value, "chat");
        const resp = renderChunks(r.value, "responses");
        paneBody("#chunks-chat").replaceChildren(...chat.nodes);
        paneBody("#chunks-responses").replaceChildren(...resp.nodes);
        views.push(chat, resp);
      }
    } else {
      const message = `Could not parse: ${r.reason.message}`;
      for (const body of mode === "resilient" ? [pane, events, paneBody("#chunks-chat"), paneBody("#chunks-responses")] : [pane, events])
        body.replaceChildren(h("p", { class: "failure", role: "alert" }, [message]));
      status.textContent = r.reason.message;
    }
  }
  shown.n = n;
  shown.views = views;
  stepper.hidden = views.length === 0;
  stepInput.max = String(n + 1);
  setStep(n + 1);
}

/**
 * Show the stream as it stood after `k` tokens (0 … n; n + 1: after its end too).
 * @param {number} k
 */
function setStep(k) {
  const n = shown.n;
  const step = Math.max(0, Math.min(n + 1, Math.round(k)));
  stepInput.value = String(step);
  for (const v of shown.views) v.step(step);
  stepLabel.textContent =
    step > n ? `all ${n} token${n === 1 ? "" : "s"} and the end of the stream` : `${step} of ${n} token${n === 1 ? "" : "s"} written`;
}

/**
 * The text a token shows: newlines as ↵ (then the line break), tabs as →.
 * @param {string} label
 */
function visible(label) {
  return label.replace(/\t/g, "→\t").replace(/\r?\n/g, "↵\n");
}

/**
 * @param {InspectEvent} e
 */
function markText(e) {
  if (e.type === "error") return `error ${e.code}: ${e.message}`;
  return `recovery ${e.kind}: ${e.detail}${e.raw !== undefined ? ` (raw ${JSON.stringify(e.raw)})` : ""}`;
}

/**
 * One pane's content: summary, tokens, messages, recoveries and errors, and
 * how it steps: tokens not yet written are dimmed, and the summary, marks
 * and messages are those of the events so far.
 * @param {string} mode
 * @param {ParseAnswer} answer
 * @returns {{ nodes: HTMLElement[], step(k: number): void }}
 */
function renderPane(mode, answer) {
  const p = mode === "strict" ? "s" : "r";
  const events = answer.events;
  const { tokens, endMarks } = segmentTokens(answer);
  const n = tokens.length;

  // the stream, token by token
  const stream = h("div", { class: "tokens", role: "group", "aria-label": `${mode} tokens` });
  const drawn = Math.min(n, MAX_TOKENS_SHOWN);
  const frag = document.createDocumentFragment();
  /** @type {HTMLElement[]} */
  const spans = [];
  for (let i = 0; i < drawn; i++) {
    const t = tokens[i];
    const span = document.createElement("span");
    span.className = `tok c-${t.cls}${t.tool ? " tool" : ""}`;
    span.textContent = visible(t.label);
    span.dataset.m = String(t.message);
    span.title = `#${t.at} · id ${t.id} · ${t.cls}${t.message >= 0 ? ` · message ${t.message}` : ""}`;
    if (t.marks.length > 0) {
      const kinds = t.marks.map((m) => events[m]);
      const isError = kinds.some((e) => e.type === "error");
      span.classList.add(isError ? "mark-error" : "mark-recovery");
      span.id = `${p}-t${t.at}`;
      span.tabIndex = 0;
      span.title += "\n" + kinds.map(markText).join("\n");
      span.setAttribute("aria-label", `token ${t.at} ${JSON.stringify(t.label)}: ${kinds.map(markText).join("; ")}`);
      const badge = h("sup", { class: "badge", "aria-hidden": "true" }, [kinds.map((e) => (e.type === "error" ? "✖" : "⚑")).join("")]);
      span.append(badge);
    }
    spans.push(span);
    frag.append(span);
  }
  /** @type {HTMLElement | null} */
  let end = null;
  if (endMarks.length > 0) {
    end = h("span", { class: "tok c-control mark-end", id: `${p}-tend`, tabindex: "0" }, ["⟨end of stream⟩"]);
    const kinds = endMarks.map((m) => events[m]);
    end.classList.add(kinds.some((e) => e.type === "error") ? "mark-error" : "mark-recovery");
    end.title = kinds.map(markText).join("\n");
    end.setAttribute("aria-label", `end of stream: ${kinds.map(markText).join("; ")}`);
    frag.append(end);
  }
  stream.append(frag);
  const more = n > drawn ? h("p", { class: "note" }, [`Showing the first ${drawn} of ${n} tokens.`]) : null;

  const summaryBox = h("div", {});
  const marksHead = h("h3", {});
  const marksBox = h("div", {});
  const messagesHead = h("h3", {});
  const messagesBox = h("div", {});

  /** The summary, marks and messages of the first `count` events. @param {number} count @param {boolean} ended */
  const draw = (count, ended) => {
    const sofar = events.slice(0, count);
    const { done, recoveries, errors } = summarize(sofar);
    summaryBox.replaceChildren(
      h("p", { class: "summary" }, [
        done
          ? `${done.tokens} tokens · ${done.messages} message${done.messages === 1 ? "" : "s"} · finish ${done.finish_reason} · `
          : ended
            ? "no done event · "
            : `${count} of ${events.length} events so far · `,
        h("span", { class: recoveries.length ? "count warn" : "count" }, [
          `${recoveries.length} recover${recoveries.length === 1 ? "y" : "ies"}`,
        ]),
        " · ",
        h("span", { class: errors.length ? "count bad" : "count" }, [`${errors.length} error${errors.length === 1 ? "" : "s"}`]),
      ]),
    );
    // recoveries and errors, each a link to its token; identical ones grouped with a count
    const all = [...errors, ...recoveries].sort((a, b) => a - b);
    const groups = groupMarks(events, all);
    marksHead.textContent = `Recoveries and errors (${all.length}${groups.length < all.length ? `; ${groups.length} different` : ""})`;
    const list = h("ol", { class: "marks" });
    for (const g of groups) {
      const e = events[g.first];
      const at = g.ats[0];
      const target = at >= 0 && at < drawn ? `${p}-t${at}` : at >= n ? `${p}-tend` : null;
      const where = h("button", { type: "button", class: "jump", ...(target ? { "data-target": target } : { disabled: "" }) }, [
        g.ats.length > 1 ? `tokens ${positions(g.ats, n)}` : at >= n ? "end" : `token ${at}`,
      ]);
      const item = h("li", { class: e.type === "error" ? "error" : "recovery" }, [
        where,
        " ",
        h("strong", {}, [e.type === "error" ? `error ${e.code}` : `${e.kind}`]),
        g.events.length > 1 ? h("span", { class: "times", title: `${g.events.length} times` }, [` ×${g.events.length}`]) : null,
        " ",
        h("span", {}, [e.type === "error" ? (e.message ?? "") : (e.detail ?? "")]),
      ]);
      if (e.raw !== undefined) item.append(" ", h("span", { class: "raw-label" }, ["raw"]), " ", h("code", { class: "raw" }, [e.raw]));
      list.append(item);
    }
    marksBox.replaceChildren(all.length > 0 ? list : h("p", { class: "empty" }, ["None."]));
    // messages
    const messages = collectMessages(sofar);
    messagesHead.textContent = `Messages (${messages.length})`;
    const cards = h("ol", { class: "messages" });
    for (const m of messages) {
      const head = h("div", { class: "msg-head" }, [
        h("span", { class: `chip c-${m.cls}` }, [`#${m.index} ${m.role}${m.name ? ` (${m.name})` : ""}`]),
        m.channel !== null ? h("span", { class: "field" }, [`channel ${m.channel}`]) : null,
        m.recipient !== null ? h("span", { class: "field" }, [`to ${m.recipient}`]) : null,
        m.content_type !== null ? h("span", { class: "field" }, [`type ${m.content_type}`]) : null,
        h("span", { class: "field stop" }, [m.stop ? `stop ${m.stop}` : ended ? "not ended" : "open"]),
      ]);
      const card = h("li", { class: `msg b-${m.cls}`, tabindex: "0", "data-m": String(m.index) }, [head]);
      if (m.call) {
        card.append(
          h("div", { class: "call" }, [
            h("span", {}, [`tool call ${m.call.id} → ${m.call.name} `]),
            h("span", { class: m.call.valid_json ? "json ok" : "json bad" }, [
              m.call.valid_json ? "valid_json: true" : "valid_json: false",
            ]),
          ]),
          h("pre", { class: "args" }, [m.call.pretty]),
        );
      } else {
        if (m.open_call)
          card.append(
            h("div", { class: "call" }, [
              `tool call ${m.open_call.id} → ${m.open_call.name} (${ended ? "no tool_call_end" : "arguments so far"})`,
            ]),
          );
        card.append(h("pre", { class: "text" }, [m.text === "" ? "(empty)" : m.text]));
      }
      cards.append(card);
    }
    if (messages.length === 0) cards.append(h("li", { class: "empty" }, ["No messages."]));
    messagesBox.replaceChildren(cards);
  };

  let at = drawn; // tokens shown as written
  const out = [summaryBox, h("h3", {}, ["Tokens"]), stream];
  if (more) out.push(more);
  out.push(marksHead, marksBox, messagesHead, messagesBox);
  return {
    nodes: out,
    step(k) {
      const to = Math.min(k, drawn);
      for (let i = Math.min(at, to); i < Math.max(at, to); i++) spans[i].classList.toggle("future", i >= to);
      at = to;
      if (end) end.classList.toggle("future", k <= n);
      draw(eventsAtStep(answer, k), k > n);
    },
  };
}

/**
 * The events, one JSON line each, with the token that produced it; stepping hides those not yet emitted.
 * @param {ParseAnswer} answer
 * @returns {{ nodes: HTMLElement[], step(k: number): void }}
 */
function renderEvents(answer) {
  const events = answer.events;
  const emitted = answer.emitted ?? [];
  const n = answer.tokens?.length ?? 0;
  const list = h("ol", { class: "rows events", start: "0" });
  const rows = Math.min(events.length, MAX_ROWS_SHOWN);
  /** @type {HTMLElement[]} */
  const items = [];
  for (let i = 0; i < rows; i++) {
    const e = events[i];
    const at = emitted[i] ?? n;
    const li = h("li", { class: `row ev-${e.type}` }, [
      h("span", { class: "row-at", title: at >= n ? "emitted at the end of the stream" : `emitted when token ${at} was written` }, [
        at >= n ? "end" : `@${at}`,
      ]),
      h("code", {}, [JSON.stringify(e)]),
    ]);
    items.push(li);
    list.append(li);
  }
  const count = h("p", { class: "summary" });
  const more = events.length > rows ? h("p", { class: "note" }, [`Showing the first ${rows} of ${events.length} events.`]) : null;
  return {
    nodes: [count, list, ...(more ? [more] : [])],
    step(k) {
      const c = eventsAtStep(answer, k);
      items.forEach((li, i) => (li.hidden = i >= c));
      count.textContent = `${c} of ${events.length} events so far; each with the token whose write emitted it`;
    },
  };
}

/**
 * What the OpenAI front would stream for the resilient parse: its Chat chunks (`data: …`) or Responses events (`event: …` / `data: …`).
 * @param {ParseAnswer} answer
 * @param {"chat" | "responses"} api
 * @returns {{ nodes: HTMLElement[], step(k: number): void }}
 */
function renderChunks(answer, api) {
  const chunks = answer.chunks?.[api] ?? [];
  const emitted = answer.emitted ?? [];
  const n = answer.tokens?.length ?? 0;
  const list = h("ol", { class: "rows chunks", start: "0" });
  const rows = Math.min(chunks.length, MAX_ROWS_SHOWN);
  /** @type {HTMLElement[]} */
  const items = [];
  for (let i = 0; i < rows; i++) {
    const c = chunks[i];
    const at = emitted[c.event] ?? n;
    const sse = api === "chat" ? `data: ${JSON.stringify(c.data)}` : `event: ${String(c.data.type)}\ndata: ${JSON.stringify(c.data)}`;
    const li = h("li", { class: "row" }, [
      h(
        "span",
        { class: "row-at", title: `from event ${c.event}${at >= n ? ", at the end of the stream" : `, when token ${at} was written`}` },
        [at >= n ? "end" : `@${at}`],
      ),
      h("code", {}, [sse]),
    ]);
    items.push(li);
    list.append(li);
  }
  const last =
    api === "chat" ? h("li", { class: "row" }, [h("span", { class: "row-at" }, ["end"]), h("code", {}, ["data: [DONE]"])]) : null;
  if (last) list.append(last);
  const count = h("p", { class: "summary" });
  const note = h("p", { class: "note" }, [
    api === "chat"
      ? "One chunk per token, as vLLM streams by default (--stream-interval 1); the front's id and created time differ per request, and usage (the engine's count) is added when the request asks for it."
      : "The front's response id differs per request, and usage (the engine's count) is set on the closing event.",
  ]);
  const more = chunks.length > rows ? h("p", { class: "note" }, [`Showing the first ${rows} of ${chunks.length}.`]) : null;
  return {
    nodes: [count, list, ...(more ? [more] : []), note],
    step(k) {
      const c = chunksUpTo(chunks, eventsAtStep(answer, k));
      items.forEach((li, i) => (li.hidden = i >= c));
      if (last) last.hidden = k <= n;
      count.textContent = `${c} of ${chunks.length} ${api === "chat" ? "chunks" : "events"} sent so far`;
    },
  };
}

// ------------------------------------------------------------ interaction

/** Highlight a message's tokens while its card is hovered or focused. @param {Event} ev @param {boolean} on */
function highlight(ev, on) {
  const card = ev.target instanceof Element ? ev.target.closest(".msg") : null;
  const pane = card?.closest(".pane");
  if (!(card instanceof HTMLElement) || !pane) return;
  for (const t of pane.querySelectorAll(`.tok[data-m="${card.dataset.m}"]`)) t.classList.toggle("hl", on);
}
for (const type of ["mouseover", "focusin"]) document.addEventListener(type, (ev) => highlight(ev, true));
for (const type of ["mouseout", "focusout"]) document.addEventListener(type, (ev) => highlight(ev, false));

document.addEventListener("click", (ev) => {
  const button = ev.target instanceof Element ? ev.target.closest("button.jump") : null;
  if (!(button instanceof HTMLButtonElement) || !button.dataset.target) return;
  const t = document.getElementById(button.dataset.target);
  if (!t) return;
  t.scrollIntoView({ block: "center", behavior: "smooth" });
  t.focus({ preventScroll: true });
  t.classList.remove("flash");
  void t.offsetWidth; // restart the animation
  t.classList.add("flash");
});

// stepping: the buttons, the slider, and the arrow keys on it
byId("step-first", HTMLButtonElement).addEventListener("click", () => setStep(0));
byId("step-prev", HTMLButtonElement).addEventListener("click", () => setStep(Number(stepInput.value) - 1));
byId("step-next", HTMLButtonElement).addEventListener("click", () => setStep(Number(stepInput.value) + 1));
byId("step-last", HTMLButtonElement).addEventListener("click", () => setStep(shown.n + 1));
stepInput.addEventListener("input", () => setStep(Number(stepInput.value)));

// the views: tabs, with the arrow keys moving between them
const tabs = [...document.querySelectorAll('[role="tab"]')].filter((t) => t instanceof HTMLButtonElement);
/** @param {HTMLButtonElement} tab @param {boolean} focus */
function selectTab(tab, focus) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    const panel = document.getElementById(t.getAttribute("aria-controls") ?? "");
    if (panel) panel.hidden = !on;
  }
  if (focus) tab.focus();
}
for (const t of tabs) {
  t.addEventListener("click", () => selectTab(t, false));
  t.addEventListener("keydown", (ev) => {
    const i = tabs.indexOf(t);
    const to =
      ev.key === "ArrowRight" ? i + 1 : ev.key === "ArrowLeft" ? i - 1 : ev.key === "Home" ? 0 : ev.key === "End" ? tabs.length - 1 : null;
    if (to === null) return;
    ev.preventDefault();
    selectTab(tabs[(to + tabs.length) % tabs.length], true);
  });
}

// Detect says what it finds as the input changes
function updateDetected() {
  detected.textContent = selectedKind() === "auto" && input.value.trim() !== "" ? `(found ${describeKind(detectInput(input.value))})` : "";
}
input.addEventListener("input", updateDetected);
form.addEventListener("change", (ev) => {
  if (ev.target instanceof HTMLInputElement && ev.target.name === "kind") updateDetected();
});

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  void run();
});
input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    void run();
  }
});

byId("copy-link", HTMLButtonElement).addEventListener("click", async () => {
  let url = location.href;
  try {
    const what = readInput();
    const frag = what.ids
      ? { kind: /** @type {const} */ ("ids"), value: what.ids.join(",") }
      : { kind: /** @type {const} */ ("text"), value: what.text ?? "" };
    url =
      location.href.replace(/#.*$/, "") +
      encodeFragment({
        ...frag,
        role: /** @type {any} */ (role.value),
        afterStop: /** @type {any} */ (afterStop.value),
        tools: toolList(),
        calls: /** @type {any} */ (calls.value),
      });
  } catch {
    // the link of the last parse, then
  }
  link.value = url;
  try {
    await navigator.clipboard.writeText(url);
    status.textContent = "Link copied.";
  } catch {
    // no clipboard (plain http on another host): show the link, selected, to copy by hand
    link.hidden = false;
    link.focus();
    link.select();
    status.textContent = "Copy the link from the box.";
  }
});

byId("example", HTMLButtonElement).addEventListener("click", () => {
  input.value = EXAMPLE;
  setKind("auto");
  updateDetected();
  void run();
});

/** @param {File} file */
async function openFile(file) {
  input.value = await file.text();
  setKind("auto");
  updateDetected();
  status.textContent = `Read ${file.name}.`;
  void run();
}
fileInput.addEventListener("change", () => {
  const f = fileInput.files?.[0];
  if (f) void openFile(f);
});
let dragDepth = 0;
document.addEventListener("dragenter", (ev) => {
  if (!ev.dataTransfer?.types.includes("Files")) return;
  dragDepth++;
  overlay.hidden = false;
});
document.addEventListener("dragleave", () => {
  if (--dragDepth <= 0) {
    dragDepth = 0;
    overlay.hidden = true;
  }
});
document.addEventListener("dragover", (ev) => ev.preventDefault());
document.addEventListener("drop", (ev) => {
  ev.preventDefault();
  dragDepth = 0;
  overlay.hidden = true;
  const f = ev.dataTransfer?.files[0];
  if (f) void openFile(f);
});

/** Load the input the URL fragment holds, and parse it. */
function fromFragment() {
  const f = decodeFragment(location.hash);
  if (!f) return false;
  input.value = f.value;
  setKind(f.kind);
  role.value = f.role ?? "assistant";
  afterStop.value = f.afterStop ?? "drop";
  tools.value = (f.tools ?? []).join(", ");
  calls.value = f.calls ?? "any";
  updateDetected();
  void run();
  return true;
}
window.addEventListener("hashchange", () => {
  fromFragment();
});
if (!fromFragment()) input.focus();
