/**
 * End-to-end service benchmark over loopback WebSocket (protobuf frames),
 * with a plain `ws` echo server as the transport baseline, in one run.
 * Prints a Markdown report (and JSON with --json).
 *
 *   node dist/bench/service-bench.js [--seconds 2] [--runs 5] [--json]
 *       [--only abcde] [--windows 2,4,8] [--rate N] [--cpu-prof DIR]
 *       [--trace FILE] [--server-flags "--trace-gc-nvp"] [--handles]
 *       [--child-cpus LIST] [--child-output DIR] [--sched]
 *   With --server-flags "--trace-gc-nvp" the report sums up the service's
 *   GCs while (d) ran: scavenges, their pauses, what each copied and promoted.
 *   `taskset -c 0 node dist/bench/service-bench.js --child-cpus 1` keeps the
 *   client on one CPU and the servers on the other, so that neither's GC or
 *   bursts take the other's core (on a 2-core machine they otherwise do).
 *
 * Setup: the service runs in a child process (`node dist/src/cli.js serve
 * --port 0 --grpc-port -1 --workers N`), the echo server in another child
 * (this file, `--child echo`), the client in this process. All of them share
 * the machine's cores, which the report states.
 *
 * Workloads (bench/data/mix-200k.txt, completions primed as assistant):
 * (a) step frames: S streams x 1 token per frame; each lane loops over its
 *     share of the completions (round robin), closing a used-up stream and
 *     opening the next in the same frame; a window of W unanswered frames;
 *     the max tokens/s over the windows tried.
 * (b) one stream, one content token per frame (each answered by one delta):
 *     sequential (window 1) and pipelined (window W); frames/s and the
 *     round-trip time of each frame.
 * (c) echo baseline: the same encoded client frames echoed back.
 * (d) (a) paced open loop at --load (default 50%) of the best frames/s of
 *     (a), or at --rate: round-trip time per frame; echo at the same pace,
 *     and a busy echo, whose main thread spends as much CPU per frame as
 *     the service's did in (d) (echoing, then spinning CPU time for the
 *     rest: as busy as the service, without parsing). For each
 *     paced figure, the frames over 2 ms and what they overlapped: GC pauses
 *     of the client and (with --trace-gc-nvp) the service, and with --sched
 *     (`perf sched`) the main threads' waits for a CPU and what ran instead.
 * (e) service RSS per open stream with 10k open streams; a leak check.
 *
 * The client does no protobuf work while timing: (a) frames are composed by
 * concatenating ops encoded beforehand (a ClientFrame is a repeated field),
 * (b) frames are a pre-encoded ring. Which frames get an answer frame (a
 * frame that produces no event gets none) is known beforehand: every op was
 * replayed through a local parser when it was encoded, and the warm-up runs
 * decode the answers and check their event counts against that replay.
 * Every throughput is the median of --runs timed runs of --seconds each,
 * after a warm-up; latency percentiles are over all timed runs of a figure
 * (HDR histograms, microsecond resolution).
 *
 * This file is the entry point; the bench lives in bench/service/: main.ts
 * (the run, step by step), flags.ts, workload.ts and frames.ts (the frames),
 * client.ts (the load generator), children.ts and echo.ts (the service and
 * echo children), figures.ts (timed runs, slow frames), gc.ts, sched.ts,
 * probes.ts and profiles.ts (what is measured beside the round trips),
 * phase-service.ts, phase-echo.ts and phase-memory.ts (the workloads), and
 * report.ts.
 */
import { opts } from "./service/flags.js";
import { runEchoChild } from "./service/echo.js";
import { main } from "./service/main.js";

if (opts.child === "echo") runEchoChild();
else await main();
