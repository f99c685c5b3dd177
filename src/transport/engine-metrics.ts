/**
 * The engine's series for the sidecar's `/metrics` (sidecar mode): its
 * Prometheus text when it is whole and valid (src/upstream/metrics.ts),
 * else a comment that says why it is left out, the skip counted in
 * `harmony_upstream_metrics_skipped_total{reason}` and logged (at most once
 * every ten minutes for each reason: a scrape comes every few seconds). One
 * read of the engine serves the scrapes of the same second.
 */
import type { Service } from "../service/service.js";
import { engineMetrics } from "../upstream/metrics.js";
import type { OpenAIFront } from "./openai-front.js";

const WARN_EVERY_MS = 10 * 60_000;
const warned = new WeakMap<Service, Map<string, number>>();

/**
 * How long one read of the engine's metrics serves scrapes: scrapers come
 * every 15 s or so; a client that scrapes a hundred times a second makes one
 * engine read a second, not a hundred (each up to the bound, and its garbage).
 */
const READ_EVERY_MS = 1000;
const last = new WeakMap<OpenAIFront, { at: number; text: Promise<string> }>();

/** The engine's part of a scrape (shared by the scrapes of the same second). */
export function engineSeries(svc: Service, front: OpenAIFront, timeoutMs: number): Promise<string> {
  const now = Date.now();
  const prev = last.get(front);
  if (prev && now - prev.at < READ_EVERY_MS) return prev.text;
  const text = readSeries(svc, front, timeoutMs);
  last.set(front, { at: now, text });
  return text;
}

async function readSeries(svc: Service, front: OpenAIFront, timeoutMs: number): Promise<string> {
  const r = await engineMetrics(front.engine, front.cfg, timeoutMs);
  if (r.ok) return r.text;
  svc.metrics.upstreamMetricsSkipped.inc({ reason: r.reason });
  const seen = warned.get(svc) ?? new Map<string, number>();
  warned.set(svc, seen);
  const now = Date.now();
  if (now - (seen.get(r.reason) ?? -Infinity) >= WARN_EVERY_MS) {
    seen.set(r.reason, now);
    svc.logger.warn({ path: r.path, reason: r.reason, detail: r.detail }, "the engine's metrics are left out of /metrics");
  }
  return `# the engine's ${r.path} is left out (${r.reason}): ${r.detail.replace(/[\r\n]+/g, " ")}\n`;
}
