import type { Admin } from "kafkajs";
import { jobsTopic, LANE_NAMES, laneName, SERVED_LANES, type LaneName, type Logger, type ServedLane } from "@shoal/common";
import type { Admission } from "./admission.ts";

/** Watches each lane's consumer lag and feeds it to admission as queued tokens. */
export interface LaneLagMonitor {
  start(): void;
  stop(): void;
  /** Remembers the size of an admitted call, to turn lag (records) into tokens. */
  observeJob(lane: LaneName, tokens: number): void;
  /** Lag in records per pool and lane at the last poll. */
  readonly lag: ReadonlyMap<string, number>;
}

export function createLaneLagMonitor(
  admin: Admin,
  admission: Admission,
  pools: readonly string[],
  logger: Logger,
  intervalMs = 1_000,
): LaneLagMonitor {
  const log = logger.child({ component: "lane-lag" });
  const tokensPerJob: Record<LaneName, number> = { interactive: 0, batch: 0 };
  const lag = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  async function laneLag(pool: string, lane: ServedLane): Promise<number> {
    const topic = jobsTopic(pool, lane);
    const [ends, committed] = await Promise.all([
      admin.fetchTopicOffsets(topic),
      admin.fetchOffsets({ groupId: `shoal-pool-${pool}`, topics: [topic] }),
    ]);
    const done = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    let records = 0;
    for (const p of ends) {
      const c = done.get(p.partition) ?? -1;
      // No commit yet: everything from the low watermark on is waiting.
      records += Math.max(0, Number(p.high) - (c >= 0 ? c : Number(p.low)));
    }
    return records;
  }

  async function poll(): Promise<void> {
    try {
      const totals: Record<LaneName, number> = { interactive: 0, batch: 0 };
      for (const pool of pools) {
        for (const lane of SERVED_LANES) {
          const records = await laneLag(pool, lane);
          lag.set(`${pool}/${laneName(lane)}`, records);
          totals[laneName(lane)] += records;
        }
      }
      for (const name of LANE_NAMES) admission.setQueued(name, totals[name] * tokensPerJob[name]);
    } catch (err) {
      log.debug({ err }, "lag poll failed (broker unreachable?)");
    } finally {
      if (running) timer = setTimeout(() => void poll(), intervalMs);
    }
  }

  return {
    lag,
    start() {
      if (running) return;
      running = true;
      void poll();
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
