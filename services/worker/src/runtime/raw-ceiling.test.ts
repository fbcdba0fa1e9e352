import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { openSession } from "./onnx-session.ts";
import { measureRawMixed, measureRawMixedThreads, measureRawThroughput, sampleRunTimes } from "./raw-ceiling.ts";
import { generatedModelDir } from "./test-models.ts";

// Figures come from bench.ts; these only check the measurements are well-formed.
describe("raw ceiling measurements (tiny model, 2 iterations)", () => {
  let spec: ModelSpec;
  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny"));
  });

  it("measureRawThroughput reports positive, consistent figures", async () => {
    const r = await measureRawThroughput(spec, { batch: 4, seqLen: 32, iterations: 2, intraOpThreads: 1 });
    assert.ok(r.tokensPerSecond > 0 && Number.isFinite(r.tokensPerSecond));
    assert.ok(Math.abs(r.tokensPerSecond - (4 * 32) / (r.msPerRun / 1000)) / r.tokensPerSecond < 1e-9);
  });

  it("measureRawMixed plans sub-batches and counts useful tokens only", async () => {
    const batches = [
      [8, 9, 10, 120, 121],
      [64, 64],
    ];
    const r = await measureRawMixed(spec, batches, { iterations: 2, intraOpThreads: 1, perCallOverheadTokens: 16, maxItemsPerCall: 32 });
    // Plans: [8,9,10] + [120,121] and [64,64]: 3 calls, useful 396 of 30 + 242 + 128 = 400 padded.
    assert.equal(r.callsPerPass, 3);
    assert.equal(r.usefulFraction, 396 / 400);
    assert.ok(r.usefulTokensPerSecond > 0 && r.usefulTokensPerSecond < r.paddedTokensPerSecond);
    assert.ok(Math.abs(r.usefulTokensPerSecond - 396 / (r.msPerPass / 1000)) / r.usefulTokensPerSecond < 1e-9);
  });

  it("measureRawMixedThreads runs the same plans through two inference threads at once", async () => {
    const batches = [
      [8, 9, 10, 120, 121],
      [64, 64],
      [30, 31],
    ];
    const r = await measureRawMixedThreads(spec, batches, { threads: 2, iterations: 3, intraOpThreads: 1, perCallOverheadTokens: 16, maxItemsPerCall: 32 });
    // The plans above plus [30,31]: 4 calls, useful 457 of 462 padded.
    assert.equal(r.callsPerPass, 4);
    assert.equal(r.usefulFraction, 457 / 462);
    assert.ok(r.usefulTokensPerSecond > 0 && Number.isFinite(r.usefulTokensPerSecond) && r.usefulTokensPerSecond < r.paddedTokensPerSecond);
    assert.ok(Math.abs(r.usefulTokensPerSecond - 457 / (r.msPerPass / 1000)) / r.usefulTokensPerSecond < 1e-9);
  });

  it("sampleRunTimes times each call of an open session", async () => {
    const { session } = await openSession(spec, { intraOpThreads: 1, executionProvider: "cpu", allowSpinning: false });
    try {
      const samples = await sampleRunTimes(session, spec, { batch: 2, seqLen: 16 }, 3);
      assert.equal(samples.length, 3);
      for (const ms of samples) assert.ok(ms > 0 && Number.isFinite(ms));
    } finally {
      await session.release();
    }
  });
});
