import assert from "node:assert/strict";
import { test } from "node:test";
import { javaStringHash, offsetsPartitionOf } from "./coordinator.ts";

test("a group's __consumer_offsets partition is Kafka's: Utils.abs(groupId.hashCode()) % partitions", () => {
  // Values of java.lang.String#hashCode.
  assert.equal(javaStringHash(""), 0);
  assert.equal(javaStringHash("hello"), 99_162_322);
  assert.equal(javaStringHash("shoal-pool-default"), 667_411_448);
  // Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0, where Math.abs would stay negative.
  assert.equal(javaStringHash("polygenelubricants"), -2_147_483_648);
  assert.equal(offsetsPartitionOf("polygenelubricants", 50), 0);
  assert.equal(offsetsPartitionOf("hello", 50), 99_162_322 % 50);
  assert.equal(offsetsPartitionOf("shoal-pool-default", 50), 667_411_448 % 50);
});
