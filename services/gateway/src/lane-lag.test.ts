import assert from "node:assert/strict";
import { test } from "node:test";
import { pino } from "pino";
import type { ShareGroupPartitionOffsets } from "@shoal/kafka-share";
import { consumerGroupBacklog, shareGroupBacklog, type BacklogSource } from "./lane-backlog.ts";
import { createLaneLagMonitor } from "./lane-lag.ts";
import { createGatewayMetrics } from "./gateway-metrics.ts";

const ends = (topic: string): Array<{ partition: number; offset: string; high: string; low: string }> =>
  topic.endsWith("batch")
    ? [{ partition: 0, offset: "50", high: "50", low: "10" }]
    : [
        { partition: 0, offset: "20", high: "20", low: "0" },
        { partition: 1, offset: "30", high: "30", low: "5" },
      ];

function shareAdmin(parts: ShareGroupPartitionOffsets[]) {
  return { describeShareGroupOffsets: async () => parts };
}

test("share backlog: the broker's lag where it has one, high watermark − start offset (or low watermark) where not", async () => {
  const read = shareGroupBacklog(
    { fetchTopicOffsets: async (t: string) => ends(t) },
    shareAdmin([
      { topic: "i", partition: 0, startOffset: 12n, leaderEpoch: 0, lag: 3n }, // the broker's word
      { topic: "i", partition: 1, startOffset: 25n, leaderEpoch: 0 }, // no lag: 30 − 25
      { topic: "batch", partition: 0, startOffset: -1n, leaderEpoch: 0 }, // no state yet: 50 − 10
    ]),
  );
  assert.deepEqual(
    await read("g", ["i", "batch"]),
    new Map([
      ["i", 8],
      ["batch", 40],
    ]),
  );
});

test("share backlog needs no watermarks when every partition has a lag", async () => {
  const read = shareGroupBacklog(
    { fetchTopicOffsets: async () => assert.fail("not needed") },
    shareAdmin([{ topic: "t", partition: 0, startOffset: 0n, leaderEpoch: 0, lag: 0n }]),
  );
  assert.deepEqual(await read("g", ["t"]), new Map([["t", 0]]));
});

test("consumer-group backlog: high watermark − commit, from the low watermark without one", async () => {
  const read = consumerGroupBacklog({
    fetchTopicOffsets: async (t: string) => ends(t),
    fetchOffsets: (async () => [
      {
        topic: "i",
        partitions: [
          { partition: 0, offset: "15", metadata: null },
          { partition: 1, offset: "-1", metadata: null },
        ],
      },
    ]) as never,
  });
  assert.deepEqual(
    await read("g", ["i", "batch"]),
    new Map([
      ["i", 5 + 25],
      ["batch", 40],
    ]),
  );
});

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
