import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { GetClusterResponseSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { ModelSchema, ResidencyState } from "@shoal/gen/shoal/v1/model_pb.ts";
import { clusterTotals, formatBytes, laneGrid, memoryFraction, replicaSummary, stateName } from "./cluster.ts";
import { barFractions, formatScore, percent } from "./scores.ts";

const GiB = 1024n ** 3n;

const cluster = create(GetClusterResponseSchema, {
  observedUnixMs: 10_000n,
  workers: [
    {
      workerId: "w-a",
      pool: "default",
      provider: "cpu",
      memoryBudgetBytes: 4n * GiB,
      memoryUsedBytes: GiB,
      models: [
        { model: "emb", state: ResidencyState.RESIDENT, pinned: true },
        { model: "rr", state: ResidencyState.LOADING },
      ],
    },
    {
      workerId: "w-b",
      pool: "gpu",
      provider: "cuda",
      draining: true,
      memoryBudgetBytes: 4n * GiB,
      memoryUsedBytes: 3n * GiB,
      models: [{ model: "cls", state: ResidencyState.FAILED, error: "out of memory" }],
    },
  ],
  lanes: [
    { pool: "gpu", lane: Lane.BATCH, records: 40n },
    { pool: "default", lane: Lane.INTERACTIVE, records: 3n },
    { pool: "default", lane: Lane.BATCH, records: 12n },
  ],
});

test("cluster totals: workers by provider, draining, model states, memory and lag per lane", () => {
  const t = clusterTotals(cluster);
  assert.equal(t.workers, 2);
  assert.equal(t.draining, 1);
  assert.deepEqual(
    [...t.providers],
    [
      ["cpu", 1],
      ["cuda", 1],
    ],
  );
  assert.deepEqual([t.resident, t.loading, t.failed, t.pinned], [1, 1, 1, 1]);
  assert.equal(t.memoryUsed, 4 * 1024 ** 3);
  assert.equal(t.memoryBudget, 8 * 1024 ** 3);
  assert.equal(t.lagRecords, 55);
  assert.deepEqual([...t.lagByLane].sort(), [
    ["batch", 52],
    ["interactive", 3],
  ]);
  assert.equal(clusterTotals(create(GetClusterResponseSchema, {})).workers, 0);
});

test("lane grid: pools sorted, interactive before batch, missing cells undefined, max for bar scale", () => {
  const g = laneGrid(cluster.lanes);
  assert.deepEqual(g.pools, ["default", "gpu"]);
  assert.deepEqual(g.lanes, [Lane.INTERACTIVE, Lane.BATCH]);
  assert.equal(g.records("default", Lane.BATCH), 12);
  assert.equal(g.records("gpu", Lane.INTERACTIVE), undefined);
  assert.equal(g.max, 40);
  assert.equal(laneGrid([]).max, 1, "never 0, so bars never divide by it");
});

test("states, bytes, memory fraction", () => {
  assert.deepEqual([ResidencyState.LOADING, ResidencyState.RESIDENT, ResidencyState.FAILED, ResidencyState.UNSPECIFIED].map(stateName), [
    "loading",
    "resident",
    "failed",
    "unknown",
  ]);
  assert.equal(formatBytes(0n), "0 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(3n * GiB), "3.0 GiB");
  assert.equal(formatBytes(300n * 1024n * 1024n), "300 MiB");
  assert.equal(memoryFraction(GiB, 4n * GiB), 0.25);
  assert.equal(memoryFraction(GiB, 0n), undefined);
});

test("model replicas summarised for the models table", () => {
  const m = create(ModelSchema, {
    id: "emb",
    replicas: [
      { workerId: "w-a", state: ResidencyState.RESIDENT },
      { workerId: "w-b", state: ResidencyState.LOADING },
      { workerId: "w-c", state: ResidencyState.RESIDENT },
    ],
  });
  assert.deepEqual(replicaSummary(m), { text: "2 resident · 1 loading", states: ["resident", "loading", "resident"] });
  assert.deepEqual(replicaSummary(create(ModelSchema, { id: "x" })), { text: "not loaded", states: [] });
});

test("score bars: probabilities as they are, logits scaled low..high, NaN empty", () => {
  assert.deepEqual(barFractions([0.9, 0.1, 0]), [0.9, 0.1, 0]);
  const logits = barFractions([4, -2, 1]);
  assert.equal(logits[0], 1);
  assert.ok(logits[1]! > 0 && logits[1]! < 0.1, "the lowest logit is a sliver");
  assert.ok(Math.abs(logits[2]! - (0.04 + 0.5 * 0.96)) < 1e-12);
  assert.deepEqual(barFractions([3, 3]), [1, 1]);
  assert.deepEqual(barFractions([0.5, Number.NaN]), [0.5, 0]);
  assert.deepEqual(barFractions([]), []);
  assert.equal(formatScore(0.93251), "0.9325");
  assert.equal(formatScore(-Math.PI), "-3.14");
  assert.equal(percent(1.7), "100.0%");
});
