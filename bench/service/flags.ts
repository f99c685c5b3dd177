/**
 * The service bench's flags (every one documented by `--help`), parsed once,
 * when this module is first loaded: by the bench itself and by its echo
 * children, which run the same entry file with `--child echo`.
 */
import { Command } from "commander";

export const opts = new Command()
  .option("--seconds <n>", "duration of one timed run, seconds", (v) => Number(v), 2)
  .option("--runs <n>", "timed runs per figure (median reported)", (v) => Number(v), 5)
  .option("--warmup <n>", "warm-up seconds before each figure", (v) => Number(v), 1)
  .option("--server-warmup <n>", "seconds of (a) and (b) traffic after a service starts, before any figure", (v) => Number(v), 4)
  .option("--workers <n>", "service worker threads (default: the service's own default)", (v) => Number(v))
  .option("--serve-flags <flags>", 'extra `serve` flags for the service child, space-separated (e.g. "--inline on")', "")
  .option("--streams <n>", "(a) streams per step frame", (v) => Number(v), 256)
  .option("--handles", "(a), (b), (d): name streams by numeric handle (Open.handle) instead of by name", false)
  .option("--windows <list>", "(a) windows of unanswered frames to try", "2,4,8")
  .option("--pipeline <n>", "(b) window of the pipelined single-stream run", (v) => Number(v), 8)
  .option("--load <f>", "(d) fraction of the max frames/s of (a)", (v) => Number(v), 0.5)
  .option("--rate <n>", "(d) frames/s to pace at, instead of --load × the max of (a)", (v) => Number(v))
  .option("--mem-streams <n>", "(e) open streams", (v) => Number(v), 10_000)
  .option("--mem-depth <n>", "(e) tokens fed to each stream before measuring (the window holds up to 512)", (v) => Number(v), 8)
  .option("--mem-cycles <n>", "(e) leak check: more cycles of open all, disconnect", (v) => Number(v), 2)
  .option("--only <letters>", "run a subset of a,b,c,d,e (d needs a, unless --rate)", "abcde")
  .option("--cpu-prof <dir>", "run the service child under node --cpu-prof, write profiles to DIR and summarise them")
  .option("--server-flags <flags>", "extra node flags for the service child, space-separated (e.g. --trace-gc)", "")
  .option(
    "--child-cpus <list>",
    "run the service and echo children on these CPUs only (taskset -c LIST); run the bench itself under taskset to keep the client off them",
  )
  .option(
    "--child-output <dir>",
    "write each child's output lines that are not JSON logs (such as --trace-gc lines under --server-flags), stamped with the client's clock, to DIR/<pid>.txt; the log says when (d) ran on that clock",
  )
  .option(
    "--trace <file>",
    "write every paced (d) frame's send time and latency to FILE (CSV), with the client's GC pauses and, under --trace-gc-nvp, the service's",
  )
  .option(
    "--sched",
    "record the scheduler with `perf sched` while (d) and its echo runs are paced (needs perf): how long the servers' and the client's main threads waited for a CPU, and what ran instead",
    false,
  )
  .option(
    "--client-heap-growth <percent>",
    "V8 --heap-growing-percent for this process, the client (0: V8's own); the service's is its own --heap-growth",
    (v) => Number(v),
    300,
  )
  .option("--json", "print JSON instead of Markdown", false)
  .option("--json-file <file>", "also write the JSON report to FILE")
  .option("--child <kind>", "(internal) run as the echo server child")
  .option("--echo-work-us <n>", "(internal) the echo child spins this many µs per frame before echoing it", (v) => Number(v), 0)
  .parse()
  .opts<{
    seconds: number;
    runs: number;
    warmup: number;
    serverWarmup: number;
    workers?: number;
    streams: number;
    handles: boolean;
    windows: string;
    pipeline: number;
    load: number;
    rate?: number;
    memStreams: number;
    memDepth: number;
    memCycles: number;
    only: string;
    cpuProf?: string;
    json: boolean;
    jsonFile?: string;
    trace?: string;
    childOutput?: string;
    childCpus?: string;
    serverFlags: string;
    serveFlags: string;
    child?: string;
    echoWorkUs: number;
    sched: boolean;
    clientHeapGrowth: number;
  }>();
