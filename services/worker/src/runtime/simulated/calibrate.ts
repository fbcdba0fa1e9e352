/**
 * Calibration of the `cpu-minilm` simulated profile (issue #16), prints figures, gates nothing:
 *   npm run bench:calibrate [-- --write] [--profile cpu-minilm] [--intra-op-threads 1] [--target-ms 300] [--passes 2] [--allow-spinning]
 * Times real onnxruntime-node `session.run()` on the generated MiniLM-shaped model over
 * B ∈ {1,2,4,8,16,32} × L ∈ {16,32,64,128,256} in one session configured as the worker's (no
 * spinning unless asked), each call timed on its own, and keeps each shape's fastest call (on a
 * shared machine the slower ones measure the neighbours, not the model), fits `a + b·B·L + c·B·L²` (non-negative,
 * relative residuals), prints a, b, c with R² and the largest relative error, and with `--write`
 * stores them (and the measured load time and size) in profiles.json.
 */
import { readFile, stat, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { ensureModel } from "@shoal/models";
import { readModelDir } from "@shoal/common/model-manifest";
import { openSession } from "../onnx-session.ts";
import { sampleRunTimes } from "../raw-ceiling.ts";
import { fitCallCost, type CostPoint } from "./cost-fit.ts";
import type { StoredProfile } from "./profile.ts";

const BATCHES = [1, 2, 4, 8, 16, 32];
const SEQ_LENS = [16, 32, 64, 128, 256];
const PROFILES_JSON = new URL("./profiles.json", import.meta.url);

const { values } = parseArgs({
  options: {
    write: { type: "boolean", default: false },
    profile: { type: "string", default: "cpu-minilm" },
    // The worker's default layout: two inference threads of one intra-op thread each on 2 cores.
    "intra-op-threads": { type: "string", default: "1" },
    // Timed ms per grid point: enough runs that timer granularity and one-off stalls average out.
    "target-ms": { type: "string", default: "300" },
    passes: { type: "string", default: "2" },
    "allow-spinning": { type: "boolean", default: false },
  },
});
const intraOpThreads = Number(values["intra-op-threads"]);
const targetMs = Number(values["target-ms"]);
const passes = Number(values.passes);
const allowSpinning = values["allow-spinning"];

const spec = await readModelDir(await ensureModel("mini"));
console.log(
  `calibrating '${values.profile}' on ${spec.id} (${spec.modelPath}), ${intraOpThreads} intra-op threads, spinning ${allowSpinning ? "on" : "off"}, ` +
    `${passes} passes, ${cpus().length} cores`,
);

// Load cost: session creation, as the residency manager pays it on a cold start (median of 3).
const loads: number[] = [];
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  const { session } = await openSession(spec, { intraOpThreads, executionProvider: "cpu", allowSpinning });
  loads.push(performance.now() - t0);
  await session.release();
}
const loadMs = loads.sort((a, b) => a - b)[1]!;
console.log(`session create: ${loads.map((l) => l.toFixed(0)).join(" / ")} ms → load ${loadMs.toFixed(0)} ms`);

const best = new Map<string, CostPoint>();
let estimateMsPerToken = 0.1; // ~10k tokens/s (cpu-ceiling.md), refined as points come in
const { session } = await openSession(spec, { intraOpThreads, executionProvider: "cpu", allowSpinning });
try {
  for (let pass = 1; pass <= passes; pass++) {
    for (const batch of BATCHES) {
      for (const seqLen of SEQ_LENS) {
        const guess = 2 + batch * seqLen * estimateMsPerToken;
        const runs = Math.max(3, Math.min(60, Math.ceil(targetMs / guess)));
        const samples = await sampleRunTimes(session, spec, { batch, seqLen }, runs);
        const fastest = Math.min(...samples);
        const key = `${batch}x${seqLen}`;
        const prior = best.get(key);
        if (prior === undefined || fastest < prior.ms) best.set(key, { batch, seqLen, ms: fastest });
        if (batch * seqLen >= 512) estimateMsPerToken = Math.min(estimateMsPerToken, fastest / (batch * seqLen));
        const median = [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)]!;
        console.log(
          `pass ${pass} B=${String(batch).padStart(2)} L=${String(seqLen).padStart(3)}: fastest ${fastest.toFixed(2).padStart(8)} ms, ` +
            `median ${median.toFixed(2).padStart(8)} ms (${runs} calls)`,
        );
      }
    }
  }
} finally {
  await session.release();
}
const points = [...best.values()];

const fit = fitCallCost(points);
console.log("");
console.log(`fit: a = ${fit.aMs.toFixed(3)} ms, b = ${(fit.bMsPerToken * 1000).toFixed(3)} µs/token, c = ${(fit.cMsPerToken2 * 1e6).toFixed(3)} ns/token²`);
console.log(`     R² = ${fit.r2.toFixed(4)}, max relative error = ${(fit.maxRelativeError * 100).toFixed(1)}% over ${points.length} points`);
for (const p of points) {
  const pred = fit.aMs + fit.bMsPerToken * p.batch * p.seqLen + fit.cMsPerToken2 * p.batch * p.seqLen * p.seqLen;
  const rel = (pred - p.ms) / p.ms;
  if (Math.abs(rel) > 0.15)
    console.log(`  B=${p.batch} L=${p.seqLen}: measured ${p.ms.toFixed(2)} ms, model ${pred.toFixed(2)} ms (${(rel * 100).toFixed(0)}%)`);
}

if (values.write) {
  const table = JSON.parse(await readFile(PROFILES_JSON, "utf8")) as Record<string, StoredProfile>;
  const memoryBytes = spec.memoryBytes ?? Math.ceil((await stat(spec.modelPath)).size * 1.5) + 16 * 1024 * 1024;
  table[values.profile] = {
    description:
      `MiniLM-L6-shaped encoder (${spec.id}) on onnxruntime-node's CPU provider: one session, ${intraOpThreads} intra-op thread(s), ` +
      `spinning ${allowSpinning ? "on" : "off"}, one session.run at a time (fastest of ${passes} passes per shape)`,
    source: "measured",
    aMs: round(fit.aMs),
    bMsPerToken: round(fit.bMsPerToken),
    cMsPerToken2: round(fit.cMsPerToken2),
    loadMs: Math.round(loadMs),
    memoryBytes,
    fit: {
      points: points.length,
      r2: round(fit.r2),
      maxRelativeError: round(fit.maxRelativeError),
      measuredAt: new Date().toISOString(),
      host: `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}`,
      command: `npm run bench:calibrate -- --write --passes ${passes} --intra-op-threads ${intraOpThreads}${allowSpinning ? " --allow-spinning" : ""}`,
    },
  };
  await writeFile(PROFILES_JSON, `${JSON.stringify(table, null, 2)}\n`);
  console.log(`wrote profile '${values.profile}' to ${PROFILES_JSON.pathname}`);
}

function round(x: number): number {
  return Number(x.toPrecision(4));
}
