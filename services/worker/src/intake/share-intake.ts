import type { LaneName, Logger } from "@shoal/common";
import { createShareConsumer, KafkaSecurityError, type KafkaSecurityOptions, type ShareConsumer, type ShareRecord } from "@shoal/kafka-share";
import type { Delivery, IntakeHandler, JobIntake, RecordHeaders, Settlement } from "./intake.ts";

export interface ShareIntakeOptions {
  readonly brokers: readonly string[];
  /** TLS and SASL for the share-group connections (the worker's KAFKA_SSL_* / KAFKA_SASL_* settings). */
  readonly security?: KafkaSecurityOptions;
  /** The pool's share group: every worker of the pool is a member. */
  readonly groupId: string;
  readonly clientId: string;
  /**
   * Topics in the order they are asked for: each is read by a member of its own, and a topic is
   * asked for only with the room the ones before it left (interactive, retries, then batch lane).
   */
  readonly topics: ReadonlyArray<{ readonly topic: string; readonly lane: LaneName }>;
  /** share.record.lock.duration.ms: a job not settled by then goes to another worker. */
  readonly lockMs: number;
  /** share.delivery.count.limit: deliveries before the broker gives a record up. */
  readonly deliveryLimit: number;
  /**
   * Longest wait of a fetch of the first topic while nothing else has work (default 100 ms): an
   * interactive job is taken the moment it arrives; a batch-lane job that arrives into an idle
   * worker waits at most this.
   */
  readonly idleWaitMs?: number;
  readonly logger: Logger;
}

interface Held {
  readonly record: ShareRecord;
  readonly member: ShareConsumer;
  readonly takenAtMs: number;
  renewedAtMs: number;
}

const ACK: Record<Settlement, "accept" | "release" | "reject"> = { done: "accept", release: "release", reject: "reject" };

/** Kafka headers as a record, the shape the kafkajs path and the trace reader take. */
function headersOf(record: ShareRecord): RecordHeaders {
  const out: Record<string, Buffer | string> = {};
  for (const [key, value] of record.headers) if (value !== null) out[key] = value;
  return out;
}

/**
 * Share-group intake: the pool's jobs topics as one shared queue (Kafka share groups, KIP-932).
 * Every worker is a member of the pool's share group and reads the same partitions; the broker
 * hands each job to one member under a lock, so a job waits for the first worker with room, not
 * for the one its partition was pinned to. The worker asks for only as many jobs as the handler
 * has room for (free slots and token budget), one topic after another in priority order, so it
 * never holds jobs that an idle worker could run, and an interactive job is asked for before any
 * batch-lane job. A job is accepted once settled `done` (its answer is on the reply topic),
 * released on `release` (another worker gets it at once), and a job held longer than half its lock
 * has the lock renewed. A worker that dies without settling loses its locks: its jobs go to
 * other workers once the lock duration passes.
 */
export function createShareIntake(opts: ShareIntakeOptions): JobIntake {
  const log = opts.logger.child({ component: "share-intake" });
  const idleWaitMs = opts.idleWaitMs ?? 100;
  const members = opts.topics.map(({ topic, lane }, i) => {
    const member = createShareConsumer({
      brokers: opts.brokers,
      ...(opts.security ? { security: opts.security } : {}),
      groupId: opts.groupId,
      clientId: `${opts.clientId}-${i}`,
      logger: log,
      // Fetches wait at most idleWaitMs: a broker that stops answering is noticed in seconds.
      connectTimeoutMs: 3_000,
      requestTimeoutMs: 5_000,
      groupConfig: { autoOffsetReset: "earliest", recordLockDurationMs: opts.lockMs, deliveryCountLimit: opts.deliveryLimit },
    });
    member.on("acknowledged", (r) => {
      if (r.error)
        log.warn(
          { err: r.error, topic: r.topic, partition: r.partition },
          "the broker refused an acknowledgement (lock expired?); the job may run again elsewhere",
        );
    });
    return { topic, lane, member, joined: false };
  });
  const held = new Set<Held>();
  let handler: IntakeHandler | undefined;
  let running = false;
  let paused = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  let flushTimer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;

  /** Sends queued acknowledgements soon when no fetch is about to carry them. */
  function scheduleFlush(): void {
    flushTimer ??= setTimeout(() => {
      flushTimer = undefined;
      for (const m of members) void m.member.flush().catch((err: unknown) => log.warn({ err }, "acknowledgement flush failed; the next fetch retries"));
    }, 5);
  }

  function deliver(record: ShareRecord, member: ShareConsumer): void {
    const entry: Held = { record, member, takenAtMs: Date.now(), renewedAtMs: Date.now() };
    held.add(entry);
    let settled = false;
    const delivery: Delivery = {
      topic: record.topic,
      partition: record.partition,
      offset: String(record.offset),
      value: record.value,
      headers: headersOf(record),
      deliveryCount: record.deliveryCount,
      settle(outcome) {
        if (settled) return;
        settled = true;
        held.delete(entry);
        member.acknowledge(record, ACK[outcome]);
        scheduleFlush();
        wake?.();
      },
    };
    try {
      handler!.deliver(delivery);
    } catch (err) {
      log.error({ err, topic: record.topic, offset: String(record.offset) }, "job handler threw; rejecting the record");
      delivery.settle("reject");
    }
  }

  /** Waits until the handler may have room again (a settlement) or `ms` passed. */
  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });
  }

  async function fetchFrom(index: number, room: number, waitMs: number): Promise<number> {
    const m = members[index]!;
    try {
      const records = await m.member.fetch({ maxRecords: room, maxWaitMs: waitMs });
      for (const r of records) deliver(r, m.member);
      return records.length;
    } catch (err) {
      if (!running) return 0;
      // Logged once by the member when it stopped; the worker reads unready from here on.
      if (err instanceof KafkaSecurityError) {
        await sleep(5_000);
        return 0;
      }
      log.warn({ err, topic: m.topic }, "share fetch failed; retrying shortly");
      await sleep(500);
      return 0;
    }
  }

  async function run(): Promise<void> {
    // Whether a later topic (the batch lane) had jobs last time round: then the first topic is
    // only polled, not waited on, so a batch-lane backlog flows while no interactive job waits.
    let laterHadWork = false;
    while (running) {
      if (paused) {
        await sleep(100);
        continue;
      }
      if (members.every((m) => handler!.room(m.lane) <= 0)) {
        // Room comes back when a job's computation ends, before its settlement wakes this loop:
        // look again soon (bench:intake: a 50 ms nap left devices idle beside a backlog).
        await sleep(5);
        continue;
      }
      let tookLater = 0;
      for (let i = 0; i < members.length && running && !paused; i++) {
        const room = handler!.room(members[i]!.lane);
        if (room <= 0) continue;
        const n = await fetchFrom(i, room, i === 0 && !laterHadWork ? idleWaitMs : 0);
        if (i > 0) tookLater += n;
      }
      laterHadWork = tookLater > 0;
    }
  }

  /** Keeps the locks of jobs held long (a model loading, a long batch) from running out. */
  function renewLongHeld(): void {
    const now = Date.now();
    for (const h of held) {
      if (now - h.renewedAtMs < opts.lockMs / 2) continue;
      h.renewedAtMs = now;
      h.member.renew(h.record).catch((err: unknown) => {
        log.warn(
          { err, topic: h.record.topic, offset: String(h.record.offset), heldMs: now - h.takenAtMs },
          "could not renew a job's lock; it may run again elsewhere",
        );
      });
    }
  }

  return {
    kind: "share",
    get inFlight() {
      return held.size;
    },
    get ready() {
      return running && members.every((m) => m.joined);
    },
    async start(h) {
      handler = h;
      running = true;
      await Promise.all(
        members.map(
          (m) =>
            new Promise<void>((resolve, reject) => {
              m.member.on("joined", () => {
                m.joined = true;
                resolve();
              });
              // Refused credentials or certificate: the start fails with the broker's reason
              // instead of waiting for a join that cannot happen; later, the worker turns unready.
              m.member.on("fatal", (err) => {
                m.joined = false;
                reject(err);
              });
              m.member.on("memberEpoch", (epoch) => (m.joined = epoch > 0));
              m.member.subscribe([m.topic]);
            }),
        ),
      );
      renewTimer = setInterval(renewLongHeld, Math.max(250, Math.floor(opts.lockMs / 4)));
      loop = run();
      log.info(
        { group: opts.groupId, topics: opts.topics.map((t) => t.topic), lockMs: opts.lockMs, deliveryLimit: opts.deliveryLimit },
        "joined the share group",
      );
    },
    pause() {
      paused = true;
    },
    async stop() {
      if (!running) return;
      running = false;
      wake?.();
      clearInterval(renewTimer);
      clearTimeout(flushTimer);
      await loop;
      // Closing sends the acknowledgements still queued and releases every job never settled,
      // so other workers take them at once.
      if (held.size > 0) log.info({ unsettled: held.size }, "releasing unsettled jobs to the share group");
      await Promise.all(members.map((m) => m.member.close()));
    },
  };
}
