import type { ShareConsumer } from "@shoal/kafka-share";

/** What a bench arm's share consumer has taken so far. */
export interface Taking {
  readonly consumer: ShareConsumer;
  received: number;
}

/**
 * Fetches as the worker's share intake does until `running()` is false: a waiting fetch of 100 ms,
 * each record accepted 3 ms after it came (the ack rides a later fetch, or waits out the linger).
 */
export async function consumeLikeIntake(arm: Taking, running: () => boolean): Promise<void> {
  while (running()) {
    const records = await arm.consumer.fetch({ maxRecords: 8, maxWaitMs: 100 });
    for (const r of records) {
      arm.received++;
      setTimeout(() => arm.consumer.acknowledge(r, "accept"), 3);
    }
  }
}
