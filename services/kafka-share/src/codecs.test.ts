/**
 * Round trips of every generated codec, for every version the library speaks: encode a value with
 * every field of that version set to a non-default, decode it, get the same value back. (What the
 * broker says about these bytes is tested in e2e/kafka-share/codecs.test.ts.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Reader, Writer } from "@platformatic/kafka";
import { describeShareGroupOffsetsApi } from "./generated/describe-share-group-offsets.ts";
import { incrementalAlterConfigsApi } from "./generated/incremental-alter-configs.ts";
import type { ApiSpec } from "./generated/runtime.ts";
import { shareAcknowledgeApi } from "./generated/share-acknowledge.ts";
import { shareFetchApi } from "./generated/share-fetch.ts";
import { shareGroupDescribeApi } from "./generated/share-group-describe.ts";
import { shareGroupHeartbeatApi } from "./generated/share-group-heartbeat.ts";

const TOPIC_ID = "0b6f2d1e-3c4a-4f5b-8e9d-112233445566";
const leader = { leaderId: 3, leaderEpoch: 7 };
const node = { nodeId: 3, host: "broker-3", port: 9092, rack: "r1" };

function roundTrip<Req, Res>(api: ApiSpec<Req, Res>, version: number, request: Req, response: Res): void {
  const req = api.decodeRequest(Reader.from(api.encodeRequest(Writer.create(), version, request)), version);
  assert.deepEqual(req, request, `${api.name} v${version} request`);
  const res = api.decodeResponse(Reader.from(api.encodeResponse(Writer.create(), version, response)), version);
  assert.deepEqual(res, response, `${api.name} v${version} response`);
}

test("ShareGroupHeartbeat v1 round trip (nullable strings, arrays and struct)", () => {
  roundTrip(
    shareGroupHeartbeatApi,
    1,
    { groupId: "g", memberId: "m", memberEpoch: 4, rackId: "rack", subscribedTopicNames: ["a", "b"] },
    {
      throttleTimeMs: 1,
      errorCode: 0,
      errorMessage: null,
      memberId: "m",
      memberEpoch: 5,
      heartbeatIntervalMs: 1000,
      assignment: { topicPartitions: [{ topicId: TOPIC_ID, partitions: [0, 2] }] },
    },
  );
  // null for "unchanged": the other side of each nullable field
  roundTrip(
    shareGroupHeartbeatApi,
    1,
    { groupId: "g", memberId: "m", memberEpoch: 5, rackId: null, subscribedTopicNames: null },
    { throttleTimeMs: 0, errorCode: 25, errorMessage: "gone", memberId: null, memberEpoch: 0, heartbeatIntervalMs: 0, assignment: null },
  );
});

test("ShareGroupDescribe v1 round trip", () => {
  roundTrip(
    shareGroupDescribeApi,
    1,
    { groupIds: ["g1", "g2"], includeAuthorizedOperations: true },
    {
      throttleTimeMs: 0,
      groups: [
        {
          errorCode: 0,
          errorMessage: null,
          groupId: "g1",
          groupState: "Stable",
          groupEpoch: 3,
          assignmentEpoch: 3,
          assignorName: "simple",
          members: [
            {
              memberId: "m",
              rackId: null,
              memberEpoch: 3,
              clientId: "c",
              clientHost: "/127.0.0.1",
              subscribedTopicNames: ["t"],
              assignment: { topicPartitions: [{ topicId: TOPIC_ID, topicName: "t", partitions: [0] }] },
            },
          ],
          authorizedOperations: 8,
        },
      ],
    },
  );
});

for (const version of [0, 1]) {
  test(`DescribeShareGroupOffsets v${version} round trip (Lag from v1)`, () => {
    roundTrip(
      describeShareGroupOffsetsApi,
      version,
      {
        groups: [
          { groupId: "g", topics: [{ topicName: "t", partitions: [0, 1] }] },
          { groupId: "all", topics: null },
        ],
      },
      {
        throttleTimeMs: 0,
        groups: [
          {
            groupId: "g",
            errorCode: 0,
            errorMessage: null,
            topics: [
              {
                topicName: "t",
                topicId: TOPIC_ID,
                partitions: [
                  { partitionIndex: 0, startOffset: 12n, leaderEpoch: 1, lag: version >= 1 ? 3n : -1n, errorCode: 0, errorMessage: null },
                  { partitionIndex: 1, startOffset: -1n, leaderEpoch: 0, lag: -1n, errorCode: 3, errorMessage: "unknown" },
                ],
              },
            ],
          },
        ],
      },
    );
  });
}

for (const version of [1, 2]) {
  test(`ShareFetch v${version} round trip`, () => {
    roundTrip(
      shareFetchApi,
      version,
      {
        groupId: "g",
        memberId: "m",
        shareSessionEpoch: 2,
        maxWaitMs: 500,
        minBytes: 1,
        maxBytes: 1 << 20,
        maxRecords: 10,
        batchSize: 10,
        // v1 has no acquire mode / renew flag: they decode as their defaults
        shareAcquireMode: version >= 2 ? 1 : 0,
        isRenewAck: false,
        topics: [
          {
            topicId: TOPIC_ID,
            partitions: [{ partitionIndex: 0, acknowledgementBatches: [{ firstOffset: 5n, lastOffset: 7n, acknowledgeTypes: [1, 2, 3] }] }],
          },
        ],
        forgottenTopicsData: [{ topicId: TOPIC_ID, partitions: [1] }],
      },
      {
        throttleTimeMs: 0,
        errorCode: 0,
        errorMessage: null,
        acquisitionLockTimeoutMs: 2000,
        responses: [
          {
            topicId: TOPIC_ID,
            partitions: [
              {
                partitionIndex: 0,
                errorCode: 0,
                errorMessage: null,
                acknowledgeErrorCode: 121,
                acknowledgeErrorMessage: "expired",
                currentLeader: leader,
                records: Buffer.from([1, 2, 3]),
                acquiredRecords: [{ firstOffset: 8n, lastOffset: 9n, deliveryCount: 2 }],
              },
            ],
          },
        ],
        nodeEndpoints: [node],
      },
    );
  });

  test(`ShareAcknowledge v${version} round trip`, () => {
    roundTrip(
      shareAcknowledgeApi,
      version,
      {
        groupId: "g",
        memberId: "m",
        shareSessionEpoch: 3,
        isRenewAck: version >= 2,
        topics: [
          {
            topicId: TOPIC_ID,
            partitions: [{ partitionIndex: 0, acknowledgementBatches: [{ firstOffset: 1n, lastOffset: 1n, acknowledgeTypes: [version >= 2 ? 4 : 1] }] }],
          },
        ],
      },
      {
        throttleTimeMs: 0,
        errorCode: 0,
        errorMessage: null,
        acquisitionLockTimeoutMs: version >= 2 ? 2000 : 0,
        responses: [{ topicId: TOPIC_ID, partitions: [{ partitionIndex: 0, errorCode: 0, errorMessage: null, currentLeader: leader }] }],
        nodeEndpoints: [node],
      },
    );
  });
}

for (const version of [0, 1]) {
  test(`IncrementalAlterConfigs v${version} round trip (v0 is not flexible)`, () => {
    roundTrip(
      incrementalAlterConfigsApi,
      version,
      {
        resources: [
          {
            resourceType: 32,
            resourceName: "g",
            configs: [
              { name: "share.auto.offset.reset", configOperation: 0, value: "earliest" },
              { name: "x", configOperation: 1, value: null },
            ],
          },
        ],
        validateOnly: true,
      },
      { throttleTimeMs: 0, responses: [{ errorCode: 0, errorMessage: null, resourceType: 32, resourceName: "g" }] },
    );
  });
}

test("a field a version lacks must keep its default", () => {
  assert.throws(
    () =>
      shareFetchApi.encodeRequest(Writer.create(), 1, {
        groupId: "g",
        memberId: "m",
        shareSessionEpoch: 0,
        maxWaitMs: 0,
        minBytes: 0,
        maxRecords: 1,
        batchSize: 1,
        isRenewAck: true,
        topics: [],
        forgottenTopicsData: [],
      }),
    /IsRenewAck needs version 2\+/,
  );
  assert.throws(
    () =>
      shareFetchApi.encodeRequest(Writer.create(), 3, {
        groupId: "g",
        memberId: "m",
        shareSessionEpoch: 0,
        maxWaitMs: 0,
        minBytes: 0,
        maxRecords: 1,
        batchSize: 1,
        topics: [],
        forgottenTopicsData: [],
      }),
    /outside 1..2/,
  );
});
