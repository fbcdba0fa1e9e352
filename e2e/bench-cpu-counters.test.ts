import assert from "node:assert/strict";
import { test } from "node:test";
import { jvmCpuMs, pidListeningOn, processCpuMs } from "./bench/cpu-counters.ts";
import { kafkaBrokers } from "./harness/cluster.ts";

/**
 * The benches split the broker's CPU into its JIT compiler's, its collector's and the rest by
 * HotSpot's thread names (`bench:overhead` waits for the compiler to go quiet before measuring).
 * Read from the test broker's real JVM: a broker that has started has compiled code, so a split
 * that no longer finds HotSpot's compiler threads (renamed in a JDK) fails here, not silently in a
 * bench's figures.
 */
test("jvmCpuMs finds the broker JVM's JIT compiler threads and their CPU within the process total", async () => {
  const port = Number(kafkaBrokers().split(",")[0]!.split(":")[1]);
  const pid = await pidListeningOn(port);
  assert.ok(pid !== undefined, `no process listening on the test broker's port ${port}`);
  const split = await jvmCpuMs(pid);
  const total = await processCpuMs(pid);
  assert.ok(split.compiler > 0, `the broker's compiler threads used ${split.compiler} ms`);
  assert.ok(split.gc >= 0);
  assert.ok(split.compiler + split.gc <= split.total, `compiler ${split.compiler} + gc ${split.gc} > total ${split.total}`);
  assert.ok(split.total <= total, "the process total only grows");
});
