import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { ReplicaDecider, readScaledObject } from "./hpa.ts";

describe("the HPA decision for a KEDA AverageValue trigger", () => {
  const spec = readScaledObject(join(import.meta.dirname, "../../infra/k8s/base/worker-cpu.yaml"));

  test("reads the base manifests' ScaledObject", () => {
    assert.equal(spec.minReplicas, 2);
    assert.equal(spec.targetPerReplica, 50);
    assert.deepEqual(spec.scaleUp, { percent: 100, periodSeconds: 30, stabilizationSeconds: 0 });
    assert.deepEqual(spec.scaleDown, { pods: 1, periodSeconds: 120, stabilizationSeconds: 600 });
  });

  test("scale-up doubles per period at most; scale-down waits out the window, then one pod per period", () => {
    const d = new ReplicaDecider(spec, 2);
    assert.equal(d.decide(0, 1_000), 4, "20 wanted, doubled from 2");
    assert.equal(d.decide(15, 1_000), 4, "same period: still capped at 2 × 2");
    assert.equal(d.decide(31, 1_000), 8, "next period: doubled again");
    assert.equal(d.decide(40, 410), 8, "within 10% of 8 × 50: no change");
    assert.equal(d.decide(60, 0), 8, "backlog gone, but 600 s of higher recommendations hold the replicas");
    assert.equal(d.decide(641, 0), 7, "window passed: one pod down");
    assert.equal(d.decide(700, 0), 7, "one pod per 120 s");
    assert.equal(d.decide(762, 0), 6);
    assert.equal(new ReplicaDecider(spec, 2).decide(0, 0), 2, "never below minReplicaCount");
  });
});
