import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";

/** Lanes that have topics; LANE_UNSPECIFIED is resolved before a job is produced. */
export type ServedLane = Lane.INTERACTIVE | Lane.BATCH;

/** Lane names as they appear in topics, config, metrics and messages. */
export type LaneName = "interactive" | "batch";

/** The served lanes, interactive first. */
export const SERVED_LANES: readonly ServedLane[] = [Lane.INTERACTIVE, Lane.BATCH];

/** The lane names, interactive first. */
export const LANE_NAMES: readonly LaneName[] = ["interactive", "batch"];

const names: Record<ServedLane, LaneName> = {
  [Lane.INTERACTIVE]: "interactive",
  [Lane.BATCH]: "batch",
};

/** The name of a served lane (`interactive`, `batch`): the last part of its jobs topic. */
export function laneName(lane: ServedLane): LaneName {
  return names[lane];
}

/** True for `interactive` and `batch`. */
export function isLaneName(name: unknown): name is LaneName {
  return name === "interactive" || name === "batch";
}

/** The served lane a name stands for; undefined for anything but `interactive` and `batch`. */
export function laneFromName(name: string): ServedLane | undefined {
  return name === "batch" ? Lane.BATCH : name === "interactive" ? Lane.INTERACTIVE : undefined;
}

/** Resolves a request's lane; LANE_UNSPECIFIED (or an unknown value) takes the fallback. */
export function servedLane(lane: Lane, fallback: ServedLane = Lane.INTERACTIVE): ServedLane {
  if (lane === Lane.BATCH) return Lane.BATCH;
  if (lane === Lane.INTERACTIVE) return Lane.INTERACTIVE;
  return fallback;
}

/** Jobs topic of one pool and lane: `shoal.jobs.<pool>.<lane>`. */
export function jobsTopic(pool: string, lane: ServedLane): string {
  return `shoal.jobs.${pool}.${names[lane]}`;
}

/**
 * Jobs topic of one worker and lane, for routed dispatch (issue #16):
 * `shoal.jobs.<pool>.w.<workerId>.<lane>`. Only that worker reads it (a consumer group of its own).
 */
export function routedTopic(pool: string, workerId: string, lane: ServedLane): string {
  return `shoal.jobs.${pool}.w.${workerId}.${names[lane]}`;
}

/** Characters a worker id may have when it names a routed topic (Kafka's topic alphabet, 249 at most). */
export const ROUTED_WORKER_ID = /^[A-Za-z0-9._-]{1,150}$/;

/**
 * Jobs topic of one model of a `per-model` pool: `shoal.jobs.<pool>.<lane>.m.<model>`. Each is read
 * by one share-group member per worker (the share assignor spreads a group's partitions over its
 * members once they are as many, so every worker must subscribe to each such topic on its own).
 */
export function modelJobsTopic(pool: string, lane: ServedLane, model: string): string {
  return `shoal.jobs.${pool}.${names[lane]}.m.${model}`;
}

/** The part of a pool the topic layout needs. */
export interface PoolLayout {
  readonly name: string;
  readonly jobTopics: "per-lane" | "per-model";
  readonly models: readonly string[];
}

/** Where a job of `model` on `lane` is written in `pool`. */
export function jobTopicFor(pool: PoolLayout, lane: ServedLane, model: string): string {
  return pool.jobTopics === "per-model" ? modelJobsTopic(pool.name, lane, model) : jobsTopic(pool.name, lane);
}

/** Every jobs topic of one lane of `pool`, with the model each carries alone (per-model layout). */
export function laneJobTopics(pool: PoolLayout, lane: ServedLane): Array<{ readonly topic: string; readonly model?: string }> {
  return pool.jobTopics === "per-model"
    ? pool.models.map((model) => ({ topic: modelJobsTopic(pool.name, lane, model), model }))
    : [{ topic: jobsTopic(pool.name, lane) }];
}
