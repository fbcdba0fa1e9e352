import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { EnvReader } from "./env-config.ts";
import { ClusterKeyError, createRecordSigner, parseClusterKeys, readClusterKeys, statusSignedBytes } from "./record-signer.ts";

describe("record signer (cluster keys)", () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(48);
  const value = Buffer.from("a job envelope");

  test("a signature verifies for its kind and value only", () => {
    const s = createRecordSigner([k1]);
    const sig = s.sign("job", value)!;
    assert.match(sig, /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]{43}$/);
    assert.equal(s.verify("job", value, sig), true);
    assert.equal(s.verify("job", value, Buffer.from(sig)), true, "headers arrive as Buffers");
    assert.equal(s.verify("result", value, sig), false, "a job signature is no result signature");
    assert.equal(s.verify("job", Buffer.from("a job envelopf"), sig), false, "tampered value");
    assert.equal(s.verify("job", value, undefined), false, "unsigned");
    assert.equal(s.verify("job", null, sig), false);
    assert.equal(s.verify("job", value, `${sig.slice(0, -2)}AA`), false);
    assert.equal(s.verify("job", value, "v1.deadbeef.AAAA"), false, "unknown key id");
    assert.equal(s.verify("job", value, "v2.x.y"), false);
  });

  test("a status signature covers the worker id: it cannot be moved to another key, and a tombstone is signed", () => {
    const s = createRecordSigner([k1]);
    const status = Buffer.from("a worker status");
    const sig = s.sign("status", statusSignedBytes("w-1", status))!;
    assert.equal(s.verify("status", statusSignedBytes("w-1", status), sig), true);
    assert.equal(s.verify("status", statusSignedBytes("w-2", status), sig), false, "another worker's key");
    assert.equal(s.verify("status", statusSignedBytes("w-1", null), sig), false, "not a tombstone's signature");
    assert.equal(s.verify("status", statusSignedBytes("w-1", null), s.sign("status", statusSignedBytes("w-1", null))), true);
    // The length prefix keeps key and value apart: "w-1" + "x" is not "w-1x" + "".
    assert.notDeepEqual(statusSignedBytes("w-1", Buffer.from("x")), statusSignedBytes("w-1x", null));
    assert.equal(s.verify("job", statusSignedBytes("w-1", status), sig), false, "a status signature is no job signature");
  });

  test("a record signed with another cluster's key is refused", () => {
    const ours = createRecordSigner([k1]);
    const theirs = createRecordSigner([k2]);
    assert.equal(ours.verify("job", value, theirs.sign("job", value)), false);
  });

  test("rotation: the first key signs, every key verifies", () => {
    const old = createRecordSigner([k1]);
    const rotating = createRecordSigner([k2, k1]);
    assert.equal(rotating.verify("result", value, old.sign("result", value)), true);
    assert.equal(old.verify("result", value, rotating.sign("result", value)), false, "the new key signs first");
    assert.equal(createRecordSigner([k1, k2]).verify("cancel", value, rotating.sign("cancel", value)), true);
  });

  test("without keys nothing is signed and everything verifies", () => {
    const off = createRecordSigner([]);
    assert.equal(off.enabled, false);
    assert.equal(off.sign("job", value), undefined);
    assert.equal(off.verify("job", value, undefined), true);
  });

  test("keys parse from hex or base64, comma-separated; short keys are refused without echoing them", () => {
    assert.deepEqual(parseClusterKeys(`${k1.toString("hex")}, ${k2.toString("base64")}`), [k1, k2]);
    assert.deepEqual(parseClusterKeys(undefined), []);
    assert.throws(
      () => parseClusterKeys(`${k1.toString("hex")},c2hvcnQ=`),
      (e: unknown) => e instanceof ClusterKeyError && /key 2: at least 32 bytes/.test(e.message) && !e.message.includes("c2hvcnQ"),
    );
    const r = new EnvReader({ SHOAL_CLUSTER_KEYS: "tooshort" });
    assert.deepEqual(readClusterKeys(r), []);
    assert.throws(() => r.done({}), /SHOAL_CLUSTER_KEYS: cluster key 1: at least 32 bytes/);
  });
});
