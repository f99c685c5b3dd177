// @ts-check
/**
 * The stream inspector page (GET /inspect): reads the input (the text box,
 * a dropped or opened file, or the URL fragment), asks POST /v1/parse for
 * the resilient and the strict parse, and shows both. The pure parts live
 * in ./logic.js (src/inspect/logic.ts, unit-tested); this file only touches
 * the page. Typechecked with `npx tsc -p src/inspect/tsconfig.json`.
 */
import {
  collectMessages,
  decodeFragment,
  detectInput,
  encodeFragment,
  parseIdList,
  readSseLog,
  segmentTokens,
  summarize,
} from "./logic.js";

/** @typedef {import("./logic.js").InspectEvent} InspectEvent */
/** @typedef {import("./logic.js").ParseAnswer} ParseAnswer */
/** @typedef {import("./logic.js").FragmentInput} FragmentInput */

/** Tokens drawn per pane; the rest are summarised (the messages are always whole). */
const MAX_TOKENS_SHOWN = 20000;
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
  if (!(el instanceof type)) throw new Error(`#${id} is missing`);
  return el;
}

const form = byId("input-form", HTMLFormElement);
const input = byId("input", HTMLTextAreaElement);
const role = byId("role", HTMLSelectElement);
const afterStop = byId("after-stop", HTMLSelectElement);
const tools = byId("tools", HTMLInputElement);
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
  if (kind === "auto") kind = detectInput(raw);
  if (kind === "ids") return { ids: parseIdList(raw), notes: [] };
  if (kind === "sse") {
    const r = readSseLog(raw);
    const head = `SSE log: ${r.chunks} chunk${r.chunks === 1 ? "" : "s"} (${r.format})`;
    if (r.ids) return { ids: r.ids, notes: [`${head}: ${r.ids.length} token ids`, ...r.notes] };
    if (r.text !== null) return { text: r.text, notes: [head, ...r.notes] };
    throw new Error([head, ...r.notes].join("; "));
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
    throw new Error(e && e.code ? `${res.status} ${e.code}: ${e.message}` : `HTTP ${res.status}`);
  }
  return answer;
}

let running = 0;

async function run() {
  const mine = ++running;
  notes.replaceChildren();
  let what;
  try {
    what = readInput();
  } catch (e) {
    status.textContent = /** @type {Error} */ (e).message;
    return;
  }
  for (const n of what.notes) notes.append(h("li", {}, [n]));
  if (token.value) sessionStorage.setItem("harmony-inspect-token", token.value);
  /** @type {FragmentInput} */
  const frag = what.ids
    ? {
        kind: "ids",
        value: what.ids.join(","),
        role: /** @type {any} */ (role.value),
        afterStop: /** @type {any} */ (afterStop.value),
        tools: toolList(),
      }
    : {
        kind: "text",
        value: what.text ?? "",
        role: /** @type {any} */ (role.value),
        afterStop: /** @type {any} */ (afterStop.value),
        tools: toolList(),
      };
  const hash = encodeFragment(frag);
  if (location.hash !== hash) history.replaceState(null, "", hash);
  link.hidden = true;
  const base = {
    ...(what.ids ? { ids: what.ids } : { text: what.text }),
    role: role.value,
    after_stop: afterStop.value,
    ...(toolList().length > 0 ? { tools: toolList() } : {}),
    tokens: true,
  };
  status.textContent = "Parsing…";
  const t0 = performance.now();
  const [resilient, strict] = await Promise.allSettled([parse({ ...base, mode: "resilient" }), parse({ ...base, mode: "strict" })]);
  if (mine !== running) return; // a later run took over
  status.textContent = `Parsed in ${Math.round(performance.now() - t0)} ms.`;
  for (const [mode, r] of /** @type {const} */ ([
    ["resilient", resilient],
    ["strict", strict],
  ])) {
    const body = document.querySelector(`#pane-${mode} .pane-body`);
    if (!(body instanceof HTMLElement)) continue;
    if (r.status === "fulfilled") body.replaceChildren(...renderPane(mode, r.value));
    else {
      body.replaceChildren(h("p", { class: "failure", role: "alert" }, [`Could not parse: ${r.reason.message}`]));
      status.textContent = r.reason.message;
    }
  }
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
 * One pane's content: summary, tokens, messages, recoveries and errors.
 * @param {string} mode
 * @param {ParseAnswer} answer
 * @returns {HTMLElement[]}
 */
function renderPane(mode, answer) {
  const p = mode === "strict" ? "s" : "r";
  const events = answer.events;
  const { tokens, endMarks } = segmentTokens(answer);
  const messages = collectMessages(events);
  const { done, recoveries, errors } = summarize(events);

  const summary = h("p", { class: "summary" }, [
    done
      ? `${done.tokens} tokens · ${done.messages} message${done.messages === 1 ? "" : "s"} · finish ${done.finish_reason} · `
      : "no done event · ",
    h("span", { class: recoveries.length ? "count warn" : "count" }, [
      `${recoveries.length} recover${recoveries.length === 1 ? "y" : "ies"}`,
    ]),
    " · ",
    h("span", { class: errors.length ? "count bad" : "count" }, [`${errors.length} error${errors.length === 1 ? "" : "s"}`]),
  ]);

  // the stream, token by token
  const stream = h("div", { class: "tokens", role: "group", "aria-label": `${mode} tokens` });
  const shown = Math.min(tokens.length, MAX_TOKENS_SHOWN);
  const frag = document.createDocumentFragment();
  for (let i = 0; i < shown; i++) {
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
    frag.append(span);
  }
  if (endMarks.length > 0) {
    const end = h("span", { class: "tok c-control mark-end", id: `${p}-tend`, tabindex: "0" }, ["⟨end of stream⟩"]);
    const kinds = endMarks.map((m) => events[m]);
    end.classList.add(kinds.some((e) => e.type === "error") ? "mark-error" : "mark-recovery");
    end.title = kinds.map(markText).join("\n");
    end.setAttribute("aria-label", `end of stream: ${kinds.map(markText).join("; ")}`);
    frag.append(end);
  }
  stream.append(frag);
  const more = tokens.length > shown ? h("p", { class: "note" }, [`Showing the first ${shown} of ${tokens.length} tokens.`]) : null;

  // recoveries and errors, each a link to its token
  const marksList = h("ol", { class: "marks" });
  for (const i of [...errors, ...recoveries].sort((a, b) => a - b)) {
    const e = events[i];
    const at = typeof e.at === "number" ? e.at : -1;
    const target = at >= 0 && at < shown ? `${p}-t${at}` : at >= tokens.length ? `${p}-tend` : null;
    const where = h("button", { type: "button", class: "jump", ...(target ? { "data-target": target } : { disabled: "" }) }, [
      at >= tokens.length ? "end" : `token ${at}`,
    ]);
    const item = h("li", { class: e.type === "error" ? "error" : "recovery" }, [
      where,
      " ",
      h("strong", {}, [e.type === "error" ? `error ${e.code}` : `${e.kind}`]),
      " ",
      h("span", {}, [e.type === "error" ? (e.message ?? "") : (e.detail ?? "")]),
    ]);
    if (e.raw !== undefined) item.append(" ", h("span", { class: "raw-label" }, ["raw"]), " ", h("code", { class: "raw" }, [e.raw]));
    marksList.append(item);
  }

  // messages
  const list = h("ol", { class: "messages" });
  for (const m of messages) {
    const head = h("div", { class: "msg-head" }, [
      h("span", { class: `chip c-${m.cls}` }, [`#${m.index} ${m.role}${m.name ? ` (${m.name})` : ""}`]),
      m.channel !== null ? h("span", { class: "field" }, [`channel ${m.channel}`]) : null,
      m.recipient !== null ? h("span", { class: "field" }, [`to ${m.recipient}`]) : null,
      m.content_type !== null ? h("span", { class: "field" }, [`type ${m.content_type}`]) : null,
      h("span", { class: "field stop" }, [m.stop ? `stop ${m.stop}` : "not ended"]),
    ]);
    const card = h("li", { class: `msg b-${m.cls}`, tabindex: "0", "data-m": String(m.index) }, [head]);
    if (m.call) {
      card.append(
        h("div", { class: "call" }, [
          h("span", {}, [`tool call ${m.call.id} → ${m.call.name} `]),
          h("span", { class: m.call.valid_json ? "json ok" : "json bad" }, [m.call.valid_json ? "valid_json: true" : "valid_json: false"]),
        ]),
        h("pre", { class: "args" }, [m.call.pretty]),
      );
    } else {
      if (m.open_call) card.append(h("div", { class: "call" }, [`tool call ${m.open_call.id} → ${m.open_call.name} (no tool_call_end)`]));
      card.append(h("pre", { class: "text" }, [m.text === "" ? "(empty)" : m.text]));
    }
    list.append(card);
  }
  if (messages.length === 0) list.append(h("li", { class: "empty" }, ["No messages."]));

  const out = [summary, h("h3", {}, ["Tokens"]), stream];
  if (more) out.push(more);
  out.push(h("h3", {}, [`Recoveries and errors (${recoveries.length + errors.length})`]));
  out.push(recoveries.length + errors.length > 0 ? marksList : h("p", { class: "empty" }, ["None."]));
  out.push(h("h3", {}, [`Messages (${messages.length})`]), list);
  return out;
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
  void run();
});

/** @param {File} file */
async function openFile(file) {
  input.value = await file.text();
  setKind("auto");
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
  void run();
  return true;
}
window.addEventListener("hashchange", () => {
  fromFragment();
});
if (!fromFragment()) input.focus();
