/**
 * What the hostile bench's parts share (bench/hostile/main.ts): the clock's
 * constants, the shapes of an attack, its answer and its row, and reading a
 * process's RSS. Loaded by the probe thread too, so it imports nothing heavy.
 */
import { readFileSync } from "node:fs";
import type { HostileEngine } from "../peers/hostile-engine.js";

export const MiB = 1 << 20;
export const PROBE_MS = 10;
export const SETTLE_MS = 2000;
/** an attack shorter than this is repeated until it has lasted this long */
export const MIN_WINDOW_MS = 1000;

/** VmRSS of `pid` in bytes, or null once it is gone. */
export function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** What the probe thread reports for one attack's window. */
export interface ProbeReport {
  probes: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
  rssPeak: number;
  rssEnd: number | null;
  exited: boolean;
}

export interface Answer {
  /** the coded answer: error codes, HTTP status, close code */
  code: string;
  bytes: number;
  note?: string;
}

export interface Target {
  port: number;
  http: string;
  ws: string;
  grpc: string;
  /** The RESP peer standing for the shared store: what it answers MGET with. */
  store: { mget: string };
  /** The service's engine (its --upstream), which answers as each attack scripts it. */
  engine: HostileEngine;
  /** The most event-loop delay the service's /metrics gave since it was last taken (s). */
  loopLag: { maxS: number };
}

export interface Attack {
  key: string;
  name: string;
  /** build the payload (before the clock starts), then return the function that sends it */
  prepare(t: Target): () => Promise<Answer>;
}

export interface Row {
  key: string;
  name: string;
  answer: Answer;
  durationMs: number;
  probe: ProbeReport;
  rssBefore: number;
  /** the service's own event-loop delay, its most from 2 s before the attack's start to 2 s after its end (ms), or NaN */
  loopLagMaxMs: number;
  /** times the attack was sent in its window (1 unless it took under MIN_WINDOW_MS) */
  repeats: number;
  up: boolean;
  load: string;
}
