/**
 * Dispatch benchmark on simulated accelerators (issue #16), prints figures, gates nothing:
 *   npm run bench:dispatch-sim [-- --quick] [--seed 1] [--devices 4] [--requests 20000] [--zipf 1.1] [--profiles cpu-minilm,gpu-a100-bert]
 *     [--resident-models 3]   (a device holds 3 of the 9 models, LRU, loading others at the profile's load cost)
 * For each profile, sweeps the offered load for every policy through the discrete-event
 * simulation, finds each one's knee (≥ 99% answered, p99 ≤ SLO for SLO = 5×, 10×, 20× a lone
 * median job's service time) and prints goodput there with the ratio shared queue ÷ each arm.
 */
import { parseArgs } from "node:util";
import { simProfile } from "@shoal/worker/runtime/simulated/profile";
import { WORKER_BATCHING } from "./des.ts";
import { benchmarkArms } from "./arms.ts";
import { printSweep } from "./report.ts";
import { findKnees } from "./sweep.ts";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    devices: { type: "string", default: "4" },
    requests: { type: "string" },
    zipf: { type: "string", default: "1.1" },
    profiles: { type: "string", default: "cpu-minilm,gpu-a100-bert" },
    verbose: { type: "boolean", default: false },
    "resident-models": { type: "string" },
  },
});
const quick = values.quick;
const seed = Number(values.seed);
const devices = Number(values.devices);
const requests = Number(values.requests ?? (quick ? 4_000 : 20_000));
const started = performance.now();
console.log(
  `dispatch simulation: ${devices} devices, seed ${seed}, ${requests} agent requests per run, Zipf s=${values.zipf}` +
    `${values["resident-models"] === undefined ? ", every model resident" : `, ${values["resident-models"]} models resident per device`}${quick ? ", quick" : ""}`,
);

for (const id of values.profiles.split(",")) {
  const profile = simProfile(id);
  // A worker tuned for its hardware sets SHOAL_PER_CALL_OVERHEAD_TOKENS to its per-call cost in tokens.
  const batching = { ...WORKER_BATCHING, perCallOverheadTokens: Math.round(profile.aMs / Math.max(profile.bMsPerToken, 1e-9)) };
  console.log(
    `\n== ${profile.id} (${profile.source}): a=${profile.aMs} ms, b=${(profile.bMsPerToken * 1000).toFixed(3)} µs/token, c=${(profile.cMsPerToken2 * 1e6).toFixed(3)} ns/token², per-call overhead ${batching.perCallOverheadTokens} tokens`,
  );
  let runs = 0;
  const sweep = findKnees({
    cost: profile,
    devices,
    policies: benchmarkArms(),
    seed,
    requests,
    sloMultiples: [5, 10, 20],
    batching,
    stepFactor: 1.5,
    // Knee resolution 1.5^(1/2^steps): 5% quick, 1.3% full.
    refineSteps: quick ? 3 : 5,
    trace: { zipfS: Number(values.zipf) },
    ...(values["resident-models"] === undefined ? {} : { residentModels: Number(values["resident-models"]), loadMs: profile.loadMs }),
    onProgress: (line) => {
      runs += 1;
      if (values.verbose) console.log(line);
      else if (runs % 10 === 0) process.stdout.write(`  ${runs} runs, ${((performance.now() - started) / 1000).toFixed(0)} s\r`);
    },
  });
  printSweep(sweep, (line) => console.log(line));
}
console.log(`\ndone in ${((performance.now() - started) / 1000).toFixed(1)} s`);
