import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONTRACT_REVIEW_MODELS, generateTrace, zipfCdf } from "./trace.ts";

describe("trace generator", () => {
  it("is deterministic in its seed", () => {
    const opts = { seed: 42, requests: 500, requestsPerSecond: 100 };
    assert.deepEqual(generateTrace(opts), generateTrace(opts));
    assert.notDeepEqual(generateTrace(opts).jobs, generateTrace({ ...opts, seed: 43 }).jobs);
  });

  it("draws models with Zipf frequencies (s = 1.1, 0 and 1.5)", () => {
    for (const s of [1.1, 0, 1.5]) {
      const trace = generateTrace({ seed: 7, requests: 40_000, requestsPerSecond: 1000, zipfS: s, fanOutMin: 1, fanOutMax: 1 });
      const counts = new Array<number>(9).fill(0);
      for (const j of trace.jobs) counts[j.model]! += 1;
      const cdf = zipfCdf(9, s);
      cdf.forEach((c, i) => {
        const expected = c - (cdf[i - 1] ?? 0);
        const seen = counts[i]! / trace.jobs.length;
        assert.ok(Math.abs(seen - expected) < 0.01, `s=${s} rank ${i + 1}: ${seen.toFixed(4)} vs ${expected.toFixed(4)}`);
      });
    }
  });

  it("bursts: arrivals come burstFactor times faster in the burst state, the long-run rate is the one asked for", () => {
    const trace = generateTrace({
      seed: 3,
      requests: 60_000,
      requestsPerSecond: 200,
      fanOutMin: 1,
      fanOutMax: 1,
      burstFactor: 4,
      calmMeanMs: 4_000,
      burstMeanMs: 1_000,
    });
    const burstJobs = trace.jobs.filter((j) => j.burst).length;
    const burstRate = burstJobs / trace.burstMs;
    const calmRate = (trace.jobs.length - burstJobs) / (trace.durationMs - trace.burstMs);
    assert.ok(Math.abs(burstRate / calmRate - 4) < 0.4, `burst/calm rate ${(burstRate / calmRate).toFixed(2)}`);
    const rate = trace.requests / (trace.durationMs / 1000);
    assert.ok(Math.abs(rate / 200 - 1) < 0.1, `mean rate ${rate.toFixed(1)}/s`);
  });

  it("fans one request out to distinct models at one instant; lengths stay within each model limits", () => {
    const trace = generateTrace({ seed: 9, requests: 5_000, requestsPerSecond: 50, fanOutMin: 2, fanOutMax: 4 });
    const byRequest = new Map<number, (typeof trace.jobs)[number][]>();
    for (const j of trace.jobs) byRequest.set(j.request, [...(byRequest.get(j.request) ?? []), j]);
    assert.equal(byRequest.size, 5_000);
    let total = 0;
    for (const calls of byRequest.values()) {
      assert.ok(calls.length >= 2 && calls.length <= 4);
      assert.equal(new Set(calls.map((c) => c.model)).size, calls.length, "distinct models");
      assert.equal(new Set(calls.map((c) => c.arrivalMs)).size, 1, "at once");
      total += calls.length;
    }
    assert.ok(Math.abs(total / 5_000 - 3) < 0.1, `mean fan-out ${total / 5_000}`);
    for (const j of trace.jobs) {
      const m = CONTRACT_REVIEW_MODELS[j.model]!;
      assert.ok(j.tokens.length >= m.itemsMin && j.tokens.length <= m.itemsMax);
      for (const t of j.tokens) assert.ok(t >= 3 && t <= m.maxTokens);
    }
    for (let i = 1; i < trace.jobs.length; i++) assert.ok(trace.jobs[i]!.arrivalMs >= trace.jobs[i - 1]!.arrivalMs);
  });
});
