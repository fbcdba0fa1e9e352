import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { ServedLane } from "@shoal/common";

/** Lane names as they appear in config, metrics and messages. */
export type LaneName = "interactive" | "batch";

export const LANE_NAMES: readonly LaneName[] = ["interactive", "batch"];

export function laneName(lane: ServedLane): LaneName {
  return lane === Lane.BATCH ? "batch" : "interactive";
}

/** Resolves a request's lane; LANE_UNSPECIFIED takes the default. */
export function servedLane(lane: Lane, fallback: ServedLane = Lane.INTERACTIVE): ServedLane {
  if (lane === Lane.BATCH) return Lane.BATCH;
  if (lane === Lane.INTERACTIVE) return Lane.INTERACTIVE;
  return fallback;
}
