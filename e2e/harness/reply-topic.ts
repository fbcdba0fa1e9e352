/**
 * Reads a reply topic from its start to its current end and counts results per job: where a job
 * computed twice (a redelivery after a crash, an expired lock) shows up. At-least-once allows such
 * duplicates on the topic; the gateway must deliver one answer per call and drop the rest.
 */
import { randomUUID } from "node:crypto";
import { decodeResult } from "@shoal/common";
import { Kafka, logLevel } from "kafkajs";
import { scrape, total } from "./prometheus.ts";

export interface ReplyTally {
  /** Result records on the topic. */
  readonly records: number;
  /** Distinct job ids among them. */
  readonly jobs: number;
  /** Results beyond the first per job id (jobs computed more than once). */
  readonly duplicates: number;
}

export async function tallyReplyTopic(brokers: string, topic: string, timeoutMs = 20_000): Promise<ReplyTally> {
  const kafka = new Kafka({ clientId: "e2e-reply-tally", brokers: brokers.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, BigInt(p.high)]));
  await admin.disconnect();
  // Nothing to read (results handed directly leave the topic empty): no consumer, whose group join
  // would otherwise still be under way at disconnect and leave kafkajs retrying in the background.
  if ([...ends.values()].every((end) => end === 0n)) return { records: 0, jobs: 0, duplicates: 0 };
  const perJob = new Map<string, number>();
  let records = 0;
  const consumer = kafka.consumer({ groupId: `e2e-tally-${randomUUID()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Map<number, bigint>();
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`reply topic ${topic} not read to its end within ${timeoutMs} ms`)), timeoutMs);
    const check = (): void => {
      if ([...ends].every(([p, end]) => end === 0n || (seen.get(p) ?? -1n) + 1n >= end)) {
        clearTimeout(timer);
        resolve();
      }
    };
    check();
    void consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.set(partition, BigInt(message.offset));
        if (BigInt(message.offset) < (ends.get(partition) ?? 0n)) {
          records++;
          const id = decodeResult(message.value).jobId;
          perJob.set(id, (perJob.get(id) ?? 0) + 1);
        }
        check();
      },
    });
  });
  try {
    await done;
  } finally {
    await consumer.disconnect();
  }
  return { records, jobs: perJob.size, duplicates: records - perJob.size };
}

/** A reply topic's tally with the gateway's result counters, at one moment. */
export interface ReplySnapshot {
  readonly replies: ReplyTally;
  /** shoal_gateway_results_dropped_total: results no call waited for (either path). */
  readonly dropped: number;
  /** shoal_gateway_direct_results_total: results workers handed straight to the gateway. */
  readonly direct: number;
}

/** The gateway's dropped and direct result counters, from its /metrics at `metricsUrl`. */
export function gatewayResultCounters(metricsUrl: string): () => Promise<{ dropped: number; direct: number }> {
  return async () => {
    const m = await scrape(metricsUrl);
    return { dropped: total(m, "shoal_gateway_results_dropped_total"), direct: total(m, "shoal_gateway_direct_results_total") };
  };
}

/** Tallies `topic` and reads the gateway's counters from `counters()`. */
export async function replySnapshot(brokers: string, topic: string, counters: () => Promise<{ dropped: number; direct: number }>): Promise<ReplySnapshot> {
  return { replies: await tallyReplyTopic(brokers, topic), ...(await counters()) };
}

/**
 * Since `before`: each result (on the reply topic, or handed straight to the gateway) must be either the one answer to one of
 * `answered` calls or dropped by the gateway (the gateway may drop more: results it read twice
 * after a broker failover, answers to attempts the client gave up on). Waits (up to 10 s) for late
 * results to be read, then returns the deltas; `unaccounted` — results neither answering a call
 * nor dropped, i.e. delivered a second time — must be 0.
 */
export async function repliesSince(
  before: ReplySnapshot,
  answered: number,
  now: () => Promise<ReplySnapshot>,
): Promise<{ results: number; direct: number; jobs: number; computedTwice: number; dropped: number; unaccounted: number }> {
  let after = await now();
  const resultsSince = (): number => after.replies.records - before.replies.records + after.direct - before.direct;
  const settled = (): boolean => resultsSince() <= answered + after.dropped - before.dropped;
  const until = performance.now() + 10_000;
  while (!settled() && performance.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    after = await now();
  }
  const results = resultsSince();
  const dropped = after.dropped - before.dropped;
  return {
    results,
    direct: after.direct - before.direct,
    jobs: after.replies.jobs - before.replies.jobs,
    computedTwice: after.replies.duplicates - before.replies.duplicates,
    dropped,
    unaccounted: Math.max(0, results - dropped - answered),
  };
}
