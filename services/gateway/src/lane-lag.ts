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

/**
 * How often the monitor polls. Admission reads the figures of the last poll, so while anything
 * waits or moves they are at most `intervalMs` old; while the cluster is quiet (every lane's lag
 * 0, every pool readable, no call in flight at this replica and none admitted for
 * `idleIntervalMs`) the monitor polls every `idleIntervalMs` instead, and the first call admitted
 * after that wakes it at once. Backlog that another replica's callers build shows within
 * `idleIntervalMs` (KEDA's Prometheus scaler asks every 30 s by default).
 */
export interface LagPollOptions {
  /** Between polls while busy (default 1 s). */
  readonly intervalMs?: number;
  /** Between polls while quiet (default 5 s; equal to `intervalMs`: never slower). */
  readonly idleIntervalMs?: number;
  /** Calls in flight at this replica (default: none counted). */
  readonly inFlight?: () => number;
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
  /** A number: a fixed interval in ms. */
  pollOptions: LagPollOptions | number = {},
): LaneLagMonitor {
  const log = logger.child({ component: "lane-lag" });
  const opts: LagPollOptions = typeof pollOptions === "number" ? { intervalMs: pollOptions, idleIntervalMs: pollOptions } : pollOptions;
  const intervalMs = opts.intervalMs ?? 1_000;
  const idleIntervalMs = Math.max(intervalMs, opts.idleIntervalMs ?? 5_000);
  let lastJobAt = Number.NEGATIVE_INFINITY;
  /** The next poll is an idle one (a call admitted meanwhile polls at once). */
  let sleeping = false;
  let polling = false;
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

  /** Nothing waits, nothing moves, and every pool could be read. */
  function quiet(): boolean {
    if (failing.size > 0 || (opts.inFlight?.() ?? 0) > 0 || Date.now() - lastJobAt < idleIntervalMs) return false;
    for (const records of lag.values()) if (records > 0) return false;
    return true;
  }

  async function poll(): Promise<void> {
    polling = true;
    sleeping = false;
    try {
      await Promise.all(pools.map(readPool));
      const totals: Record<LaneName, number> = { interactive: 0, batch: 0 };
      for (const [key, records] of lag) {
        const lane = key.slice(key.lastIndexOf("/") + 1) as LaneName;
        totals[lane] += records;
      }
      for (const name of LANE_NAMES) admission.setQueued(name, totals[name] * tokensPerJob[name]);
    } finally {
      polling = false;
      if (running) {
        sleeping = idleIntervalMs > intervalMs && quiet();
        timer = setTimeout(() => void poll(), sleeping ? idleIntervalMs : intervalMs);
      }
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
      lastJobAt = Date.now();
      // Waking from a quiet spell: read the lanes now rather than up to idleIntervalMs later.
      if (sleeping && running && !polling) {
        clearTimeout(timer);
        sleeping = false;
        timer = setTimeout(() => void poll(), 0);
      }
    },
  };
}
