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

test("queued accepts are due once the first has lingered; a release or a reject is due at once", () => {
  const q = new AckQueue();
  const p0 = { topicId: "t", topic: "t", partition: 0 };
  const p1 = { topicId: "t", topic: "t", partition: 1 };
  const all = (): boolean => true;
  assert.equal(q.due(all, 0, 0), false, "nothing queued");
  q.add(p0, 1n, AckType.accept, 1_000);
  q.add(p0, 2n, AckType.accept, 1_060);
  assert.equal(q.due(all, 0, 1_000), true, "no linger: due while any is queued");
  assert.equal(q.due(all, 100, 1_099), false);
  assert.equal(q.due(all, 100, 1_100), true, "100 ms after the first accept");
  q.add(p1, 7n, AckType.release, 1_050);
  assert.equal(
    q.due((p) => p.partition === 1, 100, 1_050),
    true,
    "a release does not wait",
  );
  assert.equal(
    q.due((p) => p.partition === 0, 100, 1_050),
    false,
    "nor does it hurry another partition",
  );
  q.take((p) => p.partition === 0);
  q.add(p0, 3n, AckType.accept, 1_200);
  assert.equal(
    q.due((p) => p.partition === 0, 100, 1_250),
    false,
    "a taken partition starts its wait again",
  );
  q.add(p0, 4n, AckType.reject, 1_250);
  assert.equal(
    q.due((p) => p.partition === 0, 100, 1_250),
    true,
    "a reject does not wait",
  );
});
