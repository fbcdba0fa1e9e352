/**
 * Property-style test: seeded random interleavings of acquire / tryAcquire / release / abort /
 * loads and unloads settling (or failing) in random order / time passing, with a loader whose
 * promises the test settles. After every step: the budget holds (in the manager's books and in the
 * fake's "memory"), nothing leased is unloaded, at most one load or unload per model runs, the
 * books match the snapshot. At the end, once every lease is released and every load and unload
 * has settled, every acquire has settled and usedBytes is the sum of the resident sizes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { mulberry32 } from "../../../../infra/models/src/prng.ts";
import { ManualClock } from "../batching/manual-clock.ts";
import { ModelTooLargeError } from "./errors.ts";
import { FakeLoader, flush, type FakeResource } from "./fake-loader.ts";
import { Residency, type Lease, type ResidencyPolicy } from "./residency.ts";

const SEEDS = Number(process.env["RESIDENCY_PROPERTY_SEEDS"] ?? 300);
const STEPS = 160;
const BUDGET = 10;

interface Tracked {
  settled: boolean;
  outcome: "lease" | "rejected" | undefined;
}

/** How often the interesting paths ran, over all seeds (so the generator is known not to be trivial). */
const seen = { evicted: 0, loadFailed: 0, unloadFailed: 0, thrash: 0, waitedForRoom: 0, tooLarge: 0, aborted: 0, coalesced: 0 };

async function runSeed(seed: number): Promise<void> {
  const rand = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const policy: ResidencyPolicy = seed % 2 === 0 ? "lru" : "pinned-by-traffic";
  const models = ["m0", "m1", "m2", "m3", "m4", "m5", "m6"];
  const sizes = new Map<string, number>(models.map((m) => [m, 1 + Math.floor(rand() * 5)]));
  if (rand() < 0.3) sizes.set("huge", BUDGET + 1 + Math.floor(rand() * 3));
  const pinned = new Set(rand() < 0.4 ? ["m0"] : []);
  const all = [...sizes.keys()];
  const sizeOf = (m: string): number => sizes.get(m)!;

  const clock = new ManualClock();
  const fake = new FakeLoader(sizeOf, BUDGET, false);
  const res = new Residency<FakeResource>({
    budgetBytes: BUDGET,
    policy,
    sizeOf,
    isPinned: (m) => pinned.has(m),
    load: fake.load,
    unload: fake.unload,
    clock,
    traffic: { halfLifeMs: 200, hotThreshold: 3 },
    thrashWindowMs: 100,
    failedRetryMs: 50,
    busyVictimWaitMs: 60,
    onEvent: (e) => {
      // Checked at every transition, not only between steps; and the observer re-enters now and then.
      if (res.usedBytes > BUDGET) fake.violations.push(`usedBytes ${res.usedBytes} > budget at ${e.type} ${e.model}`);
      if (!closing && rand() < 0.05) acquire(pick(all));
      if (e.type === "evicted" && e.reason === "room") seen.evicted += 1;
      if (e.type === "load-failed") seen.loadFailed += 1;
      if (e.type === "unload-failed") seen.unloadFailed += 1;
      if (e.type === "thrash") seen.thrash += 1;
      if (e.type === "loading" && e.queuedMs > 0) seen.waitedForRoom += 1;
      if (e.type === "loaded" && e.waiters > 1) seen.coalesced += 1;
    },
  });

  let closing = false;
  const held: Lease<FakeResource>[] = [];
  const acquires: Tracked[] = [];
  const controllers: AbortController[] = [];
  const ctx = (): string => `seed ${seed} (${policy}, sizes ${JSON.stringify([...sizes])}, pinned ${[...pinned]})`;

  const hold = (lease: Lease<FakeResource>): void => {
    if (lease.resource.unloaded) fake.violations.push(`lease granted on unloaded ${lease.model}`);
    lease.resource.leases += 1;
    held.push(lease);
  };
  const releaseAt = (i: number): void => {
    const [lease] = held.splice(i, 1);
    if (!lease) return;
    lease.resource.leases -= 1;
    lease.release();
    if (rand() < 0.2) lease.release(); // idempotent
  };
  const acquire = (m: string): void => {
    const t: Tracked = { settled: false, outcome: undefined };
    acquires.push(t);
    let signal: AbortSignal | undefined;
    if (rand() < 0.1) {
      const ac = new AbortController();
      controllers.push(ac);
      signal = ac.signal;
    }
    res.acquire(m, signal ? { signal } : {}).then(
      (lease) => {
        t.settled = true;
        t.outcome = "lease";
        hold(lease);
      },
      (err: unknown) => {
        t.settled = true;
        t.outcome = "rejected";
        if (err instanceof ModelTooLargeError) seen.tooLarge += 1;
        if (err instanceof Error && err.message === "aborted") seen.aborted += 1;
      },
    );
  };

  const check = (step: string): void => {
    assert.deepEqual(fake.violations, [], `${ctx()} after ${step}`);
    const snap = res.snapshot();
    const reserved = snap.filter((i) => i.state === "loading" || i.state === "resident" || i.state === "unloading");
    const sum = reserved.reduce((n, i) => n + i.bytes, 0);
    assert.equal(res.usedBytes, sum, `${ctx()} after ${step}: usedBytes vs snapshot`);
    assert.ok(res.usedBytes <= BUDGET, `${ctx()} after ${step}: usedBytes ${res.usedBytes} > ${BUDGET}`);
    assert.equal(fake.liveBytes, res.usedBytes, `${ctx()} after ${step}: the fake's live bytes vs usedBytes`);
    for (const lease of held) {
      assert.equal(lease.resource.unloaded, false, `${ctx()} after ${step}: ${lease.model} unloaded while leased`);
    }
    for (const i of snap) {
      const mine = held.filter((l) => l.model === i.model).length;
      assert.equal(i.inFlight, mine, `${ctx()} after ${step}: inFlight of ${i.model}`);
      if (i.inFlight > 0) assert.equal(i.state, "resident", `${ctx()} after ${step}: leased ${i.model} not resident`);
      if (pinned.has(i.model)) assert.equal(i.evictionCount, 0, `${ctx()}: pinned ${i.model} evicted`);
    }
    if (held.length === 0 && fake.pending.length === 0) {
      // Nothing leased, loading or unloading: no load may be left waiting for room.
      assert.deepEqual(res.queuedModels, [], `${ctx()} after ${step}: stuck queue`);
      assert.ok(
        snap.every((i) => i.waiting === 0),
        `${ctx()} after ${step}: stuck waiters`,
      );
    }
    const loadsByModel = new Map<string, number>();
    for (const op of fake.pending) loadsByModel.set(op.model, (loadsByModel.get(op.model) ?? 0) + 1);
    for (const [m, n] of loadsByModel) assert.ok(n <= 1, `${ctx()} after ${step}: ${n} loads/unloads of ${m} at once`);
  };

  for (let s = 0; s < STEPS; s++) {
    const r = rand();
    let step: string;
    if (r < 0.3) {
      const m = pick(all);
      step = `acquire ${m}`;
      acquire(m);
    } else if (r < 0.36) {
      const m = pick(all);
      step = `tryAcquire ${m}`;
      const lease = res.tryAcquire(m);
      if (lease) hold(lease);
    } else if (r < 0.56) {
      step = "release";
      if (held.length > 0) releaseAt(Math.floor(rand() * held.length));
    } else if (r < 0.8) {
      step = "settle";
      if (fake.pending.length > 0) {
        const op = pick(fake.pending);
        step = `settle ${op.kind} ${op.model}`;
        const failP = op.kind === "load" ? 0.2 : 0.1;
        if (rand() < failP) op.fail(new Error(`${op.kind} of ${op.model} failed`));
        else op.settle();
      }
    } else if (r < 0.84) {
      step = "abort";
      controllers.splice(Math.floor(rand() * controllers.length), 1)[0]?.abort(new Error("aborted"));
    } else if (r < 0.94) {
      const ms = Math.floor(rand() * 40);
      step = `advance ${ms}`;
      clock.advance(ms);
    } else {
      step = "flush";
    }
    await flush();
    check(`step ${s}: ${step}`);
  }

  // Drain: release every lease (and any granted from here on), let every load and unload succeed.
  for (let round = 0; round < 200; round++) {
    while (held.length > 0) releaseAt(held.length - 1);
    for (const op of [...fake.pending]) op.settle();
    await flush();
    check(`drain round ${round}`);
    if (held.length === 0 && fake.pending.length === 0) break;
  }
  assert.equal(fake.pending.length, 0, `${ctx()}: loads/unloads left after drain`);
  const unsettled = acquires.filter((a) => !a.settled).length;
  assert.equal(unsettled, 0, `${ctx()}: ${unsettled} acquires never settled; queue ${res.queuedModels.join(",")}`);
  assert.deepEqual(res.queuedModels, []);
  const snap = res.snapshot();
  const residentSum = snap.filter((i) => i.state === "resident").reduce((n, i) => n + i.bytes, 0);
  assert.equal(res.usedBytes, residentSum, `${ctx()}: usedBytes after drain`);
  assert.ok(
    snap.every((i) => i.state === "resident" || i.state === "evicted" || i.state === "failed"),
    `${ctx()}: ${JSON.stringify(snap)}`,
  );

  closing = true;
  const closed = res.close();
  for (let round = 0; round < 10 && fake.pending.length > 0; round++) {
    for (const op of [...fake.pending]) op.settle();
    await flush();
  }
  await closed;
  assert.equal(res.usedBytes, 0);
  assert.equal(fake.liveBytes, 0);
  assert.deepEqual(fake.violations, []);
}

test(`residency invariants hold over ${SEEDS} seeded random interleavings`, async () => {
  for (let seed = 1; seed <= SEEDS; seed++) await runSeed(seed);
  for (const [path, n] of Object.entries(seen)) assert.ok(n > 0, `the random steps never exercised ${path}`);
  console.log(`paths exercised: ${JSON.stringify(seen)}`);
});
