import assert from "node:assert/strict";
import { test } from "node:test";
import type { Batch, EachBatchPayload, KafkaMessage } from "kafkajs";
import { eachRecordInSlices } from "./sliced-batch.ts";

/** The parts of kafkajs's eachBatch payload the handler reads, over `count` records. */
function payload(count: number, running: () => boolean = () => true): { payload: EachBatchPayload; resolved: string[] } {
  const resolved: string[] = [];
  const messages = Array.from({ length: count }, (_, i) => ({ offset: String(i), value: Buffer.from(`v${i}`) }) as KafkaMessage);
  const p = {
    batch: { messages } as unknown as Batch,
    resolveOffset: (offset: string) => resolved.push(offset),
    isRunning: running,
    isStale: () => false,
  } as unknown as EachBatchPayload;
  return { payload: p, resolved };
}

test("every record is handled and resolved in order, yielding to the event loop after each slice", async () => {
  const handled: string[] = [];
  /** Records handled when each queued macrotask got to run: one per yield. */
  const yields: number[] = [];
  const { payload: p, resolved } = payload(450);
  const tick = (): void => {
    yields.push(handled.length);
    if (handled.length < 450) setImmediate(tick);
  };
  setImmediate(tick);
  await eachRecordInSlices((m) => handled.push(String(m.value)), 200)(p);
  assert.equal(handled.length, 450);
  assert.deepEqual(handled.slice(0, 3), ["v0", "v1", "v2"]);
  assert.deepEqual(
    resolved,
    Array.from({ length: 450 }, (_, i) => String(i)),
  );
  // Other work ran between the slices, not only after the whole batch.
  assert.deepEqual(yields.slice(0, 2), [200, 400]);
});

test("stops at the next record once the consumer stops; what was handled stays resolved", async () => {
  let handled = 0;
  const { payload: p, resolved } = payload(10, () => handled < 4);
  await eachRecordInSlices(() => handled++)(p);
  assert.equal(handled, 4);
  assert.deepEqual(resolved, ["0", "1", "2", "3"]);
});

test("a handler that throws stops the batch with its error (kafkajs then retries from the last resolved offset)", async () => {
  const { payload: p, resolved } = payload(5);
  await assert.rejects(
    eachRecordInSlices((m) => {
      if (m.offset === "2") throw new Error("boom");
    })(p),
    /boom/,
  );
  assert.deepEqual(resolved, ["0", "1"]);
});
