import assert from "node:assert/strict";
import { test } from "node:test";
import { AckQueue, AckType, toBatches } from "./acks.ts";

test("runs of consecutive offsets become one batch; one type when they agree", () => {
  const acks = new Map<bigint, number>([
    [5n, 1],
    [3n, 1],
    [4n, 1],
    [9n, 2],
    [10n, 3],
  ]);
  assert.deepEqual(toBatches(acks), [
    { firstOffset: 3n, lastOffset: 5n, acknowledgeTypes: [1] },
    { firstOffset: 9n, lastOffset: 10n, acknowledgeTypes: [2, 3] },
  ]);
});

test("the queue keeps the last type per offset and takes per partition", () => {
  const q = new AckQueue();
  const p0 = { topicId: "t", topic: "t", partition: 0 };
  const p1 = { topicId: "t", topic: "t", partition: 1 };
  q.add(p0, 1n, AckType.renew);
  q.add(p0, 1n, AckType.accept);
  q.add(p1, 2n, AckType.reject);
  assert.equal(q.size, 2);
  const taken = q.take((p) => p.partition === 0);
  assert.deepEqual([...taken[0]!.offsets], [[1n, AckType.accept]]);
  assert.equal(q.size, 1);
});
