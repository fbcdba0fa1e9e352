import assert from "node:assert/strict";
import { test } from "node:test";
import kafkajs from "kafkajs";

const { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError, KafkaJSRequestTimeoutError } = kafkajs;
import { isRequestTimeout, isSequenceDesync } from "./batching-producer.ts";

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
