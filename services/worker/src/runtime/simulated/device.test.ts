import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createSimulatedDevice, lagVerdict } from "./device.ts";
import { callCostMs, simProfile, simProfileIds, type SimProfile } from "./profile.ts";

const profile: SimProfile = { id: "test", description: "test", source: "published", aMs: 10, bMsPerToken: 0.5, cMsPerToken2: 0, loadMs: 20, memoryBytes: 1 };

describe("simulated device", () => {
  it("costs a + b·B·L + c·B·L² per call", () => {
    assert.equal(callCostMs({ aMs: 1, bMsPerToken: 0.1, cMsPerToken2: 0.01 }, 2, 10), 1 + 0.1 * 20 + 0.01 * 200);
    assert.equal(callCostMs(profile, 0, 10), 0);
  });

  it("runs one call at a time, first come first served, each taking its dilated cost", async () => {
    const device = createSimulatedDevice({ profile, dilation: 2 });
    assert.equal(device.label, "simulated:test");
    const t0 = performance.now();
    const ends: number[] = [];
    // 10 + 0.5·4 = 12 ms × 2 = 24 ms each; the second ends after the first.
    const runs = [0, 1].map((i) =>
      device.compute([{ batch: 1, seqLen: 4 }]).then((ms) => {
        ends[i] = performance.now() - t0;
        return ms;
      }),
    );
    const took = await Promise.all(runs);
    for (const ms of took) assert.ok(ms >= 23, `a call took ${ms} ms, planned 24`);
    assert.ok(ends[1]! >= 47, `the second call ended at ${ends[1]} ms: it waited for the first`);
    assert.ok(ends[0]! < ends[1]!);
    const stats = device.stats();
    assert.equal(stats.calls, 2);
    assert.equal(stats.paddedTokens, 8);
    const lag = device.lag();
    assert.equal(lag.samples, 2);
    assert.ok(lag.maxLagMs >= 0);
    assert.ok(Math.abs(lag.maxLagFraction - lag.maxLagMs / 24) < 1e-9, "both calls were planned at 24 ms");
  });

  it("a load waits the dilated load cost without occupying the device", async () => {
    const device = createSimulatedDevice({ profile, dilation: 1 });
    const order: string[] = [];
    const [loadMs] = await Promise.all([
      device.load().then((ms) => {
        order.push("load");
        return ms;
      }),
      device.compute([{ batch: 1, seqLen: 1 }]).then(() => order.push("call")),
    ]);
    assert.ok(loadMs >= 19);
    // The 10.5 ms call did not queue behind the 20 ms load.
    assert.deepEqual(order, ["call", "load"]);
  });

  it("ships the three profiles, the published one saying so, the H200 one measured by the device check", () => {
    assert.deepEqual(simProfileIds, ["cpu-minilm", "gpu-a100-bert", "gpu-h200-minilm"]);
    assert.equal(simProfile("gpu-a100-bert").source, "published");
    assert.match(simProfile("gpu-a100-bert").description, /published figures, NOT measured/);
    const h200 = simProfile("gpu-h200-minilm");
    assert.equal(h200.source, "measured");
    assert.match(h200.fit?.command ?? "", /device-check\.sh/);
    assert.ok(h200.fit!.r2 > 0.95);
    assert.throws(() => simProfile("nope"), /unknown simulated profile 'nope' \(known: cpu-minilm, gpu-a100-bert, gpu-h200-minilm\)/);
  });

  it("refuses a run whose timers overshot more than the tolerated fraction", () => {
    const lag = { samples: 10, meanLagMs: 0.5, maxLagMs: 2, maxLagFraction: 0.2, totalLagFraction: 0.04 };
    assert.equal(lagVerdict(lag, 0.05), undefined);
    assert.match(lagVerdict({ ...lag, totalLagFraction: 0.08 }, 0.05) ?? "", /overshot by 8\.0% .* more than 5\.0%: raise SHOAL_SIM_DILATION/);
  });
});
