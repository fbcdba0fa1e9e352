import assert from "node:assert/strict";
import { test } from "node:test";
import { pino } from "pino";
import type { BacklogSource } from "./lane-backlog.ts";
import { createLaneLagMonitor } from "./lane-lag.ts";
import { createGatewayMetrics } from "./gateway-metrics.ts";

/** A pino logger that keeps what it logs. */
function recordingLogger(): { logger: pino.Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: "debug" }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines };
}

async function until(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met within 5 s");
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("each pool is read through its intake's source; a failing pool warns once, keeps its figures, never stops the others", async () => {
  const calls: string[] = [];
  let shareFails = false;
  const share: BacklogSource = async (group, topics) => {
    calls.push(`share:${group}`);
    if (shareFails) throw new Error("broker away");
    return new Map(topics.map((t, i) => [t, i === 0 ? 4 : 1]));
  };
  const group: BacklogSource = async (g, topics) => {
    calls.push(`group:${g}`);
    return new Map(topics.map((t) => [t, 2]));
  };
  const queued: Record<string, number> = {};
  const { logger, lines } = recordingLogger();
  const monitor = createLaneLagMonitor(
    { share, group },
    { setQueued: (lane, tokens) => Object.assign(queued, { [lane]: tokens }) },
    [
      { name: "a", intake: "share" },
      { name: "b", intake: "group" },
    ],
    logger,
    5,
  );
  monitor.observeJob("interactive", 10);
  void monitor.start();
  try {
    await until(() => monitor.lag.size === 4);
    assert.ok(calls.includes("share:shoal-pool-a") && calls.includes("group:shoal-pool-b"));
    assert.ok(!calls.includes("group:shoal-pool-a") && !calls.includes("share:shoal-pool-b"));
    assert.deepEqual(Object.fromEntries(monitor.lag), { "a/interactive": 4, "a/batch": 1, "b/interactive": 2, "b/batch": 2 });
    assert.equal(queued["interactive"], 6 * 10);

    shareFails = true;
    const before = calls.length;
    await until(() => calls.length > before + 8);
    assert.equal(monitor.lag.get("a/interactive"), 4, "the failing pool keeps its last figures");
    const failures = lines.filter((l) => l.msg.includes("lane lag"));
    assert.equal(failures.filter((l) => l.level === 40).length, 1, "one warning");
    assert.ok(failures.filter((l) => l.level === 20).length >= 2, "then debug");

    shareFails = false;
    await until(() => lines.some((l) => l.msg === "lane lag readable again"));
  } finally {
    monitor.stop();
  }
});

test("polls slowly while quiet, at the busy interval while anything waits or a call is in flight, and an admitted call wakes it", async () => {
  let calls = 0;
  let waiting = 0;
  let inFlight = 0;
  const source: BacklogSource = async (_g, topics) => {
    calls++;
    return new Map(topics.map((t, i) => [t, i === 0 ? waiting : 0]));
  };
  const monitor = createLaneLagMonitor({ share: source, group: source }, { setQueued: () => {} }, [{ name: "a", intake: "share" }], pino({ level: "silent" }), {
    intervalMs: 10,
    idleIntervalMs: 400,
    inFlight: () => inFlight,
  });
  const callsWithin = async (ms: number): Promise<number> => {
    const before = calls;
    await new Promise((r) => setTimeout(r, ms));
    return calls - before;
  };
  await monitor.start();
  try {
    assert.ok((await callsWithin(300)) <= 1, "quiet: at most one poll in 300 ms");
    waiting = 3;
    await until(() => monitor.lag.get("a/interactive") === 3);
    assert.ok((await callsWithin(200)) >= 5, "backlog: polls at the busy interval");
    waiting = 0;
    await until(() => monitor.lag.get("a/interactive") === 0);
    await new Promise((r) => setTimeout(r, 50));
    inFlight = 1;
    await new Promise((r) => setTimeout(r, 450)); // the idle poll under way notices the call
    assert.ok((await callsWithin(200)) >= 5, "a call in flight: polls at the busy interval");
    inFlight = 0;
    await new Promise((r) => setTimeout(r, 50));
    assert.ok((await callsWithin(150)) <= 1, "quiet again");
    const before = calls;
    const t0 = Date.now();
    monitor.observeJob("interactive", 5);
    await until(() => calls > before);
    assert.ok(Date.now() - t0 < 150, `an admitted call wakes the monitor (polled after ${Date.now() - t0} ms, not the idle 400)`);
  } finally {
    monitor.stop();
  }
});

test("shoal_gateway_queue_lag_records exports the monitor's figures per pool and lane", async () => {
  const lag = new Map([
    ["default/interactive", 7],
    ["default/batch", 0],
  ]);
  const metrics = createGatewayMetrics(
    () => 0,
    () => lag,
  );
  const text = await metrics.registry.metrics();
  assert.match(text, /shoal_gateway_queue_lag_records\{pool="default",lane="interactive",service="gateway"\} 7/);
  assert.match(text, /shoal_gateway_queue_lag_records\{pool="default",lane="batch",service="gateway"\} 0/);
  lag.delete("default/batch");
  assert.doesNotMatch(await metrics.registry.metrics(), /lane="batch"/);
});
