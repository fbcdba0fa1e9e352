import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createRecordSigner, encodeStatus, SIGNATURE_HEADER, statusSignedBytes } from "@shoal/common";
import { WorkerStatusSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { MAX_STATUS_INTERVAL_MS, StatusTable, type StatusRecord } from "./status-table.ts";

const NOW = 1_800_000_000_000;

function record(workerId: string, updatedUnixMs = NOW, intervalMs = 1_000, key = workerId): { key: Buffer; value: Buffer } {
  return {
    key: Buffer.from(key),
    value: Buffer.from(encodeStatus(create(WorkerStatusSchema, { workerId, updatedUnixMs: BigInt(updatedUnixMs), intervalMs }))),
  };
}

describe("worker status table: bounded, expiring, signed", () => {
  test("a status is listed until three of its intervals (plus 2 s slack) pass, then swept from memory", () => {
    const t = new StatusTable(8);
    assert.equal(t.accept(record("w1"), NOW), "stored");
    assert.deepEqual(
      t.workers(NOW + 4_999).map((w) => w.workerId),
      ["w1"],
    );
    assert.deepEqual(t.workers(NOW + 5_000), []);
    assert.equal(t.size, 1);
    t.sweep(NOW + 5_000);
    assert.equal(t.size, 0);
  });

  test("a record dated in the future or claiming a huge interval still expires after 3 capped intervals from arrival", () => {
    const t = new StatusTable(8);
    assert.equal(t.accept(record("future", NOW + 10 * 365 * 86_400_000, 1_000), NOW), "stored");
    assert.equal(t.accept(record("slow", NOW, 2 ** 31), NOW), "stored");
    assert.deepEqual(
      t.workers(NOW + 4_999).map((w) => w.workerId),
      ["future", "slow"],
    );
    assert.deepEqual(
      t.workers(NOW + 5_000).map((w) => w.workerId),
      ["slow"],
    );
    assert.deepEqual(t.workers(NOW + 3 * MAX_STATUS_INTERVAL_MS + 2_000), []);
  });

  test("an old record (the compacted topic read from its start) is not stored; a newer status replaces an older one", () => {
    const t = new StatusTable(8);
    assert.equal(t.accept(record("w1", NOW - 60_000), NOW), "stale");
    assert.equal(t.size, 0);
    assert.equal(t.accept(record("w1", NOW - 500), NOW), "stored");
    assert.equal(t.accept(record("w1", NOW - 900), NOW), "stale", "older than the live entry");
    assert.equal(t.accept(record("w1", NOW), NOW), "stored");
    assert.equal(t.workers(NOW)[0]!.updatedUnixMs, BigInt(NOW));
  });

  test("past maxWorkers a new worker id is refused until entries expire; known workers keep refreshing", () => {
    const t = new StatusTable(3);
    for (const id of ["a", "b", "c"]) assert.equal(t.accept(record(id), NOW), "stored");
    assert.equal(t.accept(record("d"), NOW), "capacity");
    assert.equal(t.accept(record("a", NOW + 1_000), NOW + 1_000), "stored", "a known worker refreshes");
    assert.equal(t.size, 3);
    // b and c expire at NOW + 5 s; a (refreshed) at NOW + 6 s: d gets b's room.
    assert.equal(t.accept(record("d", NOW + 5_500), NOW + 5_500), "stored");
    assert.equal(t.size, 2);
    for (let i = 0; i < 1_000; i++) t.accept(record(`flood-${i}`, NOW + 5_500), NOW + 5_500);
    assert.equal(t.size, 3);
  });

  test("the key must be the status's worker id; undecodable values are malformed", () => {
    const t = new StatusTable(8);
    assert.equal(t.accept(record("w1", NOW, 1_000, "w2"), NOW), "malformed");
    assert.equal(t.accept({ key: Buffer.from("w1"), value: Buffer.from([0xff, 0xff, 0xff]) }, NOW), "malformed");
    assert.equal(t.size, 0);
  });

  test("with cluster keys only records signed over key and value are taken, tombstones included", () => {
    const signer = createRecordSigner([randomBytes(32)]);
    const stranger = createRecordSigner([randomBytes(32)]);
    const t = new StatusTable(8, signer);
    const signed = (r: StatusRecord, by = signer): StatusRecord => ({
      ...r,
      headers: { [SIGNATURE_HEADER]: by.sign("status", statusSignedBytes(r.key!.toString(), r.value))! },
    });
    assert.equal(t.accept(record("w1"), NOW), "signature", "unsigned");
    assert.equal(t.accept(signed(record("w1"), stranger), NOW), "signature", "another key");
    const moved = { ...record("w1"), headers: signed(record("w1")).headers };
    assert.equal(t.accept({ ...moved, key: Buffer.from("w9") }, NOW), "signature", "signature moved to another key");
    assert.equal(t.accept(signed(record("w1")), NOW), "stored");
    assert.equal(t.accept({ key: Buffer.from("w1"), value: null }, NOW), "signature", "unsigned tombstone");
    assert.equal(t.workers(NOW).length, 1);
    assert.equal(t.accept(signed({ key: Buffer.from("w1"), value: null }), NOW), "removed");
    assert.equal(t.workers(NOW).length, 0);
  });
});
