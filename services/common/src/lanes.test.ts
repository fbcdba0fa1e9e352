import assert from "node:assert/strict";
import { test } from "node:test";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { isLaneName, jobsTopic, laneFromName, laneName, LANE_NAMES, SERVED_LANES, servedLane } from "./lanes.ts";
import { poolTopicSpecs } from "./topics.ts";

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
  const jobs = poolTopicSpecs({ name: "cpu", partitions: 4 }).filter((s) => s.topic.startsWith("shoal.jobs."));
  assert.deepEqual(
    jobs.map((s) => [s.topic, s.partitions]),
    [
      ["shoal.jobs.cpu.interactive", 4],
      ["shoal.jobs.cpu.batch", 4],
    ],
  );
});
