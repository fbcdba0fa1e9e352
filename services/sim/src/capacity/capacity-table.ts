/**
 * The capacity model's figures as Markdown (npm run capacity, docs/capacity.md): what one pool asks
 * of Kafka beside Kafka 4.4's limits, the limit met first, and the configuration that fits.
 */
import {
  bindingLimit,
  capacityReport,
  fitConfiguration,
  KAFKA_44,
  limitUses,
  type CapacityFit,
  type CapacityInput,
  type FitOptions,
  type LimitUse,
} from "@shoal/common";

const int = (x: number): string => Math.round(x).toLocaleString("en-US");
const range = (u: LimitUse): string =>
  u.limit === KAFKA_44.groupPartitionMaxRecordLocks
    ? `at most ${int(u.limit.max ?? 0)}; ${int(KAFKA_44.maxPartitionMaxRecordLocks.max)} with the brokers' \`${KAFKA_44.maxPartitionMaxRecordLocks.name}\``
    : u.limit.max === undefined
      ? "no maximum"
      : `at most ${int(u.limit.max)}`;

/** Everything the table shows, for `--json`. */
export interface CapacityFigures {
  readonly input: CapacityInput;
  readonly uses: readonly LimitUse[];
  readonly binding: string;
  readonly fit: CapacityFit | undefined;
}

/** The figures of one pool size and layout. */
export function capacityFigures(input: CapacityInput, opts: FitOptions = {}): CapacityFigures {
  const uses = limitUses(input);
  return { input, uses, binding: bindingLimit(uses).limit.name, fit: fitConfiguration(input, opts) };
}

/** Markdown lines for one pool size and layout. */
export function capacityTable(f: CapacityFigures): string[] {
  const { input } = f;
  const r = capacityReport(input);
  const d = r.device;
  const layout = input.layout === "per-model" ? "a jobs topic per model and lane" : "a jobs topic per lane";
  const lines = [
    `### ${int(input.workers)} accelerators, ${input.layout} (${layout}), ${input.models.length} models`,
    "",
    `One accelerator at ${int(input.deviceTokensPerSecond * input.utilisation)} useful tokens/s and ${int(input.meanJobTokens)} tokens a job: ` +
      `${int(d.jobsPerSecond)} jobs/s, each locked ${d.heldMs.toFixed(0)} ms after its batch starts (compute + acknowledgement), ` +
      `plus ${int(d.recordsPerTake)} jobs of an idle take: **${int(d.locks)} record locks** per accelerator.`,
    "",
    `| one share group, ${input.partitions} partition(s) per topic | needed | Kafka 4.4 default | range | workers that fit |`,
    "| --- | ---: | ---: | --- | ---: |",
    ...f.uses.map(
      (u) =>
        `| ${u.limit === KAFKA_44.maxGroupSize ? "members in the group" : u.limit === KAFKA_44.maxShareSessions ? "share sessions on the busiest broker" : "record locks on the busiest share-partition"} ` +
        `| ${int(u.needed)}${u.fits ? "" : " ✗"} | ${int(u.allowed)} (\`${u.limit.name}\`) | ${range(u)} | ${int(u.maxWorkers)} |`,
    ),
    `| heartbeats/s at the group coordinator | ${int(r.maxHeartbeatsPerCoordinator)} | every ${int(input.heartbeatIntervalMs)} ms per member | 5,000–15,000 ms | |`,
    `| waiting fetches/s of an idle pool, all brokers (busiest) | ${int(r.idleFetchesPerSecond)} (${int(r.maxIdleFetchesPerBroker)}) | | | |`,
    `| fetches/s that take jobs, at full load | ${int(r.takeFetchesPerSecond)} | | | |`,
    `| share-state writes/s at most | ${int(r.stateWritesPerSecond)} | \`${KAFKA_44.shareCoordinatorThreads.name}\` = 1 | | |`,
    "",
    `Binds first: **\`${f.binding}\`** (${int(Math.min(...f.uses.map((u) => u.maxWorkers)))} workers).`,
    "",
  ];
  const fit = f.fit;
  if (!fit) return [...lines, "No configuration fits: even one model per pool exceeds a limit at its maximum.", ""];
  const settings = [
    ...Object.entries(fit.broker).map(([k, v]) => `\`${k}=${v}\` (brokers)`),
    ...Object.entries(fit.group).map(([k, v]) => `\`${k}=${v}\` (each pool's share group)`),
  ];
  const fr = fit.report;
  lines.push(
    `What fits: **${fit.report.groups.length} pool(s)**, ${settings.length > 0 ? settings.join(", ") : "Kafka's defaults"}; ` +
      `then ${int(fr.maxMembersPerGroup)} members in the largest group, ${int(fr.maxLocksPerPartition)} locks on the busiest partition, ` +
      `${int(fr.maxSessionsPerBroker)} sessions on the busiest broker, ${int(fr.heartbeatsPerSecond)} heartbeats/s, ${int(fr.idleFetchesPerSecond)} idle waiting fetches/s.`,
    "",
    "| pool | models | workers | partitions per topic | members | locks per partition |",
    "| ---: | --- | ---: | ---: | ---: | ---: |",
    ...fr.groups.map(
      (g, i) => `| ${i + 1} | ${g.models.join(", ")} | ${int(g.workers)} | ${int(g.partitions)} | ${int(g.members)} | ${int(g.locksPerPartition)} |`,
    ),
    "",
    ...fit.notes.map((n) => `- ${n}`),
  );
  return lines;
}
