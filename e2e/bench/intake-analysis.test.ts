/** The pure analysis of bench:intake: no cluster, milliseconds to run. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type AnsweredJob, armFigures, merge, overlapMs, someIdle } from "./intake-analysis.ts";

describe("bench:intake analysis", () => {
  test("merge joins overlapping and touching intervals", () => {
    assert.deepEqual(
      merge([
        [5, 7],
        [0, 2],
        [2, 3],
        [6, 9],
      ]),
      [
        [0, 3],
        [5, 9],
      ],
    );
  });

  test("someIdle is the time when not every worker is busy", () => {
    const busy = new Map([
      ["a", [[0, 10]] as [number, number][]],
      ["b", [[5, 20]] as [number, number][]],
    ]);
    assert.deepEqual(someIdle(busy, 0, 30), [
      [0, 5],
      [10, 30],
    ]);
    assert.deepEqual(someIdle(new Map([["a", []]]), 0, 4), [[0, 4]]);
  });

  test("overlapMs sums the overlap with a sorted interval list", () => {
    assert.equal(
      overlapMs(
        [3, 12],
        [
          [0, 5],
          [10, 30],
        ],
      ),
      4,
    );
    assert.equal(
      overlapMs(
        [6, 9],
        [
          [0, 5],
          [10, 30],
        ],
      ),
      0,
    );
  });

  test("armFigures counts jobs whose wait overlapped an idle worker by the threshold", () => {
    const job = (sent: number, queueMs: number, worker: string): AnsweredJob => ({
      cls: "short",
      scheduledUnixMs: sent,
      sentUnixMs: sent,
      latencyMs: queueMs + 5,
      worker,
      queueMs,
      inferenceMs: 5,
    });
    // a runs 0–100; b idles until 60: the job sent at 0 that started at 60 waited 60 ms beside it.
    const runs = new Map([
      ["a", [[0, 100]] as [number, number][]],
      ["b", [[60, 65]] as [number, number][]],
    ]);
    const f = armFigures([job(0, 60, "b"), job(70, 0, "b")], runs, 0, 100, [10]);
    assert.equal(f.jobs, 2);
    assert.equal(f.waitedBesideIdle.get(10), 0.5);
    assert.equal(f.idleOverlapShareOfWait, 1);
  });
});
