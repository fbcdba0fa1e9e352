import assert from "node:assert/strict";
import { test } from "node:test";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { isLaneName, jobsTopic, jobTopicFor, laneFromName, laneJobTopics, laneName, LANE_NAMES, SERVED_LANES, servedLane } from "./lanes.ts";
import { poolTopicSpecs, signedKindOf } from "./topics.ts";

test("a served lane and its name translate both ways", () => {
  assert.deepEqual(SERVED_LANES.map(laneName), LANE_NAMES);
  assert.deepEqual(LANE_NAMES.map(laneFromName), SERVED_LANES);
  assert.equal(laneName(Lane.INTERACTIVE), "interactive");
  assert.equal(laneName(Lane.BATCH), "batch");
  assert.equal(laneFromName("unspecified"), undefined);
  assert.equal(laneFromName("BATCH"), undefined, "names are lower case, as in topics and config");
});

test("isLaneName accepts the two lane names only", () => {
  assert.ok(isLaneName("interactive"));
  assert.ok(isLaneName("batch"));
  for (const other of ["", "bulk", "Batch", 1, undefined, null]) assert.equal(isLaneName(other), false, String(other));
});

test("servedLane keeps a served lane and gives anything else the fallback", () => {
  assert.equal(servedLane(Lane.BATCH), Lane.BATCH);
  assert.equal(servedLane(Lane.INTERACTIVE, Lane.BATCH), Lane.INTERACTIVE);
  assert.equal(servedLane(Lane.UNSPECIFIED), Lane.INTERACTIVE);
  assert.equal(servedLane(Lane.UNSPECIFIED, Lane.BATCH), Lane.BATCH);
  assert.equal(servedLane(99 as Lane, Lane.BATCH), Lane.BATCH, "an unknown enum value is not a lane");
});

test("a jobs topic ends with its lane's name", () => {
  assert.equal(jobsTopic("gpu", Lane.INTERACTIVE), "shoal.jobs.gpu.interactive");
  assert.equal(jobsTopic("gpu", Lane.BATCH), "shoal.jobs.gpu.batch");
  const jobs = poolTopicSpecs({ name: "cpu", partitions: 4, jobTopics: "per-lane", models: ["a", "b"] }).filter((s) => s.topic.startsWith("shoal.jobs."));
  assert.deepEqual(
    jobs.map((s) => [s.topic, s.partitions]),
    [
      ["shoal.jobs.cpu.interactive", 4],
      ["shoal.jobs.cpu.batch", 4],
    ],
  );
});

test("a per-model pool has a jobs topic per model and lane, and each job goes to its model's", () => {
  const pool = { name: "gpu", partitions: 1, jobTopics: "per-model", models: ["bge", "minilm"] } as const;
  const jobs = poolTopicSpecs(pool).filter((s) => s.topic.startsWith("shoal.jobs."));
  assert.deepEqual(
    jobs.map((s) => s.topic),
    ["shoal.jobs.gpu.interactive.m.bge", "shoal.jobs.gpu.interactive.m.minilm", "shoal.jobs.gpu.batch.m.bge", "shoal.jobs.gpu.batch.m.minilm"],
  );
  assert.equal(jobTopicFor(pool, Lane.BATCH, "minilm"), "shoal.jobs.gpu.batch.m.minilm");
  assert.equal(jobTopicFor({ ...pool, jobTopics: "per-lane" }, Lane.BATCH, "minilm"), "shoal.jobs.gpu.batch");
  assert.deepEqual(laneJobTopics(pool, Lane.INTERACTIVE), [
    { topic: "shoal.jobs.gpu.interactive.m.bge", model: "bge" },
    { topic: "shoal.jobs.gpu.interactive.m.minilm", model: "minilm" },
  ]);
  assert.equal(signedKindOf("shoal.jobs.gpu.interactive.m.bge"), "job", "model topics carry signed jobs");
});
