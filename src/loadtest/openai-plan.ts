/**
 * The requests `loadtest --openai` sends: Chat Completions or Responses,
 * streamed or not, each declaring a few function tools from a catalogue
 * with real JSON Schemas, each a function of (seed, index) so a failing
 * request can be sent again alone (`--only N`). The user message carries
 * the request's key (`harmony-loadtest run=RUN request=N`), which the
 * engine simulator reads from the prompt to report what it injected.
 */
import { rng, streamSeed } from "./generate.js";

export type Api = "chat" | "responses";

export interface ToolDef {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** Function tools requests declare: flat and nested objects, enums, arrays, optional fields, one without parameters. */
export const TOOL_CATALOGUE: readonly ToolDef[] = [
  {
    name: "get_weather",
    description: "Get the current weather for a location.",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "City and country, e.g. Paris, France" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["location"],
      additionalProperties: false,
    },
  },
  {
    name: "get_current_time",
    description: "The current time in a time zone.",
    parameters: {
      type: "object",
      properties: { timezone: { type: "string", description: "IANA time zone name" } },
      required: ["timezone"],
    },
  },
  {
    name: "search_restaurants",
    description: "Find restaurants near a place.",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string" },
        cuisine: { type: "string" },
        open_now: { type: "boolean" },
        max_results: { type: "integer", minimum: 1, maximum: 20 },
      },
      required: ["location"],
    },
  },
  {
    name: "send_email",
    description: "Send an email.",
    parameters: {
      type: "object",
      properties: { to: { type: "array", items: { type: "string" } }, subject: { type: "string" }, body: { type: "string" } },
      required: ["to", "subject", "body"],
    },
  },
  {
    name: "query_database",
    description: "Run a read-only SQL query.",
    parameters: { type: "object", properties: { sql: { type: "string" }, timeout_s: { type: "number" } }, required: ["sql"] },
  },
  {
    name: "set_reminder",
    description: "Set a reminder.",
    parameters: {
      type: "object",
      properties: { text: { type: "string" }, time: { type: "string" }, repeat: { type: "string", enum: ["never", "daily", "weekly"] } },
      required: ["text", "time"],
    },
  },
  {
    name: "get-stock-price",
    description: "The latest price of a stock.",
    parameters: {
      type: "object",
      properties: { ticker: { type: "string" }, exchange: { type: "string", enum: ["NASDAQ", "NYSE", "TSE"] } },
      required: ["ticker"],
    },
  },
  {
    name: "book_flight",
    description: "Book a flight.",
    parameters: {
      type: "object",
      properties: {
        origin: { type: "string" },
        destination: { type: "string" },
        date: { type: "string" },
        passengers: {
          type: "object",
          properties: { adults: { type: "integer", minimum: 1 }, children: { type: "integer", minimum: 0 } },
          required: ["adults"],
        },
        cabin: { type: "string", enum: ["economy", "business"] },
      },
      required: ["origin", "destination", "date", "passengers"],
    },
  },
  { name: "list_open_tabs", description: "List the browser's open tabs.", parameters: { type: "object", properties: {} } },
];

const QUESTIONS = [
  "What's the weather in Oslo right now?",
  "Find me a good ramen place near Shibuya that is open now.",
  "Email the team that the meeting moved to Monday.",
  "How many users signed up since January?",
  "Remind me to water the plants tomorrow at 9.",
  "What is NVDA trading at?",
  "Book two adults from Kraków to Lisbon on 2025-09-14.",
  "東京は今何時ですか？",
  "Explain the difference between TCP and UDP in two sentences.",
  "Write a haiku about load tests.",
];

export interface PlannedRequest {
  index: number;
  api: Api;
  stream: boolean;
  /** The request's key, as the simulator reports it (`RUN/N`). */
  key: string;
  tools: ToolDef[];
  body: Record<string, unknown>;
}

export interface PlanOptions {
  seed: number;
  runId: string;
  apis: readonly Api[];
  stream: "both" | "on" | "off";
  model: string;
}

/** The request at `index`. */
export function planRequest(index: number, o: PlanOptions): PlannedRequest {
  const r = rng(streamSeed(o.seed ^ 0x4f70656e, index));
  const api = o.apis[Math.floor(r() * o.apis.length)]!;
  const stream = o.stream === "both" ? r() < 0.5 : o.stream === "on";
  // one in ten declares no tool (then the model can only answer); the rest one to four
  const tools: ToolDef[] = [];
  if (r() >= 0.1) {
    const n = 1 + Math.floor(r() * 4);
    const pool = TOOL_CATALOGUE.slice();
    for (let k = 0; k < n && pool.length > 0; k++) tools.push(pool.splice(Math.floor(r() * pool.length), 1)[0]!);
  }
  const question = QUESTIONS[Math.floor(r() * QUESTIONS.length)]!;
  const effort = ["low", "medium", "high"][Math.floor(r() * 3)]!;
  const key = `${o.runId}/${index}`;
  const text = `${question}\n\n(harmony-loadtest run=${o.runId} request=${index})`;
  let body: Record<string, unknown>;
  if (api === "chat") {
    body = { model: o.model, messages: [{ role: "user", content: text }], stream, reasoning_effort: effort };
    if (stream) body.stream_options = { include_usage: true };
    if (tools.length > 0) body.tools = tools.map((t) => ({ type: "function", function: t }));
  } else {
    body = { model: o.model, input: [{ role: "user", content: text }], stream, reasoning: { effort }, store: false };
    if (tools.length > 0) body.tools = tools.map((t) => ({ type: "function", ...t }));
  }
  return { index, api, stream, key, tools, body };
}
