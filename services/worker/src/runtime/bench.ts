/**
 * Runtime benchmark (prints figures, asserts nothing):
 *   node --import tsx services/worker/src/runtime/bench.ts [--preset mini] [--iterations 10] [--intra-op-threads 2]
 * 1. tokenizer tokens/s on a few thousand English-like sentences;
 * 2. raw session.run() vs the inference threads at batch 32 × seq 128 (the thread hop's cost);
 * 3. the same for ragged batches (32 lengths uniform in 8..128) planned into sub-batches.
 */
import { parseArgs } from "node:util";
import { createInferenceThreads } from "./inference-threads.ts";
import { readModelDir } from "@shoal/common/model-manifest";
import { paddingStats, planSubBatches } from "./padding-plan.ts";
import { measureRawMixed, measureRawThroughput } from "./raw-ceiling.ts";
import { generatedModelDir, sentences } from "./test-models.ts";
import { createTextTokenizer } from "./text-tokenizer.ts";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "mini" },
    iterations: { type: "string", default: "10" },
    "intra-op-threads": { type: "string", default: "2" },
    overhead: { type: "string", default: "64" },
  },
});
const preset = values.preset === "tiny" ? "tiny" : "mini";
const iterations = Number(values.iterations);
const intraOpThreads = Number(values["intra-op-threads"]);
const perCallOverheadTokens = Number(values.overhead);
const spec = await readModelDir(await generatedModelDir(preset));
const fmt = (n: number): string => Math.round(n).toLocaleString("en-US");
console.log(`model ${spec.id} (${preset}), ${intraOpThreads} intra-op threads, ${iterations} iterations`);

// 1. Tokenizer.
{
  const tok = await createTextTokenizer(spec);
  const corpora = {
    "short sentences (3,000 × 1-25 words)": sentences(3000, 25, 1),
    "paragraphs (300 × ~100 words)": Array.from({ length: 300 }, (_, i) => sentences(8, 25, 100 + i).join(" ")),
  };
  for (const [name, texts] of Object.entries(corpora)) {
    for (const t of texts.slice(0, 200)) tok.encode(t, { truncate: true }); // JIT warm-up
    let best = 0;
    let tokens = 0;
    for (let rep = 0; rep < 5; rep++) {
      tokens = 0;
      const t0 = performance.now();
      for (const t of texts) tokens += tok.encode(t, { truncate: true }).tokenCount;
      best = Math.max(best, tokens / ((performance.now() - t0) / 1000));
    }
    console.log(`tokenizer, ${name}: ${fmt(best)} tokens/s (${fmt(tokens)} tokens, best of 5)`);
  }
}

// 2. Uniform batch 32 × 128: raw vs threads.
const batch = 32;
const seqLen = 128;
const raw = await measureRawThroughput(spec, { batch, seqLen, iterations, intraOpThreads });
const threads = await createInferenceThreads({ spec, threads: 1, intraOpThreads });
try {
  const seqs = Array.from({ length: batch }, (_, b) => Array.from({ length: seqLen }, (_, i) => 1000 + ((b * 131 + i * 17) % 20000)));
  await threads.run([{ ids: seqs }]);
  let wallMs = 0;
  let threadMs = 0;
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    const r = await threads.run([{ ids: seqs }]);
    wallMs += performance.now() - t0;
    threadMs += r.inferenceMs;
  }
  const threadsTps = (batch * seqLen * iterations) / (wallMs / 1000);
  console.log(`batch ${batch} × seq ${seqLen}: raw session.run ${fmt(raw.tokensPerSecond)} tokens/s (${raw.msPerRun.toFixed(1)} ms/run)`);
  console.log(
    `batch ${batch} × seq ${seqLen}: threads.run ${fmt(threadsTps)} tokens/s (${(wallMs / iterations).toFixed(1)} ms/run wall, ` +
      `${(threadMs / iterations).toFixed(1)} ms in session.run; hop + packing + pooling ${((wallMs - threadMs) / iterations).toFixed(2)} ms/run) = ` +
      `${((threadsTps / raw.tokensPerSecond) * 100).toFixed(1)}% of raw`,
  );

  // 3. Ragged batches, planned into sub-batches.
  let s = 12345;
  const rnd = (): number => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  const lengthsBatches = Array.from({ length: 4 }, () => Array.from({ length: batch }, () => 8 + Math.floor(rnd() * 121)));
  const opts = { perCallOverheadTokens, maxItemsPerCall: batch };
  const rawMixed = await measureRawMixed(spec, lengthsBatches, { ...opts, iterations, intraOpThreads });
  const rawPadded = await measureRawMixed(spec, lengthsBatches, { perCallOverheadTokens: 1e12, maxItemsPerCall: batch, iterations, intraOpThreads });
  const runs = lengthsBatches.map((lengths) => {
    const groups = planSubBatches(lengths, opts);
    return groups.map((g) => ({ ids: g.map((i) => Array.from({ length: lengths[i]! }, (_, k) => 1000 + ((i * 31 + k * 7) % 20000))) }));
  });
  const useful = lengthsBatches.reduce((n, l) => n + paddingStats(l, planSubBatches(l, opts)).usefulTokens, 0);
  for (const r of runs) await threads.run(r);
  let mixedWall = 0;
  let mixedThread = 0;
  for (let i = 0; i < iterations; i++) {
    for (const r of runs) {
      const t0 = performance.now();
      mixedThread += (await threads.run(r)).inferenceMs;
      mixedWall += performance.now() - t0;
    }
  }
  const threadsMixed = (useful * iterations) / (mixedWall / 1000);
  console.log(
    `ragged 4 × 32 (8..128): raw, one padded call per batch ${fmt(rawPadded.usefulTokensPerSecond)} useful tokens/s ` +
      `(${(rawPadded.usefulFraction * 100).toFixed(0)}% useful)`,
  );
  console.log(
    `ragged 4 × 32 (8..128): raw, planned (overhead ${perCallOverheadTokens}) ${fmt(rawMixed.usefulTokensPerSecond)} useful tokens/s ` +
      `(${(rawMixed.usefulFraction * 100).toFixed(0)}% useful, ${rawMixed.callsPerPass / lengthsBatches.length} calls/batch)`,
  );
  console.log(
    `ragged 4 × 32 (8..128): threads, planned ${fmt(threadsMixed)} useful tokens/s = ${((threadsMixed / rawMixed.usefulTokensPerSecond) * 100).toFixed(1)}% of raw planned ` +
      `(${(mixedWall / iterations).toFixed(1)} ms/pass wall, ${(mixedThread / iterations).toFixed(1)} in session.run; raw ${rawMixed.msPerPass.toFixed(1)} ms/pass)`,
  );
} finally {
  await threads.close();
}
