/** What the phases of one bench run share: the frames, the selection, and what each phase leaves for the next and for the report. */
import type { Figure } from "./figures.js";
import type { Frames, Workload } from "./workload.js";

export interface Bench {
  w: Workload;
  frames: Frames;
  /** the workloads to run (--only; d brings a unless --rate) */
  only: Set<string>;
  /** (a) windows to try (--windows) */
  windows: number[];
  /** a full GC of this process (--expose-gc) */
  gc: () => void;
  /** the report's sections, in the order they were measured */
  results: Record<string, unknown>;
  /** where the service parses: its own report at start-up */
  layout: string;
  aBest?: { window: number; fig: Figure };
  /** the pace of (d), frames/s (0: (d) did not run) */
  dRate: number;
  /** the service's main-thread CPU per frame in (d), µs (the busy echo matches it) */
  dCpuUs: number;
}
