/**
 * npm run capacity: the capacity model's table (issue #53, docs/capacity.md).
 *
 *   npm run capacity                                   # 8, 64 and 1,000 H200s, nine models, both layouts
 *   npm run capacity -- --accelerators 64 --layout per-lane --partitions 8
 *   npm run capacity -- --accelerators 100 --models 20 --job-tokens 300 --json
 *
 * With --models 9 (the default) the fleet is the contract-review agent's (shares measured on its
 * trace); any other count is that many models of equal share, --job-tokens tokens a job.
 */
import { parseArgs } from "node:util";
import { ACCELERATOR_DEFAULTS, type CapacityInput, type TopicLayout } from "@shoal/common";
import { capacityFigures, capacityTable } from "./capacity-table.ts";
import { H200_USEFUL_TOKENS_PER_SECOND, traceFleet, uniformFleet } from "./fleet.ts";

const { values } = parseArgs({
  options: {
    accelerators: { type: "string", default: "8,64,1000" },
    models: { type: "string", default: "9" },
    lanes: { type: "string", default: String(ACCELERATOR_DEFAULTS.lanes) },
    layout: { type: "string", default: "both" },
    "job-tokens": { type: "string" },
    "device-tokens-per-s": { type: "string", default: String(H200_USEFUL_TOKENS_PER_SECOND) },
    utilisation: { type: "string", default: String(ACCELERATOR_DEFAULTS.utilisation) },
    "busiest-lane-share": { type: "string", default: String(ACCELERATOR_DEFAULTS.busiestLaneShare) },
    "batch-tokens": { type: "string", default: String(ACCELERATOR_DEFAULTS.batchTokens) },
    "idle-take-tokens": { type: "string", default: String(ACCELERATOR_DEFAULTS.idleTakeTokens) },
    "ack-delay-ms": { type: "string", default: String(ACCELERATOR_DEFAULTS.ackDelayMs) },
    "ack-linger-ms": { type: "string", default: String(ACCELERATOR_DEFAULTS.ackLingerMs) },
    "idle-wait-ms": { type: "string", default: String(ACCELERATOR_DEFAULTS.idleWaitMs) },
    "later-idle-wait-ms": { type: "string", default: String(ACCELERATOR_DEFAULTS.laterIdleWaitMs) },
    "heartbeat-interval-ms": { type: "string", default: String(ACCELERATOR_DEFAULTS.heartbeatIntervalMs) },
    brokers: { type: "string", default: String(ACCELERATOR_DEFAULTS.brokers) },
    partitions: { type: "string", default: String(ACCELERATOR_DEFAULTS.partitions) },
    groups: { type: "string", default: String(ACCELERATOR_DEFAULTS.groups) },
    headroom: { type: "string", default: "0.8" },
    json: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (values.help) {
  console.log(
    "npm run capacity -- [--accelerators 8,64,1000] [--models 9] [--layout per-model|per-lane|both] [--partitions 1] [--groups 1] [--brokers 3] [--json]",
  );
  console.log("  see services/sim/src/capacity/capacity-cli.ts for every option; docs/capacity.md for the model");
  process.exit(0);
}

const problems: string[] = [];
function num(name: keyof typeof values, min: number, max = Number.POSITIVE_INFINITY): number {
  const raw = values[name];
  const n = Number(raw);
  if (typeof raw !== "string" || !Number.isFinite(n) || n < min || n > max)
    problems.push(`--${name}: expected a number in ${min}..${max} (got ${String(raw)})`);
  return n;
}
const sizes = values.accelerators.split(",").map((s) => Number(s));
if (sizes.some((n) => !Number.isInteger(n) || n < 1)) problems.push(`--accelerators: expected positive integers (got ${values.accelerators})`);
const modelCount = num("models", 1, 10_000);
const layouts: TopicLayout[] =
  values.layout === "both" ? ["per-model", "per-lane"] : values.layout === "per-model" || values.layout === "per-lane" ? [values.layout] : [];
if (layouts.length === 0) problems.push(`--layout: expected per-model, per-lane or both (got ${values.layout})`);
const base = {
  lanes: num("lanes", 1, 16),
  deviceTokensPerSecond: num("device-tokens-per-s", 1),
  utilisation: num("utilisation", 0.001, 1),
  busiestLaneShare: num("busiest-lane-share", 0, 1),
  batchTokens: num("batch-tokens", 1),
  idleTakeTokens: num("idle-take-tokens", 1),
  ackDelayMs: num("ack-delay-ms", 0),
  ackLingerMs: num("ack-linger-ms", 0),
  idleWaitMs: num("idle-wait-ms", 1),
  laterIdleWaitMs: num("later-idle-wait-ms", 1),
  heartbeatIntervalMs: num("heartbeat-interval-ms", 1),
  brokers: num("brokers", 1, 10_000),
  partitions: num("partitions", 1, 1_024),
  groups: num("groups", 1, 10_000),
};
const headroom = num("headroom", 0.01, 1);
const fleet =
  modelCount === 9 && values["job-tokens"] === undefined
    ? traceFleet()
    : uniformFleet(modelCount, values["job-tokens"] === undefined ? 449 : num("job-tokens", 1));
if (problems.length > 0) {
  console.error(`npm run capacity: ${problems.join("; ")}`);
  process.exit(2);
}

const figures = sizes.flatMap((workers) =>
  layouts.map((layout) => {
    const input: CapacityInput = { ...base, workers, layout, models: fleet.models, meanJobTokens: fleet.meanJobTokens };
    return capacityFigures(input, { headroom });
  }),
);
if (values.json) console.log(JSON.stringify(figures, null, 2));
else for (const f of figures) console.log(capacityTable(f).join("\n"));
