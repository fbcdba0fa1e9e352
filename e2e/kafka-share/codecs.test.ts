/**
 * Every generated codec, at every version the library uses, against the real broker: the broker
 * accepts the request and answers error code 0. Also the reason ShareFetch v2 matters: v1
 * acquires a whole producer batch whatever MaxRecords says; v2's record-limit mode does not.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { Connection, metadataV12 } from "@platformatic/kafka";
import { call } from "../../services/kafka-share/src/protocol/call.ts";
import { incrementalAlterConfigsApi } from "../../services/kafka-share/src/generated/incremental-alter-configs.ts";
import { shareAcknowledgeApi } from "../../services/kafka-share/src/generated/share-acknowledge.ts";
import { shareFetchApi, type ShareFetchResponse } from "../../services/kafka-share/src/generated/share-fetch.ts";
import { shareGroupDescribeApi } from "../../services/kafka-share/src/generated/share-group-describe.ts";
import { shareGroupHeartbeatApi } from "../../services/kafka-share/src/generated/share-group-heartbeat.ts";
import { brokers, createTopic, disconnectProducer, produce, unique } from "./helpers.ts";

// One broker in the test run: it is the coordinator and the leader of everything.
let conn: Connection;
before(async () => {
  const [host, port] = brokers[0]!.split(":");
  conn = new Connection("kafka-share-codec-tests");
  await conn.connect(host!, Number(port));
});
after(async () => {
  await conn.close();
  await disconnectProducer();
});

const setEarliest = (group: string) =>
  call(conn, incrementalAlterConfigsApi, 1, {
    resources: [{ resourceType: 32, resourceName: group, configs: [{ name: "share.auto.offset.reset", configOperation: 0, value: "earliest" }] }],
    validateOnly: false,
  });

/** Joins `group` subscribed to `topic` and heartbeats until the partition is assigned. */
async function join(group: string, topic: string): Promise<{ memberId: string; epoch: number }> {
  const memberId = randomBytes(16).toString("base64url");
  let epoch = 0;
  for (let i = 0; i < 50; i++) {
    const res = await call(conn, shareGroupHeartbeatApi, 1, { groupId: group, memberId, memberEpoch: epoch, subscribedTopicNames: [topic] });
    assert.equal(res.errorCode, 0, res.errorMessage ?? "");
    epoch = res.memberEpoch;
    if (res.assignment && res.assignment.topicPartitions.length > 0) return { memberId, epoch };
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("no assignment");
}

async function topicId(topic: string): Promise<string> {
  const md = await metadataV12.api.async(conn, [topic], false, false);
  return md.topics[0]!.topicId;
}

const acquired = (res: ShareFetchResponse): number =>
  res.responses
    .flatMap((t) => t.partitions)
    .flatMap((p) => p.acquiredRecords)
    .reduce((n, r) => n + Number(r.lastOffset - r.firstOffset + 1n), 0);

test("IncrementalAlterConfigs v1 (GROUP resource), ShareGroupHeartbeat v1 and ShareGroupDescribe v1 answer 0", async () => {
  const group = unique("codec-g");
  const topic = unique("codec-t");
  await createTopic(topic);
  const alter = await setEarliest(group);
  assert.deepEqual(
    alter.responses.map((r) => r.errorCode),
    [0],
  );
  const { memberId } = await join(group, topic);
  const described = await call(conn, shareGroupDescribeApi, 1, { groupIds: [group], includeAuthorizedOperations: true });
  assert.equal(described.groups[0]?.errorCode, 0);
  assert.deepEqual(
    described.groups[0]?.members.map((m) => m.memberId),
    [memberId],
  );
  assert.equal(described.groups[0]?.members[0]?.assignment.topicPartitions[0]?.topicName, topic);
  const leave = await call(conn, shareGroupHeartbeatApi, 1, { groupId: group, memberId, memberEpoch: -1 });
  assert.equal(leave.errorCode, 0);
  assert.equal(leave.memberEpoch, -1);
});

for (const version of [1, 2]) {
  test(`ShareFetch v${version} and ShareAcknowledge v${version} answer 0; MaxRecords 5 of a 100-record batch acquires ${version === 1 ? "all 100 (v1)" : "5 (v2 record-limit)"}`, async () => {
    const group = unique("codec-g");
    const topic = unique("codec-t");
    await createTopic(topic);
    await setEarliest(group);
    await produce(topic, 100);
    const { memberId } = await join(group, topic);
    const id = await topicId(topic);
    const base = { groupId: group, memberId, maxWaitMs: 2_000, minBytes: 1, maxRecords: 5, batchSize: 5, forgottenTopicsData: [] };
    let res: ShareFetchResponse | undefined;
    let epoch = 0;
    for (let i = 0; i < 10 && (!res || acquired(res) === 0); i++) {
      res = await call(conn, shareFetchApi, version, {
        ...base,
        shareSessionEpoch: epoch,
        shareAcquireMode: version >= 2 ? 1 : 0,
        topics: [{ topicId: id, partitions: [{ partitionIndex: 0, acknowledgementBatches: [] }] }],
      });
      assert.equal(res.errorCode, 0, res.errorMessage ?? "");
      assert.equal(res.responses[0]?.partitions[0]?.errorCode, 0);
      epoch++;
    }
    assert.equal(acquired(res!), version === 1 ? 100 : 5);
    const [range] = res!.responses[0]!.partitions[0]!.acquiredRecords;
    const acks = [{ firstOffset: range!.firstOffset, lastOffset: range!.lastOffset, acknowledgeTypes: [version >= 2 ? 4 : 1] }];
    const ack = await call(conn, shareAcknowledgeApi, version, {
      groupId: group,
      memberId,
      shareSessionEpoch: epoch,
      isRenewAck: version >= 2, // v2: renew (type 4); v1: accept
      topics: [{ topicId: id, partitions: [{ partitionIndex: 0, acknowledgementBatches: acks }] }],
    });
    assert.equal(ack.errorCode, 0, ack.errorMessage ?? "");
    assert.equal(ack.responses[0]?.partitions[0]?.errorCode, 0);
    if (version >= 2) assert.ok((ack.acquisitionLockTimeoutMs ?? 0) > 0, "v2 answers the lock duration");
    // epoch -1 closes the session (and releases what it still holds)
    const close = await call(conn, shareAcknowledgeApi, version, { groupId: group, memberId, shareSessionEpoch: -1, topics: [] });
    assert.equal(close.errorCode, 0, close.errorMessage ?? "");
  });
}
