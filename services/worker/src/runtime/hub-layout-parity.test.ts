/**
 * The same generated weights read two ways — the classic directory (shoal-model.json) and a
 * Hugging Face Hub layout with no manifest (issue #48) — run through the worker's real runtime
 * (tokenizer, inference thread, pooling) give the same vectors. Also runs a cross-encoder from its
 * Hub layout against its classic directory.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { getPreset } from "../../../../infra/models/src/presets.ts";
import { writeHubModelDir } from "../../../../infra/models/src/write-hub-model-dir.ts";
import { createInferenceThreads } from "./inference-threads.ts";
import { createTextTokenizer } from "./text-tokenizer.ts";
import { generatedModelDir, sentences } from "./test-models.ts";
import { cosine } from "../../../../infra/pretrained/cosine.ts";

/** Pooled vectors of `texts`, one group, through the worker's runtime pieces. */
async function embed(spec: ModelSpec, texts: readonly string[]): Promise<Float32Array[]> {
  const tok = await createTextTokenizer(spec);
  const threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
  try {
    const { vectors } = await threads.run([{ ids: texts.map((t) => tok.encode(t, { truncate: true }).ids) }]);
    return texts.map((_, i) => vectors.subarray(i * spec.dimensions, (i + 1) * spec.dimensions));
  } finally {
    await threads.close();
  }
}

describe("a Hub-layout model and its classic directory run the same", () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), "shoal-hub-parity-test-"));
  });
  after(() => rm(root, { recursive: true, force: true }));

  it("tiny embedder: same spec values, cosine >= 0.9999 on every text", async () => {
    const classic = await readModelDir(await generatedModelDir("tiny"));
    await writeHubModelDir(join(root, "tiny"), getPreset("tiny"));
    const hub = await readModelDir(join(root, "tiny"));
    for (const key of ["task", "dimensions", "maxSequenceLength", "pooling", "normalize", "outputName"] as const) {
      assert.equal(hub[key], classic[key], key);
    }
    assert.deepEqual(hub.inputNames, classic.inputNames);
    const texts = [...sentences(6, 40, 3), "shoal", "a school of fish swims near the coral reef"];
    const [a, b] = await Promise.all([embed(classic, texts), embed(hub, texts)]);
    for (let i = 0; i < texts.length; i++) {
      const c = cosine(a[i]!, b[i]!);
      assert.ok(c >= 0.9999, `text ${i}: cosine ${c}`);
    }
  });

  it("tiny-rerank cross-encoder (CrossEncoder v4 config): same logits for the same pairs", async () => {
    const classic = await readModelDir(await generatedModelDir("tiny-rerank"));
    await writeHubModelDir(join(root, "rerank"), getPreset("tiny-rerank"));
    const hub = await readModelDir(join(root, "rerank"));
    assert.equal(hub.task, "rerank");
    const logits = async (spec: ModelSpec): Promise<number[]> => {
      const tok = await createTextTokenizer(spec);
      const threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
      try {
        const pairs = ["paris is the capital of france", "kafka brokers replicate partitions"].map((d) =>
          tok.encodePair("capital of france", d, { truncate: true }),
        );
        return [...(await threads.run([{ ids: pairs.map((p) => p.ids), typeIds: pairs.map((p) => p.typeIds) }])).vectors];
      } finally {
        await threads.close();
      }
    };
    const [a, b] = await Promise.all([logits(classic), logits(hub)]);
    for (const [i, x] of a.entries()) assert.ok(Math.abs(x - b[i]!) < 1e-5, `pair ${i}: ${x} vs ${b[i]}`);
  });
});
