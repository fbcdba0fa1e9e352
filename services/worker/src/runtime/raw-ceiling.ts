/**
 * Raw ONNX Runtime throughput of a model: `session.run()` alone, in this thread, inputs built
 * beforehand. Benchmarks divide what the serving path achieves by these figures
 * (cpu-ceiling.md). The session is configured exactly as the inference threads configure theirs.
 */
import { readFile } from "node:fs/promises";
import * as ort from "onnxruntime-node";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { createInferenceThreads } from "./inference-threads.ts";
import { openSession } from "./onnx-session.ts";
import { packGroup, type PackedGroup } from "./packed-group.ts";
import { paddingStats, planSubBatches, type SubBatchOptions } from "./padding-plan.ts";

/** Options of {@link measureRawThroughput}. */
export interface RawThroughputOptions {
  readonly batch: number;
  readonly seqLen: number;
  /** Timed runs, after one untimed warm-up run. */
  readonly iterations: number;
  readonly intraOpThreads: number;
}

/** Result of {@link measureRawThroughput}. */
export interface RawThroughput {
  /** batch × seqLen × iterations / time in session.run. */
  readonly tokensPerSecond: number;
  readonly msPerRun: number;
}

/** Options of {@link measureRawMixed}. */
export interface RawMixedOptions extends SubBatchOptions {
  /** Passes over all the batches, after one untimed warm-up pass. */
  readonly iterations: number;
  readonly intraOpThreads: number;
}

/** Result of {@link measureRawMixed}. */
export interface RawMixedThroughput {
  /** Σ lengths / time in session.run (padding excluded from the numerator). */
  readonly usefulTokensPerSecond: number;
  /** Σ padded group sizes / time in session.run. */
  readonly paddedTokensPerSecond: number;
  /** Useful / padded tokens of the plans. */
  readonly usefulFraction: number;
  /** session.run calls per pass. */
  readonly callsPerPass: number;
  readonly msPerPass: number;
}

/** Ids that exist in the model's vocabulary, so the forward pass does ordinary work. */
async function vocabSize(spec: ModelSpec): Promise<number> {
  const json = JSON.parse(await readFile(spec.tokenizerPath, "utf8")) as { model?: { vocab?: object } };
  const size = json.model?.vocab === undefined ? 0 : Object.keys(json.model.vocab).length;
  return size > 0 ? size : 100;
}

function syntheticIds(length: number, vocab: number, salt: number): number[] {
  const ids = new Array<number>(length);
  for (let i = 0; i < length; i++) ids[i] = (salt * 7919 + i * 104729) % vocab;
  return ids;
}

function feedsOf(spec: ModelSpec, g: PackedGroup): Record<string, ort.Tensor> {
  const shape = [g.batch, g.seqLen];
  const feeds: Record<string, ort.Tensor> = {
    [spec.inputNames.inputIds]: new ort.Tensor("int64", g.inputIds, shape),
    [spec.inputNames.attentionMask]: new ort.Tensor("int64", g.attentionMask, shape),
  };
  if (spec.inputNames.tokenTypeIds !== undefined) {
    feeds[spec.inputNames.tokenTypeIds] = new ort.Tensor("int64", new BigInt64Array(g.inputIds.length), shape);
  }
  return feeds;
}

async function timedRuns(session: ort.InferenceSession, spec: ModelSpec, feeds: readonly Record<string, ort.Tensor>[], passes: number): Promise<number> {
  const fetches = [spec.outputName];
  for (const f of feeds) await session.run(f, fetches); // warm-up: first runs allocate and specialise
  let ms = 0;
  for (let p = 0; p < passes; p++) {
    for (const f of feeds) {
      const t0 = performance.now();
      await session.run(f, fetches);
      ms += performance.now() - t0;
    }
  }
  return ms;
}

/**
 * Times each of `runs` `session.run()` calls on a full batch × seqLen input (after one untimed
 * warm-up) in an open session: per-call samples, for fits that must see past a noisy neighbour.
 */
export async function sampleRunTimes(
  session: ort.InferenceSession,
  spec: ModelSpec,
  shape: { batch: number; seqLen: number },
  runs: number,
): Promise<number[]> {
  const vocab = await vocabSize(spec);
  const seqs = Array.from({ length: shape.batch }, (_, b) => syntheticIds(shape.seqLen, vocab, b));
  const feeds = feedsOf(spec, packGroup(seqs));
  const fetches = [spec.outputName];
  await session.run(feeds, fetches);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await session.run(feeds, fetches);
    samples.push(performance.now() - t0);
  }
  return samples;
}

/** Times `session.run()` on a full batch × seqLen input (no padding), CPU provider. */
export async function measureRawThroughput(spec: ModelSpec, opts: RawThroughputOptions): Promise<RawThroughput> {
  const vocab = await vocabSize(spec);
  const seqs = Array.from({ length: opts.batch }, (_, b) => syntheticIds(opts.seqLen, vocab, b));
  const { session } = await openSession(spec, { intraOpThreads: opts.intraOpThreads, executionProvider: "cpu", allowSpinning: true }); // ORT's own default: the ceiling
  try {
    const ms = await timedRuns(session, spec, [feedsOf(spec, packGroup(seqs))], opts.iterations);
    return {
      tokensPerSecond: (opts.batch * opts.seqLen * opts.iterations) / (ms / 1000),
      msPerRun: ms / opts.iterations,
    };
  } finally {
    await session.release();
  }
}

/** One `session.run()`: its sequences of token ids. */
type PlannedCall = number[][];

/** Ragged batches planned as the serving path plans them: per batch, its calls. */
interface PlannedBatches {
  readonly batches: readonly (readonly PlannedCall[])[];
  /** Useful (unpadded) tokens of each batch, and of all. */
  readonly usefulPerBatch: readonly number[];
  readonly useful: number;
  readonly padded: number;
}

async function planBatches(spec: ModelSpec, lengthsBatches: readonly (readonly number[])[], opts: SubBatchOptions): Promise<PlannedBatches> {
  const vocab = await vocabSize(spec);
  let useful = 0;
  let padded = 0;
  const usefulPerBatch: number[] = [];
  const batches = lengthsBatches.map((lengths, bi) => {
    const groups = planSubBatches(lengths, opts);
    const stats = paddingStats(lengths, groups);
    usefulPerBatch.push(stats.usefulTokens);
    useful += stats.usefulTokens;
    padded += stats.paddedTokens;
    return groups.map((group) => group.map((i) => syntheticIds(lengths[i]!, vocab, bi * 1000 + i)));
  });
  return { batches, usefulPerBatch, useful, padded };
}

function mixedResult(plan: PlannedBatches, passes: number, seconds: number, callsPerPass: number): RawMixedThroughput {
  return {
    usefulTokensPerSecond: (plan.useful * passes) / seconds,
    paddedTokensPerSecond: (plan.padded * passes) / seconds,
    usefulFraction: plan.padded === 0 ? 1 : plan.useful / plan.padded,
    callsPerPass,
    msPerPass: (seconds * 1000) / passes,
  };
}

/**
 * Times `session.run()` over ragged batches, each split by {@link planSubBatches} as the serving
 * path splits them, and reports useful (unpadded) tokens per second.
 * @param lengthsBatches token lengths of the sequences of each batch
 */
export async function measureRawMixed(spec: ModelSpec, lengthsBatches: readonly (readonly number[])[], opts: RawMixedOptions): Promise<RawMixedThroughput> {
  const plan = await planBatches(spec, lengthsBatches, opts);
  const feeds = plan.batches.flatMap((calls) => calls.map((seqs) => feedsOf(spec, packGroup(seqs))));
  const { session } = await openSession(spec, { intraOpThreads: opts.intraOpThreads, executionProvider: "cpu", allowSpinning: true }); // ORT's own default: the ceiling
  try {
    const ms = await timedRuns(session, spec, feeds, opts.iterations);
    return mixedResult(plan, opts.iterations, ms / 1000, feeds.length);
  } finally {
    await session.release();
  }
}

/** Options of {@link measureRawMixedThreads}. */
export interface RawMixedThreadsOptions extends RawMixedOptions {
  /** Inference threads, each with its own session of `intraOpThreads`, all kept busy at once. */
  readonly threads: number;
}

/**
 * {@link measureRawMixed} in a worker's layout: the same planned batches through `threads`
 * inference threads (the worker's own, {@link createInferenceThreads}), each batch one run on
 * the next free thread, every thread busy at once. Each thread's feeder counts its own useful
 * tokens over its own time from the start to its last answer, and the rates add up, so a pass's
 * last batch running alone does not count against the ceiling. The time is wall time: each run's
 * hop to its thread and back (≈0.1 ms) is in it, against runs of tens of milliseconds.
 */
export async function measureRawMixedThreads(
  spec: ModelSpec,
  lengthsBatches: readonly (readonly number[])[],
  opts: RawMixedThreadsOptions,
): Promise<RawMixedThroughput> {
  const plan = await planBatches(spec, lengthsBatches, opts);
  const runs = plan.batches.map((calls) => calls.map((ids) => ({ ids })));
  const threads = await createInferenceThreads({ spec, threads: opts.threads, intraOpThreads: opts.intraOpThreads, allowSpinning: true });
  try {
    const pass = async (passes: number): Promise<number> => {
      let next = 0;
      const t0 = performance.now();
      const rates = await Promise.all(
        Array.from({ length: opts.threads }, async () => {
          let tokens = 0;
          for (let i = next++; i < runs.length * passes; i = next++) {
            await threads.run(runs[i % runs.length]!);
            tokens += plan.usefulPerBatch[i % runs.length]!;
          }
          return tokens / ((performance.now() - t0) / 1000);
        }),
      );
      return rates.reduce((a, b) => a + b, 0);
    };
    await pass(1); // warm-up: first runs allocate and specialise
    const usefulPerSecond = await pass(opts.iterations);
    const seconds = (plan.useful * opts.iterations) / usefulPerSecond;
    return mixedResult(
      plan,
      opts.iterations,
      seconds,
      runs.reduce((n, r) => n + r.length, 0),
    );
  } finally {
    await threads.close();
  }
}
