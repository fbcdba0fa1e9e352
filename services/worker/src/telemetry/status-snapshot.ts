import { ResidencyState } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { WorkerConfig } from "../config.ts";
import type { FleetRunner } from "../tasks/model-fleet.ts";
import type { Residency } from "../residency/residency.ts";
import type { WorkerStatusInit } from "./status-publisher.ts";

/** How a model's state on this worker reads in the cluster status. */
const residencyStates: Record<string, ResidencyState> = {
  queued: ResidencyState.QUEUED,
  loading: ResidencyState.LOADING,
  resident: ResidencyState.RESIDENT,
  failed: ResidencyState.FAILED,
  unloading: ResidencyState.EVICTED,
  evicted: ResidencyState.EVICTED,
};

export interface StatusSources {
  readonly config: WorkerConfig;
  /** Unix and monotonic milliseconds at start, to turn residency times into unix times. */
  readonly startedUnixMs: number;
  readonly startedMonoMs: number;
  readonly residency: () => Residency<FleetRunner> | undefined;
  readonly inFlightJobs: () => number;
  /** Estimated tokens in hand not yet computed. */
  readonly pendingTokens: () => number;
  readonly draining: () => boolean;
}

/** The worker's status as published on the status topic, read from its live parts. */
export function statusSnapshot(src: StatusSources): WorkerStatusInit {
  const { config } = src;
  const residency = src.residency();
  return {
    workerId: config.workerId,
    pool: config.pool,
    startedUnixMs: BigInt(src.startedUnixMs),
    provider: config.runtimeLabel,
    memoryBudgetBytes: BigInt(config.memoryBudgetBytes),
    memoryUsedBytes: BigInt(residency?.usedBytes ?? 0),
    inFlightJobs: src.inFlightJobs(),
    pendingTokens: BigInt(Math.max(0, Math.round(src.pendingTokens()))),
    routedIntake: config.routedIntake,
    thrashEvents: BigInt(residency?.thrashEvents ?? 0),
    residencyPolicy: config.residencyPolicy,
    draining: src.draining(),
    models: (residency?.snapshot() ?? []).flatMap((m) => {
      const state = residencyStates[m.state];
      if (state === undefined) return [];
      const lastUsedUnixMs = m.lastUsedMs === undefined ? 0 : src.startedUnixMs + m.lastUsedMs - src.startedMonoMs;
      return [
        {
          model: m.model,
          state,
          memoryBytes: BigInt(m.bytes),
          loadCount: BigInt(m.loadCount),
          evictionCount: BigInt(m.evictionCount),
          lastColdStartMs: m.lastColdStartMs ?? 0,
          lastUsedUnixMs: BigInt(Math.round(lastUsedUnixMs)),
          pinned: m.pinned,
          inFlightJobs: m.inFlight,
          error: m.error ?? "",
        },
      ];
    }),
  };
}
