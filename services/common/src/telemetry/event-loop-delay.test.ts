import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, it } from "node:test";
import { Registry } from "prom-client";
import { EVENT_LOOP_DELAY_METRIC, registerEventLoopDelay } from "./event-loop-delay.ts";

/** The cumulative bucket counts of the histogram in a scrape, by `le`. */
function buckets(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${EVENT_LOOP_DELAY_METRIC}_bucket\\{le="([^"]+)"\\} (\\d+)$`, "gm"))) out.set(m[1]!, Number(m[2]));
  return out;
}

describe("event-loop delay histogram", () => {
  it("a 120 ms block on the loop lands in the 0.2 s bucket; idle ticks stay below 5 ms", async () => {
    const registry = new Registry();
    const stop = registerEventLoopDelay(registry);
    try {
      await sleep(200);
      const until = performance.now() + 120;
      while (performance.now() < until);
      await sleep(100);
      const text = await registry.metrics();
      const b = buckets(text);
      const count = b.get("+Inf") ?? 0;
      assert.ok(count >= 20, `samples: ${count}\n${text}`);
      // Exactly one timer period spanned the block: one sample over 50 ms, none over 200 ms.
      assert.equal(count - (b.get("0.05") ?? 0), 1, text);
      assert.equal(count - (b.get("0.2") ?? 0), 0, text);
      assert.match(text, new RegExp(`^# TYPE ${EVENT_LOOP_DELAY_METRIC} histogram$`, "m"));
      // Folded at the scrape: the next one starts from the samples after it (cumulative, never lost).
      await sleep(50);
      const again = buckets(await registry.metrics());
      assert.ok((again.get("+Inf") ?? 0) > count);
      assert.equal((again.get("+Inf") ?? 0) - (again.get("0.05") ?? 0), 1);
    } finally {
      stop();
    }
  });
});
