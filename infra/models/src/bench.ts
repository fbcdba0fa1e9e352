/**
 * Raw onnxruntime-node CPU throughput of a Shoal model directory (session.run only).
 *
 *   node --import tsx infra/models/src/bench.ts --preset mini [--dir <model dir>]
 *        [--batch 32] [--seq 128] [--threads 2] [--iters 5] [--warmup 2] [--opt all]
 *        [--save-optimized <file.onnx>]   (also prints the optimized graph's operator counts)
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { ensureModel } from "./ensure-model.ts";
import { parseManifest, MANIFEST_FILE } from "./manifest.ts";
import { onnx } from "./onnx-builder.ts";
import { mulberry32 } from "./prng.ts";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "mini" },
    dir: { type: "string" },
    batch: { type: "string", default: "32" },
    seq: { type: "string", default: "128" },
    threads: { type: "string", default: "2" },
    iters: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    opt: { type: "string", default: "all" },
    "save-optimized": { type: "string" },
  },
});

const dir = values.dir ?? (await ensureModel(values.preset));
const manifest = parseManifest(JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")));
const batch = Number(values.batch);
const seq = Number(values.seq);
const iters = Number(values.iters);
const warmup = Number(values.warmup);
const opt = values.opt as ort.InferenceSession.SessionOptions["graphOptimizationLevel"];

const tLoad = performance.now();
const session = await ort.InferenceSession.create(join(dir, manifest.onnx.file), {
  executionProviders: ["cpu"],
  intraOpNumThreads: Number(values.threads),
  interOpNumThreads: 1,
  graphOptimizationLevel: opt,
  ...(values["save-optimized"] ? { optimizedModelFilePath: values["save-optimized"] } : {}),
});
const loadMs = performance.now() - tLoad;

const rand = mulberry32(42);
const n = batch * seq;
const ids = new BigInt64Array(n);
for (let b = 0; b < batch; b++) {
  for (let s = 0; s < seq; s++) {
    ids[b * seq + s] = s === 0 ? 101n : s === seq - 1 ? 102n : BigInt(1000 + Math.floor(rand() * 29000));
  }
}
const feeds: Record<string, ort.Tensor> = {
  [manifest.onnx.inputs.inputIds]: new ort.Tensor("int64", ids, [batch, seq]),
  [manifest.onnx.inputs.attentionMask]: new ort.Tensor("int64", new BigInt64Array(n).fill(1n), [batch, seq]),
};
if (manifest.onnx.inputs.tokenTypeIds) {
  feeds[manifest.onnx.inputs.tokenTypeIds] = new ort.Tensor("int64", new BigInt64Array(n), [batch, seq]);
}

for (let i = 0; i < warmup; i++) await session.run(feeds);
const times: number[] = [];
for (let i = 0; i < iters; i++) {
  const t = performance.now();
  await session.run(feeds);
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
const mean = times.reduce((a, b) => a + b, 0) / times.length;
const median = times[Math.floor(times.length / 2)] ?? mean;
console.log(
  JSON.stringify(
    {
      model: manifest.id,
      dir,
      batch,
      seq,
      threads: Number(values.threads),
      graphOptimizationLevel: opt,
      sessionLoadMs: Math.round(loadMs),
      runMs: { min: +(times[0] ?? 0).toFixed(1), median: +median.toFixed(1), mean: +mean.toFixed(1), max: +(times[times.length - 1] ?? 0).toFixed(1) },
      tokensPerSecond: { median: Math.round(n / (median / 1000)), mean: Math.round(n / (mean / 1000)) },
    },
    null,
    2,
  ),
);
await session.release();

const optimizedPath = values["save-optimized"];
if (optimizedPath) {
  const optimized = onnx.ModelProto.decode(await readFile(optimizedPath));
  const counts = new Map<string, number>();
  for (const node of optimized.graph?.node ?? []) {
    const key = `${node.domain ? `${node.domain}:` : ""}${node.opType ?? "?"}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  console.log(
    `optimized graph operators: ${[...counts]
      .sort()
      .map(([k, v]) => `${k} x${v}`)
      .join(", ")}`,
  );
}
