/**
 * The threads running the generated models with a task head: a cross-encoder fed (query, document)
 * pairs with their token types, and single- and multi-label classifiers, scored as the worker's
 * runners will score them (activations.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { activationOf, applyActivation } from "./activations.ts";
import { InferenceError } from "./errors.ts";
import { createInferenceThreads, type InferenceThreads } from "./inference-threads.ts";
import { createTextTokenizer, type EncodedPair, type TextTokenizer } from "./text-tokenizer.ts";
import { generatedModelDir, sentences, rejection } from "./test-models.ts";

const TEXTS = [
  "the cat sat on the mat",
  "kafka brokers replicate partitions",
  "I love this product so much!",
  "terrible service, never again",
  "what is the capital of france",
  "paris is the capital of france",
];

describe("inference threads on the generated tiny-rerank cross-encoder", () => {
  let spec: ModelSpec;
  let tok: TextTokenizer;
  let threads: InferenceThreads;
  const query = "what is the capital of france";
  let pairs: EncodedPair[];

  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny-rerank"));
    tok = await createTextTokenizer(spec);
    threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
    pairs = TEXTS.map((d) => tok.encodePair(query, d, { truncate: true }));
  });
  after(() => threads.close());

  /** One logit per pair, each pair run as its own group of one. */
  async function alone(ps: readonly EncodedPair[]): Promise<number[]> {
    const { vectors } = await threads.run(ps.map((p) => ({ ids: [p.ids], typeIds: [p.typeIds] })));
    return [...vectors];
  }

  it("returns one logit per pair; sigmoid scores in (0, 1) that differ by document", async () => {
    assert.equal(spec.task, "rerank");
    assert.equal(threads.dimensions, 1);
    const logits = await alone(pairs);
    assert.equal(logits.length, TEXTS.length);
    assert.ok(logits.every(Number.isFinite));
    assert.equal(activationOf(spec), "sigmoid");
    const scores = applyActivation(spec, Float32Array.from(logits));
    scores.forEach((s, i) => {
      assert.ok(s > 0 && s < 1, `score ${s}`);
      assert.ok(Math.abs(s - 1 / (1 + Math.exp(-logits[i]!))) < 1e-6);
    });
    assert.equal(new Set(logits.map((x) => x.toFixed(3))).size, TEXTS.length, `logits should differ: ${logits}`);
  });

  it("a pair's logit alone equals its logit in a batch padded with longer pairs (< 1e-5)", async () => {
    const longer = sentences(3, 60, 9).map((d) => tok.encodePair(query, d, { truncate: true }));
    const single = await alone(pairs);
    for (const [i, p] of pairs.entries()) {
      const batch = [longer[0]!, p, ...longer.slice(1)];
      assert.ok(Math.max(...batch.map((x) => x.tokenCount)) > p.tokenCount + 20, "the batch pads the pair");
      const r = await threads.run([{ ids: batch.map((x) => x.ids), typeIds: batch.map((x) => x.typeIds) }]);
      assert.equal(r.paddedTokens, batch.length * Math.max(...batch.map((x) => x.tokenCount)));
      const inBatch = r.vectors[1]!;
      assert.ok(Math.abs(inBatch - single[i]!) < 1e-5, `pair ${i}: ${single[i]} alone vs ${inBatch} in a batch`);
    }
  });

  it("token types reach the graph: swapping or dropping them changes the logit", async () => {
    const withTypes = await alone(pairs);
    const swapped = await threads.run(pairs.map((p) => ({ ids: [p.ids], typeIds: [p.typeIds.map((t) => 1 - t)] })));
    const zeros = await threads.run(pairs.map((p) => ({ ids: [p.ids], typeIds: [new Uint8Array(p.tokenCount)] })));
    const omitted = await threads.run(pairs.map((p) => ({ ids: [p.ids] })));
    for (let i = 0; i < pairs.length; i++) {
      assert.ok(Math.abs(swapped.vectors[i]! - withTypes[i]!) > 1e-3, `pair ${i}: swapped types ${swapped.vectors[i]} vs ${withTypes[i]}`);
      assert.ok(Math.abs(zeros.vectors[i]! - withTypes[i]!) > 1e-3, `pair ${i}: zero types ${zeros.vectors[i]} vs ${withTypes[i]}`);
      // Omitted types are zeros, as for single texts.
      assert.ok(Math.abs(omitted.vectors[i]! - zeros.vectors[i]!) < 1e-6);
    }
  });

  it("mixes groups with and without types in one run", async () => {
    const p = pairs[0]!;
    const r = await threads.run([{ ids: [p.ids], typeIds: [p.typeIds] }, { ids: [p.ids] }]);
    const [typed] = await alone([p]);
    assert.ok(Math.abs(r.vectors[0]! - typed!) < 1e-6);
    assert.ok(Math.abs(r.vectors[1]! - r.vectors[0]!) > 1e-3);
  });

  it("rejects type ids that do not match the ids with InferenceError(invalid-input)", async () => {
    const p = pairs[0]!;
    const err = await rejection(threads.run([{ ids: [p.ids], typeIds: [p.typeIds.subarray(1)] }]));
    assert.ok(err instanceof InferenceError && err.reason === "invalid-input", String(err));
    const err2 = await rejection(threads.run([{ ids: [p.ids, p.ids], typeIds: [p.typeIds] }]));
    assert.ok(err2 instanceof InferenceError && err2.reason === "invalid-input", String(err2));
  });
});

describe("inference threads on the generated classifiers", () => {
  for (const preset of ["tiny-classify", "tiny-multilabel"] as const) {
    it(`${preset}: [texts, labels] logits, scored by its problem type; the winning label varies`, async () => {
      const spec = await readModelDir(await generatedModelDir(preset));
      assert.ok(spec.task === "classify");
      const labels = spec.labels.length;
      assert.equal(spec.dimensions, labels);
      const tok = await createTextTokenizer(spec);
      const threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
      try {
        const ids = TEXTS.map((t) => tok.encode(t, { truncate: true }).ids);
        const { vectors } = await threads.run([{ ids }]);
        assert.equal(vectors.length, TEXTS.length * labels);
        // Padded in one group vs each alone: same logits.
        const alone = await threads.run(ids.map((x) => ({ ids: [x] })));
        for (let i = 0; i < vectors.length; i++) assert.ok(Math.abs(vectors[i]! - alone.vectors[i]!) < 1e-5);

        const scores = applyActivation(spec, vectors);
        const rows = TEXTS.map((_, i) => [...scores.subarray(i * labels, (i + 1) * labels)]);
        for (const row of rows) {
          assert.ok(
            row.every((s) => s > 0 && s < 1),
            `scores ${row}`,
          );
          const sum = row.reduce((a, b) => a + b, 0);
          if (spec.problemType === "single_label") assert.ok(Math.abs(sum - 1) < 1e-6, `row sums to ${sum}`);
        }
        assert.equal(spec.problemType, preset === "tiny-classify" ? "single_label" : "multi_label");
        // Multi-label scores are independent: they do not sum to 1.
        if (spec.problemType === "multi_label") assert.ok(rows.some((r) => Math.abs(r.reduce((a, b) => a + b, 0) - 1) > 0.05));
        const winners = new Set(rows.map((r) => r.indexOf(Math.max(...r))));
        assert.ok(winners.size >= 2, `every text got label ${[...winners].map((w) => spec.labels[w]).join()}`);
      } finally {
        await threads.close();
      }
    });
  }
});
