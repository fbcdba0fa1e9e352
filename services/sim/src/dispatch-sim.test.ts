import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { roundRobin, sharedQueue } from "./policies.ts";
import { printSweep } from "./report.ts";
import { findKnees } from "./sweep.ts";

const cost = { aMs: 0.42, bMsPerToken: 0.00095, cMsPerToken2: 0.0000002 };

describe("dispatch benchmark", () => {
  it("finds knees: monotone in the SLO, each passing run within it", () => {
    const sweep = findKnees({
      cost,
      devices: 4,
      policies: [sharedQueue(), roundRobin()],
      seed: 1,
      requests: 400,
      sloMultiples: [5, 20],
      stepFactor: 2,
      refineSteps: 2,
    });
    assert.ok(sweep.loneMedianMs > 0.42);
    for (const p of sweep.policies) {
      const [tight, loose] = p.knees;
      assert.ok(loose!.load >= tight!.load, `${p.policy}: a looser SLO never lowers the knee`);
      for (const k of p.knees) {
        if (k.load === 0) continue;
        assert.ok(k.result!.latency.request!.p99Ms <= k.sloMs && k.result!.answeredFraction >= 0.99);
      }
    }
    const lines: string[] = [];
    printSweep(sweep, (l) => lines.push(l));
    assert.match(lines[0]!, /lone median request/);
    assert.ok(lines.some((l) => l.startsWith("round robin")));
  });

  it("the command runs end to end in quick mode (a tiny sweep, so it cannot rot)", async () => {
    const script = fileURLToPath(new URL("./dispatch-sim.ts", import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", script, "--quick", "--requests", "150", "--profiles", "gpu-a100-bert"], {
      timeout: 60_000,
    });
    assert.match(stdout, /== gpu-a100-bert \(published\)/);
    assert.match(stdout, /shared queue\s+[\d.]+/);
    assert.match(stdout, /direct \(depth push 200ms, fill-first\)/);
    assert.match(stdout, /done in/);
  });
});
