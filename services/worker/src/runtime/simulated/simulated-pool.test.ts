import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { InferenceError } from "../errors.ts";
import { generatedModelDir } from "../test-models.ts";
import { createSimulatedDevice } from "./device.ts";
import type { SimProfile } from "./profile.ts";
import { createSimulatedPool } from "./simulated-pool.ts";

const profile: SimProfile = { id: "test", description: "test", source: "published", aMs: 2, bMsPerToken: 0.01, cMsPerToken2: 0, loadMs: 5, memoryBytes: 1 };

describe("simulated pool (the runtime adapter over a simulated device)", () => {
  let embed: ModelSpec;
  let classify: ModelSpec;
  before(async () => {
    embed = await readModelDir(await generatedModelDir("tiny"));
    classify = await readModelDir(await generatedModelDir("tiny-classify"));
  });

  it("answers rows of the model shape, deterministic in the ids, embeddings unit-length", async () => {
    const device = createSimulatedDevice({ profile, dilation: 1 });
    const pool = await createSimulatedPool({ spec: embed, device });
    assert.equal(pool.info.runtime, "simulated:test");
    assert.equal(pool.info.provider, "simulated");
    const groups = [
      {
        ids: [
          [101, 7, 102],
          [101, 8, 9, 102],
        ],
      },
      { ids: [[101, 7, 102]] },
    ];
    const r = await pool.run(groups);
    const dims = embed.dimensions;
    assert.equal(r.vectors.length, 3 * dims);
    assert.equal(r.paddedTokens, 2 * 4 + 1 * 3);
    assert.ok(r.inferenceMs >= 2 * 2);
    const row = (i: number): Float32Array => r.vectors.subarray(i * dims, (i + 1) * dims);
    assert.deepEqual(row(0), row(2), "same ids, same vector");
    assert.notDeepEqual(row(0), row(1));
    for (let i = 0; i < 3; i++) assert.ok(Math.abs(Math.hypot(...row(i)) - 1) < 1e-5);
    const again = await pool.run([{ ids: [[101, 8, 9, 102]] }]);
    assert.deepEqual(again.vectors, row(1));
    await pool.close();
  });

  it("answers one logit per label for a classifier; rejects bad input and runs after close", async () => {
    const device = createSimulatedDevice({ profile, dilation: 1 });
    const pool = await createSimulatedPool({ spec: classify, device });
    const r = await pool.run([{ ids: [[101, 5, 102]] }]);
    assert.equal(r.vectors.length, classify.dimensions);
    const bad = await pool.run([{ ids: [] }]).catch((e: unknown) => e);
    assert.ok(bad instanceof InferenceError && bad.reason === "invalid-input");
    await pool.close();
    const closed = await pool.run([{ ids: [[1]] }]).catch((e: unknown) => e);
    assert.ok(closed instanceof InferenceError && closed.reason === "closed");
  });
});
