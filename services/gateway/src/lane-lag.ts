import { laneJobTopics, LANE_NAMES, laneName, SERVED_LANES, type IntakeKind, type LaneName, type Logger, type PoolLayout } from "@shoal/common";
import type { Admission } from "./admission.ts";
import type { BacklogSource } from "./lane-backlog.ts";

/** Watches each lane's backlog and feeds it to admission as queued tokens. */
export interface LaneLagMonitor {
  /** Starts polling; resolves once the first poll is done (read or failed), never rejects. */
  start(): Promise<void>;
  stop(): void;
  /** Remembers the size of an admitted call, to turn lag (records) into tokens. */
  observeJob(lane: LaneName, tokens: number): void;
  /**
   * Records waiting per `<pool>/<lane>` at the last poll that could read them (a pool whose read
   * fails keeps its last figures; one never read is absent).
   */
  readonly lag: ReadonlyMap<string, number>;
}

/** A pool as the monitor sees it: its name, how its workers take jobs, and its jobs topics (default: one per lane). */
export interface LagPool extends Partial<PoolLayout> {
  readonly name: string;
  readonly intake: IntakeKind;
}

/** The consumer group or share group every worker of `pool` joins. */
export const poolGroupId = (pool: string): string => `shoal-pool-${pool}`;

/**
 * Polls every pool's jobs topics, each the way its intake consumes them (`sources.share` for a
 * share group, `sources.group` for a consumer group). A pool whose read fails is warned about once,
 * then at debug until it reads again; it never stops the others.
 */
export function createLaneLagMonitor(
  sources: Readonly<Record<IntakeKind, BacklogSource>>,
  admission: Pick<Admission, "setQueued">,
  pools: readonly LagPool[],
  logger: Logger,
  intervalMs = 1_000,
): LaneLagMonitor {
  const log = logger.child({ component: "lane-lag" });
  const tokensPerJob: Record<LaneName, number> = { interactive: 0, batch: 0 };
  const lag = new Map<string, number>();
  const failing = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  async function readPool(pool: LagPool): Promise<void> {
    const layout: PoolLayout = { name: pool.name, jobTopics: pool.jobTopics ?? "per-lane", models: pool.models ?? [] };
    const byLane = SERVED_LANES.map((lane) => laneJobTopics(layout, lane).map((t) => t.topic));
    try {
      const records = await sources[pool.intake](poolGroupId(pool.name), byLane.flat());
      SERVED_LANES.forEach((lane, i) => {
        lag.set(
          `${pool.name}/${laneName(lane)}`,
          byLane[i]!.reduce((n, topic) => n + (records.get(topic) ?? 0), 0),
        );
      });
      if (failing.delete(pool.name)) log.info({ pool: pool.name, intake: pool.intake }, "lane lag readable again");
    } catch (err) {
      const first = !failing.has(pool.name);
      failing.add(pool.name);
      const fields = { err, pool: pool.name, intake: pool.intake };
      if (first) log.warn(fields, "cannot read the pool's lane lag (broker unreachable?); keeping the last figures, further failures at debug");
      else log.debug(fields, "lane lag read failed");
    }
  }

  async function poll(): Promise<void> {
    try {
      await Promise.all(pools.map(readPool));
      const totals: Record<LaneName, number> = { interactive: 0, batch: 0 };
      for (const [key, records] of lag) {
        const lane = key.slice(key.lastIndexOf("/") + 1) as LaneName;
        totals[lane] += records;
      }
      for (const name of LANE_NAMES) admission.setQueued(name, totals[name] * tokensPerJob[name]);
    } finally {
      if (running) timer = setTimeout(() => void poll(), intervalMs);
    }
  }

  return {
    lag,
    start() {
      if (running) return Promise.resolve();
      running = true;
      return poll();
    },
    stop() {
      running = false;
      clearTimeout(timer);
    },
    observeJob(lane, tokens) {
      tokensPerJob[lane] = tokensPerJob[lane] === 0 ? tokens : 0.9 * tokensPerJob[lane] + 0.1 * tokens;
    },
  };
}
