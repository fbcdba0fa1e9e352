import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ManualClock } from "../batching/manual-clock.ts";
import { FakeLoader, flush, type FakeResource } from "./fake-loader.ts";
import { Residency, type ResidencyEvent } from "./residency.ts";

/** Budget 20, models of 10 bytes: room for two, so a reload never needs an eviction for room. */
function setup() {
  const fake = new FakeLoader(() => 10, 20, false);
  const events: ResidencyEvent[] = [];
  const res = new Residency<FakeResource>({
    budgetBytes: 20,
    policy: "lru",
    sizeOf: () => 10,
    load: fake.load,
    unload: fake.unload,
    clock: new ManualClock(),
    onEvent: (e) => events.push(e),
  });
  async function loaded(model: string): Promise<FakeResource> {
    const pending = res.acquire(model);
    await flush();
    fake.op("load", model).settle();
    const lease = await pending;
    lease.release();
    return lease.resource;
  }
  return { fake, res, events, loaded };
}

describe("Residency.retire: a model replaced under its id", () => {
  test("idle: unloaded at once; the next acquire loads it again (a new resource)", async () => {
    const { fake, res, events, loaded } = setup();
    const old = await loaded("a");
    res.retire("a");
    assert.equal(res.tryAcquire("a"), undefined, "no lease on the retired resource");
    assert.deepEqual(
      events.filter((e) => e.type === "evicted").map((e) => e.type === "evicted" && e.reason),
      ["replaced"],
    );
    const next = res.acquire("a");
    await flush();
    assert.throws(() => fake.op("load", "a"), /no pending load/, "the new load waits for the old unload");
    fake.op("unload", "a").settle();
    await flush();
    fake.op("load", "a").settle();
    const lease = await next;
    assert.notEqual(lease.resource.id, old.id);
    assert.equal(old.unloaded, true);
    assert.equal(res.snapshot()[0]?.evictionCount, 0, "not an eviction for room");
    assert.deepEqual(fake.violations, []);
  });

  test("leased: the lease stays valid, no new lease is granted, and it unloads when the last is released", async () => {
    const { fake, res, loaded } = setup();
    await loaded("a");
    const held = res.tryAcquire("a");
    assert.ok(held);
    held.resource.leases += 1;
    res.retire("a");
    assert.equal(res.tryAcquire("a"), undefined);
    const next = res.acquire("a");
    await flush();
    assert.equal(fake.pending.length, 0, "neither unloaded (leased) nor loaded again (not unloaded yet)");
    assert.equal(held.resource.unloaded, false);
    assert.equal(res.usedBytes, 10, "the old resource's bytes stay reserved until its unload settles");

    held.resource.leases -= 1;
    held.release();
    await flush();
    fake.op("unload", "a").settle();
    await flush();
    fake.op("load", "a").settle();
    const lease = await next;
    assert.notEqual(lease.resource.id, held.resource.id);
    assert.equal(res.usedBytes, 10, "one copy held at a time");
    assert.deepEqual(fake.violations, []);
  });

  test("leased and nobody asks again: unloaded on release, evicted", async () => {
    const { fake, res, loaded } = setup();
    await loaded("a");
    const held = res.tryAcquire("a");
    assert.ok(held);
    res.retire("a");
    res.retire("a");
    held.release();
    await flush();
    fake.op("unload", "a").settle();
    await flush();
    assert.equal(res.snapshot()[0]?.state, "evicted");
    assert.equal(res.usedBytes, 0);
  });

  test("a model not resident is left alone; close still unloads a retired leased one on release", async () => {
    const { fake, res, loaded } = setup();
    res.retire("never-seen");
    await loaded("a");
    const held = res.tryAcquire("a");
    assert.ok(held);
    res.retire("a");
    const closed = res.close();
    held.release();
    await flush();
    fake.op("unload", "a").settle();
    await closed;
    assert.equal(res.usedBytes, 0);
  });
});
