import assert from "node:assert/strict";
import { test } from "node:test";
import kafkajs from "kafkajs";

const { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError, KafkaJSRequestTimeoutError } = kafkajs;
import { isRequestTimeout, isSequenceDesync, MAX_REQUEST_RECORD_BYTES, pinningPartitioner, takeRequest } from "./batching-producer.ts";

// The error kafkajs builds from the broker's code 45, as a produce request reports it.
const desync = (): Error =>
  Object.assign(new KafkaJSProtocolError("The broker received an out of order sequence number"), { type: "OUT_OF_ORDER_SEQUENCE_NUMBER", code: 45 });

test("a sequence desync is recognised, bare or wrapped by kafkajs's retrier", () => {
  assert.equal(isSequenceDesync(desync()), true);
  assert.equal(isSequenceDesync(new KafkaJSNumberOfRetriesExceeded(desync(), { retryCount: 2, retryTime: 300 })), true);
  assert.equal(isSequenceDesync(new Error("produce failed", { cause: desync() })), true);
});

test("other produce failures are not taken for one", () => {
  assert.equal(isSequenceDesync(new KafkaJSProtocolError("This server is not the leader for that topic-partition")), false);
  assert.equal(
    isSequenceDesync(new KafkaJSNumberOfRetriesExceeded(new Error("Connection error: connect ECONNREFUSED"), { retryCount: 2, retryTime: 300 })),
    false,
  );
  assert.equal(isSequenceDesync(undefined), false);
  assert.equal(isSequenceDesync("a string"), false);
});

test("a request timeout is recognised, bare or wrapped by kafkajs's retrier; other failures are not", () => {
  const timeout = (): Error =>
    new KafkaJSRequestTimeoutError("Request Produce(key: 0, version: 7) timed out", {
      broker: "10.0.0.1:9092",
      clientId: "test",
      correlationId: 7,
      createdAt: 0,
      sentAt: 0,
      pendingDuration: 0,
    });
  assert.equal(isRequestTimeout(timeout()), true);
  assert.equal(isRequestTimeout(new KafkaJSNumberOfRetriesExceeded(timeout(), { retryCount: 2, retryTime: 300 })), true);
  assert.equal(isRequestTimeout(new Error("produce failed", { cause: timeout() })), true);
  assert.equal(isRequestTimeout(new KafkaJSProtocolError("This server is not the leader for that topic-partition")), false);
  assert.equal(
    isRequestTimeout(new KafkaJSNumberOfRetriesExceeded(new Error("Connection error: connect ECONNREFUSED"), { retryCount: 2, retryTime: 300 })),
    false,
  );
  assert.equal(isRequestTimeout(undefined), false);
});

test("the pinning partitioner writes its choice into the record, which keeps it on a retry; a named or keyed record keeps kafkajs's choice", () => {
  const partitionMetadata = [0, 1, 2, 3].map((partitionId) => ({
    partitionId,
    leader: 1,
    replicas: [1],
    isr: [1],
    offlineReplicas: [],
    partitionErrorCode: 0,
  }));
  const choose = pinningPartitioner();
  const loose: kafkajs.Message = { value: "v" };
  const first = choose({ topic: "t", partitionMetadata, message: loose });
  assert.equal(loose.partition, first);
  // Round robin would move an unpinned record on: the pinned one stays, retry after retry.
  for (let i = 0; i < 5; i++) assert.equal(choose({ topic: "t", partitionMetadata, message: loose }), first);
  const others = new Set([0, 1, 2, 3].map(() => choose({ topic: "t", partitionMetadata, message: { value: "v" } })));
  assert.equal(others.size, 4, "records without key or partition still spread over the partitions");
  const named: kafkajs.Message = { value: "v", partition: 2 };
  assert.equal(choose({ topic: "t", partitionMetadata, message: named }), 2);
  const reference = kafkajs.Partitioners.DefaultPartitioner();
  const keyed: kafkajs.Message = { key: "job-42", value: "v" };
  const expected = reference({ topic: "t", partitionMetadata, message: { key: "job-42", value: "v" } });
  assert.equal(choose({ topic: "t", partitionMetadata, message: keyed }), expected);
  assert.equal(keyed.partition, expected);
});

test("takeRequest: small records go past a large one; a record over the byte cap goes alone; two large ones never share a request", () => {
  const rec = (name: string, bytes: number) => ({ name, message: { key: name, value: Buffer.alloc(bytes) } });
  const queue = [rec("huge1", 8 << 20), rec("huge2", 8 << 20), rec("a", 100), rec("b", 100)];
  assert.deepEqual(
    takeRequest(queue).map((q) => q.name),
    ["a", "b"],
  );
  assert.deepEqual(
    takeRequest(queue).map((q) => q.name),
    ["huge1"],
  );
  // huge2 was passed over twice already: it goes before the newer small record.
  queue.push(rec("c", 100));
  assert.deepEqual(
    takeRequest(queue).map((q) => q.name),
    ["huge2"],
  );
  assert.deepEqual(
    takeRequest(queue).map((q) => q.name),
    ["c"],
  );
  assert.equal(queue.length, 0);
  const many = Array.from({ length: 12 }, (_, i) => rec(`m${i}`, MAX_REQUEST_RECORD_BYTES / 10));
  assert.equal(takeRequest(many).length, 9, "up to the byte cap (keys count too)");
});

test("takeRequest: a steady stream of small records cannot hold a large one back beyond one request", () => {
  const rec = (name: string, bytes: number) => ({ name, message: { key: name, value: Buffer.alloc(bytes) } });
  const queue = [rec("huge", 8 << 20), rec("s0", 100)];
  const sent: string[][] = [];
  for (let i = 1; i <= 4; i++) {
    sent.push(takeRequest(queue).map((q) => q.name));
    queue.push(rec(`s${i}`, 100)); // a small record arrives while each request is in flight
  }
  assert.deepEqual(sent, [["s0"], ["huge"], ["s1", "s2"], ["s3"]]);
});
