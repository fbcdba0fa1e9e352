import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createRecordSigner, encodeGatewayRegistration, SIGNATURE_HEADER, statusSignedBytes } from "@shoal/common";
import { GatewayRegistrationSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { RegistrationTable, type RegistrationRecord } from "./reply-registry.ts";

const NOW = 1_800_000_000_000;

function record(instanceId: string, opts: { updated?: number; intervalMs?: number; key?: string; topic?: string; direct?: string } = {}): RegistrationRecord {
  const value = encodeGatewayRegistration(
    create(GatewayRegistrationSchema, {
      instanceId,
      replyTopic: opts.topic ?? `shoal.replies.${instanceId}`,
      updatedUnixMs: BigInt(opts.updated ?? NOW),
      intervalMs: opts.intervalMs ?? 1_000,
      directReplyAddress: opts.direct ?? "",
    }),
  );
  return { key: Buffer.from(opts.key ?? instanceId), value: Buffer.from(value) };
}

describe("reply-topic registry table: which reply topics live gateways registered", () => {
  test("a registration makes its gateway's reply topic registered until three intervals (plus 2 s) pass; a tombstone withdraws it", () => {
    const t = new RegistrationTable(8);
    assert.equal(t.registered("shoal.replies.g1", NOW), false);
    assert.equal(t.accept(record("g1"), NOW), "stored");
    assert.equal(t.registered("shoal.replies.g1", NOW + 4_999), true);
    assert.equal(t.registered("shoal.replies.g2", NOW), false);
    assert.equal(t.registered("shoal.replies.g1", NOW + 5_000), false, "lapsed");
    assert.equal(t.accept(record("g1", { updated: NOW + 4_000 }), NOW + 4_000), "stored", "refreshed");
    assert.equal(t.registered("shoal.replies.g1", NOW + 8_999), true);
    assert.equal(t.accept({ key: Buffer.from("g1"), value: null }, NOW + 5_000), "removed");
    assert.equal(t.registered("shoal.replies.g1", NOW + 5_000), false);
  });

  test("a live registration's direct-reply address is the result's direct target; none once it lapses, is withdrawn, or a refresh gives no address", () => {
    const t = new RegistrationTable(8);
    assert.equal(t.accept(record("g1", { direct: "10.0.0.5:7070" }), NOW), "stored");
    assert.equal(t.accept(record("g2"), NOW), "stored");
    assert.deepEqual(t.direct("shoal.replies.g1", NOW), { address: "10.0.0.5:7070", instanceId: "g1" });
    assert.equal(t.direct("shoal.replies.g2", NOW), undefined, "registered without an address: the reply topic only");
    assert.equal(t.direct("shoal.replies.g3", NOW), undefined, "never registered");
    assert.equal(t.direct("shoal.replies.g1", NOW + 5_000), undefined, "lapsed");
    assert.equal(t.accept(record("g1", { updated: NOW + 1_000, direct: "10.0.0.6:7070" }), NOW + 1_000), "stored");
    assert.deepEqual(t.direct("shoal.replies.g1", NOW + 1_000), { address: "10.0.0.6:7070", instanceId: "g1" }, "the latest address");
    assert.equal(t.accept(record("g1", { updated: NOW + 2_000 }), NOW + 2_000), "stored");
    assert.equal(t.direct("shoal.replies.g1", NOW + 2_000), undefined, "a refresh without an address turns the direct path off");
    assert.equal(t.accept(record("g2", { direct: "10.0.0.7:7070" }), NOW), "stored");
    assert.equal(t.accept({ key: Buffer.from("g2"), value: null }, NOW + 100), "removed");
    assert.equal(t.direct("shoal.replies.g2", NOW + 100), undefined, "withdrawn");
    assert.equal(t.accept(record("g4", { direct: "x".repeat(301) }), NOW), "malformed");
  });

  test("a lapse counts once proven: this reader has read a record written after it (one partition, read in order); until then it is unproven, not refused", () => {
    const t = new RegistrationTable(8);
    assert.equal(t.accept(record("g1"), NOW), "stored");
    // Nothing read since: the reader may be the one cut off from the brokers.
    assert.equal(t.state("shoal.replies.g1", NOW + 6_000), "unproven");
    assert.equal(t.registered("shoal.replies.g1", NOW + 6_000), false);
    t.sweep(NOW + 6_000);
    assert.equal(t.state("shoal.replies.g1", NOW + 6_000), "unproven", "an unproven lapse is not swept");
    // Another gateway's refresh, written after g1 lapsed, is read: had g1 refreshed, that would have been read too.
    assert.equal(t.accept(record("g2", { updated: NOW + 5_500 }), NOW + 6_000), "stored");
    assert.equal(t.state("shoal.replies.g1", NOW + 6_000), "lapsed");
    assert.equal(t.state("shoal.replies.g2", NOW + 6_000), "live");
    t.sweep(NOW + 6_000);
    assert.equal(t.state("shoal.replies.g1", NOW + 6_000), "unknown", "a proven lapse is swept");
    // A tombstone proves by its record timestamp; an end-offset check by observe().
    assert.equal(t.state("shoal.replies.g2", NOW + 11_000), "unproven");
    assert.equal(t.accept({ key: Buffer.from("g3"), value: null, timestamp: String(NOW + 11_000) }, NOW + 11_000), "removed");
    assert.equal(t.state("shoal.replies.g2", NOW + 11_000), "lapsed");
    assert.equal(t.accept(record("g4", { updated: NOW + 9_000 }), NOW + 9_000), "stored");
    assert.equal(t.state("shoal.replies.g4", NOW + 15_000), "unproven");
    t.observe(NOW + 15_000, NOW + 15_000);
    assert.equal(t.state("shoal.replies.g4", NOW + 15_000), "lapsed");
    // A record's time never counts past the moment it was read.
    assert.equal(t.accept(record("g5", { updated: NOW + 20_000 }), NOW + 20_000), "stored");
    t.observe(NOW + 86_400_000, NOW + 21_000);
    assert.equal(t.state("shoal.replies.g5", NOW + 26_000), "unproven");
    // Unproven for ten minutes: forgotten.
    assert.equal(t.state("shoal.replies.g5", NOW + 25_000 + 600_000), "unknown");
  });

  test("a registration must name its own gateway's reply topic; a future date or a huge interval still lapses", () => {
    const t = new RegistrationTable(8);
    assert.equal(t.accept(record("g1", { topic: "shoal.replies.victim" }), NOW), "malformed");
    assert.equal(t.accept(record("g1", { key: "g2" }), NOW), "malformed");
    assert.equal(t.accept(record("g1", { topic: "shoal.jobs.x" }), NOW), "malformed");
    assert.equal(t.accept(record("future", { updated: NOW + 86_400_000 }), NOW), "stored");
    assert.equal(t.accept(record("slow", { intervalMs: 2 ** 31 }), NOW), "stored");
    assert.equal(t.registered("shoal.replies.future", NOW + 5_000), false);
    assert.equal(t.registered("shoal.replies.slow", NOW + 182_000), false);
    assert.equal(t.accept(record("old", { updated: NOW - 60_000 }), NOW), "stale");
  });

  test("bounded: past maxGateways a new instance is refused until one lapses", () => {
    const t = new RegistrationTable(2);
    assert.equal(t.accept(record("a"), NOW), "stored");
    assert.equal(t.accept(record("b"), NOW), "stored");
    assert.equal(t.accept(record("c"), NOW), "capacity");
    assert.equal(t.accept(record("a", { updated: NOW + 1_000 }), NOW + 1_000), "stored");
    assert.equal(t.accept(record("c", { updated: NOW + 5_500 }), NOW + 5_500), "stored", "b lapsed");
    assert.equal(t.size, 2);
  });

  test("with cluster keys only registrations signed over instance id and value count, tombstones included", () => {
    const signer = createRecordSigner([randomBytes(32)]);
    const t = new RegistrationTable(8, signer);
    const sign = (r: RegistrationRecord, by = signer): RegistrationRecord => ({
      ...r,
      headers: { [SIGNATURE_HEADER]: by.sign("gateway", statusSignedBytes(r.key!.toString(), r.value))! },
    });
    assert.equal(t.accept(record("g1"), NOW), "signature");
    assert.equal(t.accept(sign(record("g1"), createRecordSigner([randomBytes(32)])), NOW), "signature");
    const asStatus = { ...record("g1"), headers: { [SIGNATURE_HEADER]: signer.sign("status", statusSignedBytes("g1", record("g1").value))! } };
    assert.equal(t.accept(asStatus, NOW), "signature", "a worker status signature is no registration signature");
    assert.equal(t.accept(sign(record("g1")), NOW), "stored");
    assert.equal(t.accept({ key: Buffer.from("g1"), value: null }, NOW), "signature");
    assert.equal(t.registered("shoal.replies.g1", NOW), true);
    assert.equal(t.accept(sign({ key: Buffer.from("g1"), value: null }), NOW), "removed");
    assert.equal(t.registered("shoal.replies.g1", NOW), false);
  });
});
