/**
 * `npm run bench:dispatch-orders` — where the per-model shared queue's tail comes from, in the
 * discrete-event simulation alone (seconds, no cluster): `bench:dispatch`'s trace and costs, its
 * shared queue twin served in three orders (the central queue's oldest job first; a busy device's
 * own rotation over the models, as a busy share-intake worker goes; the oldest head not yet
 * acknowledged, what the broker's queue heads tell a worker) and with takes of one or several
 * batches (a worker's idle take, SHOAL_IDLE_TAKE_TOKENS, is four batches' worth on accelerators).
 * Prints request p99 per seed and load; asserts nothing.
 *
 *   npm run bench:dispatch-orders -- [--seeds 1,2,3] [--loads 1.2,1.6,2] [--seconds 10] [--takes 1,4]
 *     [--profile gpu-h200-minilm] [--dilation 40] [--workers 4] [--path-ms 10]
 */
import { parseArgs } from "node:util";
import { sharedQueue, simulate } from "@shoal/sim";
import { simProfile } from "@shoal/worker/runtime/simulated/profile";
import { benchDevice, benchScale, benchTraceAt } from "./dispatch-trace.ts";

const { values: args } = parseArgs({
  options: {
    seeds: { type: "string", default: "1,2,3" },
    loads: { type: "string", default: "1.2,1.6,2" },
    seconds: { type: "string", default: "10" },
    takes: { type: "string", default: "1,4" },
    profile: { type: "string", default: "gpu-h200-minilm" },
    dilation: { type: "string", default: "40" },
    workers: { type: "string", default: "4" },
    "path-ms": { type: "string", default: "10" },
  },
});
const list = (s: string): number[] => s.split(",").map(Number);
const profile = simProfile(args.profile);
const dilation = Number(args.dilation);
const workers = Number(args.workers);
const pathMs = Number(args["path-ms"]);
const { cost, batching } = benchDevice(profile, dilation);
const ORDERS = ["oldest", "rotation", "heads"] as const;
const takes = list(args.takes);

console.log(
  `DES request p99 (ms), ${workers} devices of ${profile.id} x${dilation}, ${args.seconds} s of arrivals per point, path ${pathMs} ms; ` +
    "orders: oldest (the central queue), rotation (each busy device's own round), heads (the oldest job not yet acknowledged, running ones included)",
);
console.log(`\n| seed | ρ | 10× SLO | ${takes.flatMap((t) => ORDERS.map((o) => `${o}, ${t} batch(es)`)).join(" | ")} |`);
console.log(`|---:|---:|---:|${takes.flatMap(() => ORDERS.map(() => "---:")).join("|")}|`);
for (const seed of list(args.seeds)) {
  const trace = { seed, zipfS: 1.1, burstFactor: 4, models: 9 };
  const scale = benchScale(trace, cost, batching, workers);
  for (const load of list(args.loads)) {
    const rate = scale.rateAt(load);
    const t = benchTraceAt(trace, rate, Math.max(20, Math.round(rate * Number(args.seconds))));
    const cells = takes.flatMap((takeBatches) =>
      ORDERS.map((order) => {
        const r = simulate({ trace: t, devices: workers, cost, policy: sharedQueue({ order, takeBatches }), batching, seed, pathMs });
        return r.latency["request"]!.p99Ms.toFixed(0);
      }),
    );
    console.log(`| ${seed} | ${load} | ${(10 * scale.loneMedianMs).toFixed(0)} | ${cells.join(" | ")} |`);
  }
}
