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
   * Adjacent topics of one lane that name a `model` (a per-model pool) are one step: the worker
   * takes one model's jobs at a time from them (see pullByModel).
   */
  readonly topics: ReadonlyArray<{ readonly topic: string; readonly lane: LaneName; readonly model?: string }>;
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

interface Member {
  readonly topic: string;
  readonly lane: LaneName;
  readonly model: string | undefined;
  readonly member: ShareConsumer;
  joined: boolean;
  /** Jobs of this topic held now (delivered, not settled). */
  held: number;
  /** A waiting fetch of a model step is out (see pullByModel). */
  polling: boolean;
}

/** Topics asked for together: one topic, or every model topic of one lane. */
interface Step {
  readonly lane: LaneName;
  readonly members: Member[];
  /** Where the next round of a model step starts looking (rotates, so no model starves). */
  next: number;
  /** The step found jobs last time: look again at once rather than wait. */
  busy: boolean;
  /** The model whose job an idle worker's waiting fetches brought first (see pullByModel). */
  winner: Member | undefined;
}

/** How long a later step's background fetch waits at the broker (see pull). */
const LATER_POLL_MS = 500;

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
  const members: Member[] = opts.topics.map(({ topic, lane, model }, i) => {
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
    return { topic, lane, model, member, joined: false, held: 0, polling: false };
  });
  const steps: Step[] = [];
  for (const m of members) {
    const last = steps.at(-1);
    if (m.model !== undefined && last?.lane === m.lane && last.members[0]!.model !== undefined) last.members.push(m);
    else steps.push({ lane: m.lane, members: [m], next: 0, busy: false, winner: undefined });
  }
  // Workers start their rounds at different models.
  for (const step of steps) step.next = Math.floor(Math.random() * step.members.length);
  const held = new Set<Held>();
  /** Waiting fetches of model steps still at the broker (stop() lets them end before closing). */
  const polling = new Set<Promise<void>>();
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

  function deliver(record: ShareRecord, from: Member): void {
    const member = from.member;
    const entry: Held = { record, member, takenAtMs: Date.now(), renewedAtMs: Date.now() };
    held.add(entry);
    from.held++;
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
        from.held--;
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
        // A newer sleep owns the wake-up now: leave it.
        if (wake === done) wake = undefined;
        resolve();
      }
      wake = done;
    });
  }

  /**
   * One fetch of `m`'s topic; delivers what it gets and returns how many. `keep` (a waiting fetch
   * of a model step) may turn a record down: it is released to the group at once, never run here.
   * A background fetch backs off after an error without taking the loop's wake-up.
   */
  async function fetchFrom(m: Member, room: number, waitMs: number, opts: { background?: boolean; keep?: (r: ShareRecord) => boolean } = {}): Promise<number> {
    const pause = (ms: number): Promise<void> => (opts.background ? new Promise((r) => setTimeout(r, ms)) : sleep(ms));
    try {
      const records = await m.member.fetch({ maxRecords: room, maxWaitMs: waitMs });
      let kept = 0;
      let released = 0;
      for (const r of records) {
        if (opts.keep && !opts.keep(r)) {
          m.member.acknowledge(r, "release");
          released++;
          continue;
        }
        deliver(r, m);
        kept++;
      }
      if (released > 0) void m.member.flush().catch((err: unknown) => log.warn({ err }, "release flush failed; the next fetch retries"));
      return kept;
    } catch (err) {
      if (!running) return 0;
      // Logged once by the member when it stopped; the worker reads unready from here on.
      if (err instanceof KafkaSecurityError) {
        await pause(5_000);
        return 0;
      }
      log.warn({ err, topic: m.topic }, "share fetch failed; retrying shortly");
      await pause(500);
      return 0;
    }
  }

  /** Room of a step's lane less the jobs its waiting fetches may still bring. */
  function roomFor(step: Step): number {
    return handler!.room(step.lane) - step.members.reduce((n, m) => n + (m.polling ? 1 : 0), 0);
  }

  /** Fetches the rest of one model's waiting jobs that fit (the batch it is about to form). */
  async function fill(step: Step, m: Member): Promise<number> {
    const room = roomFor(step);
    return room > 0 && !m.polling ? fetchFrom(m, room, 0) : 0;
  }

  /**
   * One model's jobs at a time from a per-model pool's topics (one member each: the share assignor
   * would otherwise spread the topics over the workers). A fetch over several models hands a
   * worker one job of each, i.e. one call per model, where one model's waiting jobs would have
   * made one batch. So: first more of the models this worker holds (their jobs join batches it
   * forms anyway); then, while jobs were found recently, the models in turn from a rotating start,
   * the first with jobs taking the room; when a round finds nothing, a waiting fetch of one job
   * per model (every model when the worker holds nothing; else as many as the room allows) waits
   * at the broker as long as the loop would, and the first job to come is followed by the rest of
   * its model's queue. The waits last no longer than the loop's: one left waiting would take a job
   * for a worker that has since become busy. Returns the jobs taken.
   */
  async function pullByModel(step: Step, waitMs: number): Promise<number> {
    let took = 0;
    for (const m of step.members) if (m.held > 0) took += await fill(step, m);
    if (took > 0) return took;
    if (step.busy) {
      const n = step.members.length;
      for (let k = 0; k < n && running && !paused; k++) {
        const m = step.members[(step.next + k) % n]!;
        const got = await fill(step, m);
        if (got > 0) {
          step.next = (step.next + k + 1) % n;
          return got;
        }
      }
      step.busy = false;
    }
    // A later step (the batch lane) does not hold the loop up: its fetches wait in the background.
    const background = waitMs <= 0;
    const pollMs = background ? LATER_POLL_MS : waitMs;
    // A worker with nothing in hand waits on every model: a job of any of them may start at once.
    // A busy one with room left waits on as many models as the room allows, in turn.
    const room = held.size === 0 ? step.members.length : roomFor(step);
    const idle = step.members.filter((m) => !m.polling);
    const start = step.next % Math.max(1, idle.length);
    const polls = [...idle.slice(start), ...idle.slice(0, start)].slice(0, Math.max(0, room));
    // A fresh wait of an idle worker: the first job to come decides its model (see keep below).
    const fresh = held.size === 0;
    if (fresh) step.winner = undefined;
    // Fan-out calls to several models arrive at once, and the broker may answer every waiting fetch
    // of one worker (the longest waiting): that worker would run one call per model, one after
    // another, while others idle. So once a wait has brought this worker one model's job, a first
    // delivery of another model's is released at once for an idle worker (a job delivered before
    // is kept: no job spends more than one of its deliveries this way). Only in waits begun idle:
    // a busy worker's look-ahead keeps what it asked for.
    const keep =
      (m: Member) =>
      (r: ShareRecord): boolean => {
        if (fresh && step.winner !== undefined && step.winner !== m && r.deliveryCount <= 1 && running) return false;
        step.winner ??= m;
        return true;
      };
    const first = await new Promise<Member | undefined>((resolve) => {
      const timer = background ? undefined : setTimeout(() => resolve(undefined), waitMs);
      for (const m of polls) {
        m.polling = true;
        const poll = fetchFrom(m, 1, pollMs, { background: true, keep: keep(m) }).then((n) => {
          m.polling = false;
          polling.delete(poll);
          if (n === 0) return;
          step.busy = true;
          clearTimeout(timer);
          resolve(m);
          wake?.();
        });
        polling.add(poll);
      }
      if (background) resolve(undefined);
      // Every poll still out (the last round's, about to come back empty) or no room: the first poll
      // to end, a settlement or the wait ends this one, so the members are asked again at once. A
      // plain wait here left every model without a waiting fetch for most of it (lone calls took
      // 23 ms of path instead of 8–10).
      else if (polls.length === 0) void Promise.race([...polling, sleep(waitMs)]).then(() => resolve(undefined));
    });
    if (first === undefined) return 0;
    step.busy = true;
    return 1 + (await fill(step, first));
  }

  /**
   * One step's fetch. A later step (retries, the batch lane) that found nothing last time is not
   * asked again every round: a fetch waits for its jobs at the broker in the background while the
   * loop goes on (an empty ShareFetch costs the broker ~0.5–1 ms: asking each idle topic ten times
   * a second was most of a worker's idle broker load), and its first jobs make it busy again.
   */
  function pull(step: Step, waitMs: number, later: boolean): Promise<number> {
    if (step.members.length > 1 || step.members[0]!.model !== undefined) return pullByModel(step, waitMs);
    const m = step.members[0]!;
    const room = handler!.room(step.lane);
    if (room <= 0 || m.polling) return Promise.resolve(0);
    if (!later || step.busy)
      return fetchFrom(m, room, waitMs).then((n) => {
        step.busy = n > 0;
        return n;
      });
    m.polling = true;
    const poll = fetchFrom(m, room, LATER_POLL_MS, { background: true }).then((n) => {
      m.polling = false;
      polling.delete(poll);
      if (n > 0) {
        step.busy = true;
        wake?.();
      }
    });
    polling.add(poll);
    return Promise.resolve(0);
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
      for (let i = 0; i < steps.length && running && !paused; i++) {
        const n = await pull(steps[i]!, i === 0 && !laterHadWork ? idleWaitMs : 0, i > 0);
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
      await Promise.all(polling);
      // Closing sends the acknowledgements still queued and releases every job never settled,
      // so other workers take them at once.
      if (held.size > 0) log.info({ unsettled: held.size }, "releasing unsettled jobs to the share group");
      await Promise.all(members.map((m) => m.member.close()));
    },
  };
}
