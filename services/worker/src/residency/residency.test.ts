import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ManualClock } from "../batching/manual-clock.ts";
import { ModelTooLargeError, ResidencyClosedError } from "./errors.ts";
import { FakeLoader, flush, type FakeResource } from "./fake-loader.ts";
import { Residency, type Lease, type ModelResidencyInfo, type ResidencyEvent, type ResidencyOptions } from "./residency.ts";

interface Setup {
  sizes?: Record<string, number>;
  budget?: number;
  auto?: boolean;
  pinned?: readonly string[];
  opts?: Partial<ResidencyOptions<FakeResource>>;
}

/** Budget 30 and models of 10 bytes unless told otherwise. */
function setup(s: Setup = {}) {
  const clock = new ManualClock();
  const budget = s.budget ?? 30;
  const sizeOf = (m: string): number => s.sizes?.[m] ?? 10;
  const fake = new FakeLoader(sizeOf, budget, s.auto ?? true);
  const events: ResidencyEvent[] = [];
  const pinned = new Set(s.pinned ?? []);
  const res = new Residency<FakeResource>({
    budgetBytes: budget,
    policy: "lru",
    sizeOf,
    isPinned: (m) => pinned.has(m),
    load: fake.load,
    unload: fake.unload,
    clock,
    onEvent: (e) => events.push(e),
    ...s.opts,
  });
  /** Leases taken through these helpers are counted on the resource, so the fake can catch an unload of a leased model. */
  const track = (lease: Lease<FakeResource>): Lease<FakeResource> => {
    assert.equal(lease.resource.unloaded, false, `lease on an unloaded ${lease.model}`);
    lease.resource.leases += 1;
    let done = false;
    return {
      model: lease.model,
      resource: lease.resource,
      release: () => {
        if (!done) lease.resource.leases -= 1;
        done = true;
        lease.release();
      },
    };
  };
  const acquire = (m: string, signal?: AbortSignal): Promise<Lease<FakeResource>> => res.acquire(m, signal ? { signal } : {}).then(track);
  const use = async (m: string): Promise<void> => (await acquire(m)).release();
  const info = (m: string): ModelResidencyInfo | undefined => res.snapshot().find((i) => i.model === m);
  const resident = (): string[] =>
    res
      .snapshot()
      .filter((i) => i.state === "resident")
      .map((i) => i.model);
  return { clock, fake, res, events, acquire, use, info, resident, track, pinned };
}

/** Settles to "pending" when the promise has not settled after a flush. */
async function state<T>(p: Promise<T>): Promise<"pending" | "resolved" | "rejected"> {
  let s: "pending" | "resolved" | "rejected" = "pending";
  p.then(
    () => (s = "resolved"),
    () => (s = "rejected"),
  );
  await flush();
  return s;
}

describe("Residency: leases and single flight", () => {
  test("acquire loads once; later acquires and tryAcquire lease the resident model at once", async () => {
    const { res, fake, acquire, info } = setup();
    assert.equal(res.tryAcquire("a"), undefined, "not resident yet");
    const l1 = await acquire("a");
    assert.equal(l1.resource.model, "a");
    const l2 = res.tryAcquire("a");
    assert.ok(l2);
    assert.equal(l2.resource, l1.resource);
    const l3 = await acquire("a");
    assert.equal(fake.loadsOf("a"), 1);
    assert.equal(info("a")?.inFlight, 3);
    l1.release();
    l1.release(); // idempotent
    l2.release();
    assert.equal(info("a")?.inFlight, 1);
    l3.release();
    assert.equal(info("a")?.inFlight, 0);
    assert.equal(res.usedBytes, 10);
  });

  test("concurrent acquires of a loading model share one load (single flight)", async () => {
    const { res, fake, acquire, info } = setup({ auto: false });
    const ps = [acquire("a"), acquire("a"), acquire("a")];
    await flush();
    assert.equal(fake.loadsOf("a"), 1);
    assert.equal(info("a")?.state, "loading");
    assert.equal(info("a")?.waiting, 3);
    assert.equal(res.usedBytes, 10, "bytes reserved before the load resolves");
    fake.op("load", "a").settle();
    const leases = await Promise.all(ps);
    assert.equal(new Set(leases.map((l) => l.resource)).size, 1);
    assert.equal(info("a")?.inFlight, 3, "leases are taken before the waiters run");
    assert.equal(info("a")?.loadCount, 1);
    assert.equal(fake.loadsOf("a"), 1);
  });

  test("records cold-start time from the clock, per load", async () => {
    const { clock, fake, res, events, info } = setup({ auto: false });
    const p = res.acquire("a");
    await flush();
    clock.advance(120);
    fake.op("load", "a").settle();
    (await p).release();
    assert.equal(info("a")?.lastColdStartMs, 120);
    assert.deepEqual(
      events.filter((e) => e.type === "loaded"),
      [{ type: "loaded", model: "a", bytes: 10, coldStartMs: 120, waiters: 1 }],
    );
    assert.equal(info("a")?.lastUsedMs, 120);
  });
});

describe("Residency: eviction order", () => {
  test("LRU evicts the least recently used idle model", async () => {
    const { use, fake, resident, info } = setup();
    await use("a");
    await use("b");
    await use("c");
    await use("a"); // b is now least recent
    await use("d");
    assert.deepEqual(resident().sort(), ["a", "c", "d"]);
    assert.equal(info("b")?.state, "evicted");
    assert.equal(info("b")?.evictionCount, 1);
    await use("e"); // then c
    assert.deepEqual(resident().sort(), ["a", "d", "e"]);
    assert.deepEqual(
      fake.log.filter((l) => l.startsWith("unload ")),
      ["unload b", "unload c"],
    );
  });

  test("a release counts as use for LRU", async () => {
    const { use, acquire, resident } = setup();
    const a = await acquire("a"); // a leased first, released last
    await use("b");
    await use("c");
    a.release();
    await use("d");
    assert.deepEqual(resident().sort(), ["a", "c", "d"]);
  });

  test("the load starts only after the victim's unload completes (bytes freed on completion)", async () => {
    const { res, fake, acquire, info } = setup({ auto: false, budget: 20 });
    for (const m of ["a", "b"]) {
      const p = acquire(m);
      await flush();
      fake.op("load", m).settle();
      (await p).release();
    }
    const p = acquire("c");
    await flush();
    assert.deepEqual(
      fake.pending.map((o) => `${o.kind} ${o.model}`),
      ["unload a"],
    );
    assert.equal(info("a")?.state, "unloading");
    assert.equal(info("c")?.state, "queued");
    assert.equal(res.usedBytes, 20, "the unloading model still counts");
    fake.op("unload", "a").settle();
    await flush();
    assert.deepEqual(
      fake.pending.map((o) => `${o.kind} ${o.model}`),
      ["load c"],
    );
    fake.op("load", "c").settle();
    (await p).release();
    assert.equal(res.usedBytes, 20);
    assert.equal(fake.maxLiveBytes, 20);
  });

  test("pinned-by-traffic evicts the lowest decayed count, not the least recent", async () => {
    const { use, resident, info } = setup({ opts: { policy: "pinned-by-traffic", traffic: { halfLifeMs: 10_000, hotThreshold: 5 } } });
    for (let i = 0; i < 6; i++) await use("a"); // popular, but used first
    await use("b");
    await use("b");
    await use("c");
    await use("d"); // LRU would evict a; the count evicts c (1 request)
    assert.deepEqual(resident().sort(), ["a", "b", "d"]);
    assert.equal(info("a")?.pinned, true);
    assert.equal(info("a")?.pinnedBy, "traffic");
    assert.equal(info("b")?.pinned, false);
  });

  test("pinned-by-traffic: counts decay with the half-life", async () => {
    const { clock, use, resident, info } = setup({ opts: { policy: "pinned-by-traffic", traffic: { halfLifeMs: 1_000, hotThreshold: 100 } } });
    for (let i = 0; i < 8; i++) await use("a");
    clock.advance(4_000); // a: 8 → 0.5
    await use("b");
    await use("c");
    assert.ok(Math.abs(info("a")!.traffic - 0.5) < 1e-9);
    await use("d");
    assert.deepEqual(resident().sort(), ["b", "c", "d"]);
  });

  test("pinned-by-traffic: equal counts fall back to LRU", async () => {
    const { use, resident } = setup({ opts: { policy: "pinned-by-traffic" } });
    await use("b");
    await use("a");
    await use("c");
    await use("d"); // a, b, c all at count 1 (clock never moved): b is least recent
    assert.deepEqual(resident().sort(), ["a", "c", "d"]);
  });

  test("pinned-by-traffic: a hot model goes only when the non-hot ones cannot free the room", async () => {
    const traffic = { halfLifeMs: 60_000, hotThreshold: 3 };
    // a (hot, 10 bytes) and b (cold, 5 bytes) fill 15 bytes.
    const s1 = setup({ budget: 15, sizes: { a: 10, b: 5, c: 5, d: 10 }, opts: { policy: "pinned-by-traffic", traffic } });
    for (let i = 0; i < 5; i++) await s1.use("a");
    await s1.use("b");
    await s1.use("c"); // 5 bytes: the cold b is enough
    assert.deepEqual(s1.resident().sort(), ["a", "c"]);
    await s1.use("d"); // 10 bytes: the cold c alone cannot make room, so the hot a goes (and only a)
    assert.deepEqual(s1.resident().sort(), ["c", "d"]);
    assert.equal(s1.info("a")?.evictionCount, 1);
  });

  test("pinned-by-traffic waits for a busy model that is the better victim, up to busyVictimWaitMs", async () => {
    const opts = { policy: "pinned-by-traffic" as const, traffic: { halfLifeMs: 60_000, hotThreshold: 100 }, busyVictimWaitMs: 2_000 };
    {
      const { use, acquire, fake, resident } = setup({ budget: 20, opts });
      for (let i = 0; i < 3; i++) await use("a");
      const b = await acquire("b"); // rarely used, but busy
      const c = acquire("c");
      assert.equal(await state(c), "pending", "waits for b rather than evict the busier a");
      assert.equal(fake.loadsOf("c"), 0);
      b.release();
      (await c).release();
      assert.deepEqual(resident().sort(), ["a", "c"]);
    }
    {
      const { clock, use, acquire, resident } = setup({ budget: 20, opts });
      for (let i = 0; i < 3; i++) await use("a");
      const b = await acquire("b");
      const c = acquire("c");
      assert.equal(await state(c), "pending");
      clock.advance(1_999);
      assert.equal(await state(c), "pending");
      clock.advance(1); // b still leased after the cap: the idle a goes instead
      (await c).release();
      assert.deepEqual(resident().sort(), ["b", "c"]);
      b.release();
    }
  });

  test("LRU never waits for a busy model when an idle one can make room", async () => {
    const { use, acquire, resident } = setup({ budget: 20 });
    await use("a");
    const b = await acquire("b");
    (await acquire("c")).release();
    assert.deepEqual(resident().sort(), ["b", "c"]);
    b.release();
  });

  test("catalog-pinned models are never evicted", async () => {
    const { use, acquire, res, resident, info } = setup({ budget: 20, pinned: ["p"] });
    await use("p"); // least recent from here on
    await use("a");
    await use("b");
    await use("c");
    assert.deepEqual(resident().sort(), ["c", "p"]);
    assert.equal(info("p")?.pinnedBy, "catalog");
    // With the only other model leased, a new one waits rather than touching p.
    const c = await acquire("c");
    const d = acquire("d");
    assert.equal(await state(d), "pending");
    c.release();
    (await d).release();
    assert.deepEqual(resident().sort(), ["d", "p"]);
    assert.equal(res.usedBytes, 20);
  });
});

describe("Residency: waiting for room", () => {
  test("with every resident model leased, a load waits; resident models are still served", async () => {
    const { res, fake, acquire, resident } = setup({ budget: 20 });
    const a = await acquire("a");
    const b = await acquire("b");
    const c = acquire("c");
    assert.equal(await state(c), "pending");
    assert.equal(fake.loadsOf("c"), 0);
    assert.deepEqual(res.queuedModels, ["c"]);
    // No head-of-line blocking: a resident model's acquire/tryAcquire succeed meanwhile.
    const a2 = await acquire("a");
    const a3 = res.tryAcquire("a");
    assert.ok(a3);
    a3.release();
    a2.release();
    a.release(); // a idle now: evicted for c
    const cl = await c;
    assert.deepEqual(resident().sort(), ["b", "c"]);
    cl.release();
    b.release();
  });

  test("waiting loads go in FIFO order, each retried when a lease is released", async () => {
    const { fake, acquire } = setup({ budget: 10 });
    const a = await acquire("a");
    const order: string[] = [];
    const c = acquire("c").then((l) => {
      order.push("c");
      return l;
    });
    const d = acquire("d").then((l) => {
      order.push("d");
      return l;
    });
    await flush();
    assert.equal(fake.loadsOf("c") + fake.loadsOf("d"), 0);
    a.release();
    (await c).release();
    (await d).release();
    assert.deepEqual(order, ["c", "d"]);
    assert.deepEqual(
      fake.log.filter((l) => l.startsWith("load ")),
      ["load a", "load c", "load d"],
    );
  });

  test("an aborted waiting acquire leaves the queue; the next one proceeds", async () => {
    const { res, acquire, info } = setup({ budget: 10, sizes: { big: 10, small: 10 } });
    const a = await acquire("a");
    const ac = new AbortController();
    const big = acquire("big", ac.signal);
    const small = acquire("small");
    await flush();
    assert.deepEqual(res.queuedModels, ["big", "small"]);
    ac.abort(new Error("deadline"));
    await assert.rejects(big, /deadline/);
    assert.deepEqual(res.queuedModels, ["small"]);
    assert.equal(info("big"), undefined, "a model never loaded and no longer wanted is dropped");
    a.release();
    (await small).release();
    assert.equal(info("small")?.state, "resident");
  });

  test("acquiring a model while it unloads waits for the unload, then loads it again", async () => {
    const { fake, acquire, info } = setup({ auto: false, budget: 10 });
    const pa = acquire("a");
    await flush();
    fake.op("load", "a").settle();
    (await pa).release();
    const pb = acquire("b");
    await flush();
    assert.equal(info("a")?.state, "unloading");
    const pa2 = acquire("a");
    await flush();
    assert.equal(fake.loadsOf("a"), 1, "no load while its unload runs");
    fake.op("unload", "a").settle();
    await flush();
    fake.op("load", "b").settle();
    const b = await pb;
    assert.equal(await state(pa2), "pending");
    b.release();
    await flush();
    fake.op("unload", "b").settle();
    await flush();
    fake.op("load", "a").settle();
    (await pa2).release();
    assert.deepEqual(fake.violations, []);
    assert.equal(info("a")?.loadCount, 2);
  });
});

describe("Residency: errors", () => {
  test("a model larger than the whole budget rejects at once, naming model, size and budget", async () => {
    const { res, fake } = setup({ budget: 30, sizes: { huge: 31 } });
    await assert.rejects(res.acquire("huge"), (err: unknown) => {
      assert.ok(err instanceof ModelTooLargeError);
      assert.equal(err.bytes, 31);
      assert.equal(err.budgetBytes, 30);
      assert.match(err.message, /"huge".*31 bytes.*30-byte/);
      return true;
    });
    assert.equal(fake.log.length, 0);
    assert.equal(res.usedBytes, 0);
  });

  test("a model that cannot fit beside the catalog-pinned ones rejects too, not waits forever", async () => {
    const { use, res } = setup({ budget: 30, pinned: ["p", "q"], sizes: { p: 10, q: 10, big: 15 } });
    await use("p");
    await use("q");
    await assert.rejects(res.acquire("big"), (err: unknown) => err instanceof ModelTooLargeError && err.pinnedBytes === 20);
  });

  test("a failed load rejects every waiter with the loader's error, frees the bytes, and is cached for failedRetryMs", async () => {
    const { clock, res, fake, info, events } = setup({ auto: false, opts: { failedRetryMs: 2_000 } });
    const p1 = res.acquire("a");
    const p2 = res.acquire("a");
    await flush();
    const err = new Error("ENOENT: model.onnx missing");
    clock.advance(7);
    fake.op("load", "a").fail(err);
    await assert.rejects(p1, (e) => e === err);
    await assert.rejects(p2, (e) => e === err);
    assert.equal(res.usedBytes, 0);
    const i = info("a")!;
    assert.equal(i.state, "failed");
    assert.equal(i.error, "ENOENT: model.onnx missing");
    assert.equal(i.failedLoadCount, 1);
    assert.equal(i.loadCount, 0);
    assert.ok(events.some((e) => e.type === "load-failed" && e.error === err && e.coldStartMs === 7));
    clock.advance(1_999);
    await assert.rejects(res.acquire("a"), (e) => e === err);
    assert.equal(fake.loadsOf("a"), 1, "not retried within failedRetryMs");
    clock.advance(1);
    const p3 = res.acquire("a");
    await flush();
    assert.equal(fake.loadsOf("a"), 2, "retried afterwards");
    fake.op("load", "a").settle();
    (await p3).release();
    assert.equal(info("a")?.state, "resident");
    assert.equal(info("a")?.error, undefined);
  });

  test("a loader that throws synchronously fails the load the same way", async () => {
    const clock = new ManualClock();
    const res = new Residency<string>({
      budgetBytes: 10,
      policy: "lru",
      sizeOf: () => 5,
      load: () => {
        throw new Error("sync boom");
      },
      unload: async () => {},
      clock,
    });
    await assert.rejects(res.acquire("a"), /sync boom/);
    assert.equal(res.usedBytes, 0);
  });

  test("a failed unload still frees its bytes and is reported", async () => {
    const { res, fake, acquire, events } = setup({ auto: false, budget: 10 });
    const pa = acquire("a");
    await flush();
    fake.op("load", "a").settle();
    (await pa).release();
    const pb = acquire("b");
    await flush();
    fake.op("unload", "a").fail(new Error("close failed"));
    await flush();
    fake.op("load", "b").settle();
    (await pb).release();
    assert.equal(res.usedBytes, 10);
    assert.ok(events.some((e) => e.type === "unload-failed" && e.model === "a"));
  });

  test("sizeOf throwing rejects the acquire with its error; Infinity counts as too large; NaN is a RangeError", async () => {
    const { res } = setup({
      opts: {
        sizeOf: () => {
          throw new Error("unknown model");
        },
      },
    });
    await assert.rejects(res.acquire("nope"), /unknown model/);
    assert.deepEqual(res.snapshot(), []);
    const inf = setup({ sizes: { nope: Number.POSITIVE_INFINITY } });
    await assert.rejects(inf.res.acquire("nope"), ModelTooLargeError);
    const nan = setup({ sizes: { nope: Number.NaN } });
    await assert.rejects(nan.res.acquire("nope"), RangeError);
  });
});

describe("Residency: thrash", () => {
  test("a load within thrashWindowMs of the model's eviction counts one thrash event", async () => {
    const { clock, res, use, events } = setup({ budget: 10, opts: { thrashWindowMs: 30_000 } });
    await use("a");
    await use("b"); // evicts a
    clock.advance(29_999);
    await use("a"); // evicts b: a thrashes
    assert.equal(res.thrashEvents, 1);
    assert.deepEqual(
      events.filter((e) => e.type === "thrash"),
      [{ type: "thrash", model: "a", sinceEvictedMs: 29_999, thrashEvents: 1 }],
    );
    clock.advance(30_000);
    await use("b"); // b evicted 30 s ago: not a thrash
    assert.equal(res.thrashEvents, 1);
  });
});

describe("Residency: close", () => {
  test("rejects waiters, unloads idle models at once and leased ones on release, then resolves", async () => {
    const { res, fake, acquire, info } = setup({ auto: false, budget: 30, sizes: { d: 25 } });
    const pa = acquire("a");
    await flush();
    fake.op("load", "a").settle();
    const a = await pa;
    const pb = acquire("b");
    await flush();
    fake.op("load", "b").settle();
    (await pb).release();
    const pc = acquire("c"); // loading
    const pd = acquire("d"); // queued: needs more than the idle b would free
    await flush();
    assert.deepEqual(res.queuedModels, ["d"]);
    assert.deepEqual(
      fake.pending.map((o) => `${o.kind} ${o.model}`),
      ["load c"],
    );
    let closed = false;
    const done = res.close().then(() => (closed = true));
    await assert.rejects(pc, ResidencyClosedError);
    await assert.rejects(pd, ResidencyClosedError);
    await assert.rejects(res.acquire("a"), ResidencyClosedError);
    assert.equal(res.tryAcquire("a"), undefined);
    assert.deepEqual(fake.pending.map((o) => `${o.kind} ${o.model}`).sort(), ["load c", "unload b"]);
    fake.op("unload", "b").settle();
    fake.op("load", "c").settle(); // finishes after close: unloaded straight away
    await flush();
    fake.op("unload", "c").settle();
    await flush();
    assert.equal(closed, false, "a is still leased");
    assert.equal(info("a")?.state, "resident");
    a.release();
    await flush();
    fake.op("unload", "a").settle();
    await done;
    assert.equal(res.usedBytes, 0);
    assert.equal(fake.liveBytes, 0);
    assert.deepEqual(fake.violations, []);
    assert.ok(res.snapshot().every((i) => i.state === "evicted" || i.state === "failed"));
    assert.equal(info("d"), undefined);
  });

  test("an observer that acquires or closes re-entrantly cannot get a victim leased or a waiter lost", async () => {
    let res!: Residency<FakeResource>;
    const reentrant: Promise<unknown>[] = []; // one re-entrant acquire (more would chase each other forever)
    const s = setup({
      budget: 20,
      sizes: { c: 20 },
      opts: {
        onEvent: (e) => {
          // Try to lease the other victim of the same plan, from inside the first eviction.
          if (e.type === "evicted" && e.reason === "room" && reentrant.length === 0) {
            reentrant.push(
              res.acquire(e.model === "a" ? "b" : "a").then(
                (l) => {
                  const unloaded = l.resource.unloaded;
                  l.release();
                  return unloaded ? "lease on an unloaded model" : "lease";
                },
                (err: unknown) => (err instanceof ResidencyClosedError ? "closed" : err),
              ),
            );
          }
          if (e.type === "loaded" && e.model === "z") void res.close();
        },
      },
    });
    res = s.res;
    await s.use("a");
    await s.use("b");
    await s.use("c"); // evicts a and b; on a's eviction the observer acquires b, which must queue, not lease a victim
    assert.deepEqual(await Promise.all(reentrant), ["lease"]);
    assert.deepEqual(s.fake.violations, []);
    const z = await s.acquire("z"); // the observer closes on its load: the lease still arrives
    assert.equal(z.resource.unloaded, false);
    let closed = false;
    const done = res.close().then(() => (closed = true));
    await flush();
    assert.equal(closed, false);
    z.release();
    await done;
    assert.deepEqual(s.fake.violations, []);
    assert.equal(res.usedBytes, 0);
  });

  test("close with nothing loaded resolves at once and is idempotent", async () => {
    const { res } = setup();
    const p = res.close();
    assert.equal(res.close(), p);
    await p;
  });
});
