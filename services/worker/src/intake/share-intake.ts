import { WAKE_HEADER, type LaneName, type Logger } from "@shoal/common";
import {
  createLagReader,
  createShareConsumer,
  KafkaSecurityError,
  type KafkaSecurityOptions,
  type LagReader,
  type ShareConsumer,
  type ShareRecord,
} from "@shoal/kafka-share";
import type { Delivery, IntakeHandler, JobIntake, RecordHeaders, Settlement } from "./intake.ts";
import { QueueHeads } from "./queue-heads.ts";

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
   * How long a waiting fetch of an interactive topic waits at the broker (default 100 ms). Every
   * topic with room keeps a waiting fetch at the broker, sent again the moment the last one ends.
   * The broker answers it as soon as a new job arrives, but not when a job is released (a worker
   * gave it back for an idle one, or a stopped worker's connection closed): an idle worker sees a
   * released job only when its wait ends, so this bounds how long a released job waits.
   */
  readonly idleWaitMs?: number;
  /**
   * Per-model pools: each idle waiting fetch waits a random 0.5–1.5× idleWaitMs (default on). The
   * broker hands a new job to the longest-waiting fetch of its topic; an idle worker's fetches of
   * every model, sent together, would be the longest waiting on every topic at once, so it got all
   * of a fan-out's calls and released all but one (a released job waits for a wait to end). With
   * the waits apart, each topic's longest-waiting fetch belongs to a worker picked independently.
   */
  readonly idleJitter?: boolean;
  /** The same for the retry and batch-lane topics while the worker holds no job (default 2,000 ms). */
  readonly laterIdleWaitMs?: number;
  /**
   * A job this worker took and gave straight back without running it: `busy` (a waiting fetch begun
   * idle brought it after the worker had taken another model's job: it goes to an idle worker),
   * `stopping` (it arrived after the intake paused or stopped), `unservable` (its model failed to
   * load here and waits out a backoff: the job lifecycle declined it, see Settlement).
   */
  readonly onGiveBack?: (why: "busy" | "stopping" | "unservable") => void;
  /** A fetch brought records: how long it took, from sending it to its answer (a take's round trip, or more when it waited). */
  readonly onFetched?: (ms: number) => void;
  /**
   * Asked before a job is given back for an idle worker: true keeps it here instead (this worker
   * starts it within a take round trip, sooner than a give-back could get it to another). When set,
   * a busy worker's look-ahead waits ask it too for a job of a model it does not hold.
   */
  readonly keepsHere?: () => boolean;
  /**
   * Writes a wake-up marker (WAKE_HEADER) to a partition. After a job is given back for an idle
   * worker, the release is sent and then a marker: the broker does not complete a waiting fetch on a
   * release, but does on a new record, and the woken fetch takes the given-back job first. Without
   * it the job waits for some worker's waiting fetch to run out (up to 1.5 × idleWaitMs).
   */
  readonly wake?: (topic: string, partition: number) => Promise<void>;
  /**
   * Per-model pools: a busy worker takes next the model whose oldest job was written first (the
   * central queue's order) instead of the next model in its own rotation, from a view of every
   * model topic's head (shareGroupHeads) read in the background, a new read starting this long
   * after the last ended while the worker is busy (see QueueHeads). 0 (default): the rotation.
   */
  readonly headsMaxAgeMs?: number;
  /**
   * After giving a job back for an idle worker, this worker asks that topic for nothing for this
   * long while it holds jobs (default 0): its own next fetch would otherwise take the job straight
   * back (a second delivery is kept) and run it after its current batch, while a worker sat idle.
   */
  readonly giveBackRestMs?: number;
  /**
   * Deliveries a job may spend being given back for an idle worker (default 1; at most the
   * delivery limit less 3: the job lifecycle dead-letters one short of the limit, so a job given
   * back still has a delivery to run in and one spare for a crash): a job delivered more often
   * than this is kept, whoever holds what.
   */
  readonly giveBacks?: number;
  /**
   * How long a finished job's acknowledgement may wait to go to the broker with others (default 0;
   * ShareConsumerOptions.ackLingerMs): at light load each acknowledging fetch costs the broker a
   * share-state write, so waiting 100 ms writes a tenth of a second's acks at once.
   */
  readonly ackLingerMs?: number;
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
  /** A waiting fetch is out (see poll). */
  polling: boolean;
  /** Acknowledgements queued since this member's last fetch (the next one carries them). */
  unsent: boolean;
  /**
   * This worker gave a job of this topic back for an idle worker: until then (epoch ms) it asks the
   * topic for nothing while it holds jobs, so its own fetch does not take the job straight back.
   */
  restUntil: number;
  /** This worker declined a job of this topic (its model cannot load here now): until then (epoch ms) it asks the topic for nothing. */
  declinedUntil: number;
}

/** Topics asked for together: one topic, or every model topic of one lane. */
interface Step {
  readonly lane: LaneName;
  readonly members: Member[];
  /** Where the next round of a model step starts looking (rotates, so no model starves). */
  next: number;
  /** The step found jobs last time: look again at once rather than wait. */
  busy: boolean;
  /** Model steps with headsMaxAgeMs: the model queues' heads (see busyOrder). */
  heads?: QueueHeads<Member>;
}

/** How long a later step's waiting fetch waits at the broker while the worker holds jobs (see pull). */
const LATER_POLL_MS = 500;
/** Longest wait of a fetch that carries acknowledgements (stop() waits for it: see poll). */
const ACK_WAIT_MS = 100;
/**
 * A finished job's acknowledgement rides the member's next fetch (no ShareAcknowledge of its own);
 * one still queued this long (plus ackLingerMs) after the settlement, its member having sent no
 * fetch since (paused, no room), is sent alone.
 */
const ACK_FLUSH_MS = 150;

interface Held {
  readonly record: ShareRecord;
  readonly member: ShareConsumer;
  readonly takenAtMs: number;
  renewedAtMs: number;
}

const ACK: Record<Settlement, "accept" | "release" | "reject"> = { done: "accept", release: "release", reject: "reject", decline: "release" };

/**
 * Longest a topic that carries several models' jobs rests after a decline: long enough for another
 * worker's fetch to take the declined job (at once when a wake-up marker finds one waiting, within
 * a take round trip of a busy one freeing room), short enough that this worker's share of the other
 * models' jobs on the topic waits little. A model's own topic rests out its whole backoff.
 */
const DECLINE_REST_MAX_MS = 1_000;

const isWakeMarker = (r: ShareRecord): boolean => r.headers.some(([key]) => key === WAKE_HEADER);

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
  const idleJitter = opts.idleJitter ?? true;
  const laterIdleWaitMs = opts.laterIdleWaitMs ?? 2_000;
  const giveBack = opts.onGiveBack;
  const fetched = opts.onFetched;
  const keepsHere = opts.keepsHere ?? (() => false);
  /** Without keepsHere a busy worker's look-ahead keeps whatever its waits bring (see pullByModel). */
  const lookAheadKeepsAll = opts.keepsHere === undefined;
  const writeWakeMarker = opts.wake;
  const headsMaxAgeMs = opts.headsMaxAgeMs ?? 0;
  const giveBackRestMs = opts.giveBackRestMs ?? 0;
  const ackLingerMs = opts.ackLingerMs ?? 0;
  const ackFlushMs = ACK_FLUSH_MS + ackLingerMs;
  const giveBacks = Math.max(1, Math.min(opts.giveBacks ?? 1, opts.deliveryLimit - 3));
  const headReader: LagReader | undefined =
    headsMaxAgeMs > 0
      ? createLagReader({ brokers: opts.brokers, clientId: `${opts.clientId}-heads`, ...(opts.security ? { security: opts.security } : {}) })
      : undefined;
  const members: Member[] = opts.topics.map(({ topic, lane, model }, i) => {
    const member = createShareConsumer({
      brokers: opts.brokers,
      ...(opts.security ? { security: opts.security } : {}),
      groupId: opts.groupId,
      clientId: `${opts.clientId}-${i}`,
      logger: log,
      // Fetches wait at most a few seconds: a broker that stops answering is noticed in seconds.
      connectTimeoutMs: 3_000,
      requestTimeoutMs: Math.max(5_000, laterIdleWaitMs + 3_000),
      groupConfig: { autoOffsetReset: "earliest", recordLockDurationMs: opts.lockMs, deliveryCountLimit: opts.deliveryLimit },
      ackLingerMs,
    });
    member.on("acknowledged", (r) => {
      if (r.error)
        log.warn(
          { err: r.error, topic: r.topic, partition: r.partition },
          "the broker refused an acknowledgement (lock expired?); the job may run again elsewhere",
        );
    });
    return { topic, lane, model, member, joined: false, held: 0, polling: false, unsent: false, restUntil: 0, declinedUntil: 0 };
  });
  const steps: Step[] = [];
  for (const m of members) {
    const last = steps.at(-1);
    if (m.model !== undefined && last?.lane === m.lane && last.members[0]!.model !== undefined) last.members.push(m);
    else steps.push({ lane: m.lane, members: [m], next: 0, busy: false });
  }
  // Workers start their rounds at different models.
  for (const step of steps) step.next = Math.floor(Math.random() * step.members.length);
  for (const step of steps) {
    if (headReader === undefined || step.members.length < 2) continue;
    const topics = step.members.map((m) => m.topic);
    step.heads = new QueueHeads<Member>({
      read: async () => {
        const read = await headReader.shareGroupHeads(opts.groupId, topics);
        return new Map(step.members.map((m) => [m, read.get(m.topic) ?? { waiting: 0 }]));
      },
      maxAgeMs: headsMaxAgeMs,
      wanted: () => running && !paused && step.busy,
      onError: (err) => log.debug({ err }, "could not read the model queues' heads; keeping the last view"),
    });
  }
  const held = new Set<Held>();
  /** Waiting fetches of model steps still at the broker (stop() lets them end before closing). */
  const polling = new Set<Promise<void>>();
  let handler: IntakeHandler | undefined;
  let running = false;
  let paused = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  /** Something changed since the loop's round began (a fetch ended, a job settled): go round again. */
  let poked = false;
  let flushTimer: NodeJS.Timeout | undefined;
  /** A release is waiting for the flush timer: flush every member, not only those that sent no fetch. */
  let flushAll = false;
  let renewTimer: NodeJS.Timeout | undefined;

  /** Wakes the loop, or makes its next sleep return at once. */
  function poke(): void {
    poked = true;
    wake?.();
  }

  /**
   * Sends queued acknowledgements that no fetch carried. An accepted job's acknowledgement rides the
   * member's next fetch, which the loop sends as soon as the member's waiting fetch ends (within
   * idleWaitMs on an interactive topic); a release goes at once (another worker should take the job now).
   */
  function scheduleFlush(release: boolean): void {
    flushAll ||= release;
    if (flushTimer !== undefined && !release) return;
    clearTimeout(flushTimer);
    flushTimer = setTimeout(
      () => {
        flushTimer = undefined;
        const all = flushAll;
        flushAll = false;
        // Members that sent a fetch since (unsent cleared) leave their acks to ride a later one:
        // with ackLingerMs they may be waiting there on purpose.
        for (const m of members) {
          if (all || m.unsent) void m.member.flush().catch((err: unknown) => log.warn({ err }, "acknowledgement flush failed; the next fetch retries"));
        }
      },
      release ? 5 : ackFlushMs,
    );
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
      settle(outcome, restMs) {
        if (settled) return;
        settled = true;
        held.delete(entry);
        from.held--;
        from.unsent = true;
        member.acknowledge(record, ACK[outcome]);
        if (outcome === "decline") declined(from, record, restMs ?? 0);
        else scheduleFlush(outcome === "release");
        poke();
      },
    };
    try {
      handler!.deliver(delivery);
    } catch (err) {
      log.error({ err, topic: record.topic, offset: String(record.offset) }, "job handler threw; rejecting the record");
      delivery.settle("reject");
    }
  }

  /**
   * A job given back because this worker cannot run its model for `restMs` (a load backoff): the
   * topic is asked for nothing meanwhile (capped for a topic of several models), so another worker's
   * fetch takes the job rather than this worker taking it straight back — each take costs the job
   * one of its deliveries, and it was failed for good when they ran out here. The release goes at
   * once, then a wake-up marker (a release does not complete a fetch waiting at the broker).
   */
  function declined(m: Member, record: ShareRecord, restMs: number): void {
    m.declinedUntil = Math.max(m.declinedUntil, Date.now() + (m.model !== undefined ? restMs : Math.min(restMs, DECLINE_REST_MAX_MS)));
    giveBack?.("unservable");
    void m.member.flush().then(
      () =>
        writeWakeMarker?.(record.topic, record.partition).catch((err: unknown) =>
          log.warn({ err, topic: record.topic }, "could not write a wake-up marker; the declined job waits for a fetch to end"),
        ),
      (err: unknown) => log.warn({ err }, "release flush failed; the next fetch retries"),
    );
  }

  /** Waits until the loop is poked (a settlement, a fetch ended, stop) or `ms` passed. */
  function sleep(ms: number): Promise<void> {
    if (poked) {
      poked = false;
      return Promise.resolve();
    }
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
      m.unsent = false;
      const sentAt = performance.now();
      const records = await m.member.fetch({ maxRecords: room, maxWaitMs: waitMs });
      if (records.length > 0) fetched?.(performance.now() - sentAt);
      let kept = 0;
      let released = 0;
      /** Partitions a job was given back to for an idle worker: each gets a wake-up marker (made only when markers are on). */
      let woken: Map<string, { topic: string; partition: number }> | undefined;
      for (const r of records) {
        // A waiting fetch that ends after the intake paused (draining) or stopped: the jobs go back
        // to the group at once, for a worker that will run them.
        // A wake-up marker is never given back (that would call for another marker): the job
        // lifecycle acknowledges it at once.
        if (!running || paused || (opts.keep && !isWakeMarker(r) && !opts.keep(r))) {
          m.member.acknowledge(r, "release");
          released++;
          const stopping = !running || paused;
          giveBack?.(stopping ? "stopping" : "busy");
          if (!stopping) m.restUntil = Date.now() + giveBackRestMs;
          if (!stopping && writeWakeMarker) {
            woken ??= new Map();
            woken.set(`${r.topic}/${r.partition}`, { topic: r.topic, partition: r.partition });
          }
          continue;
        }
        deliver(r, m);
        kept++;
      }
      if (released > 0) {
        void m.member.flush().then(
          // The release is at the broker: a marker now wakes a waiting fetch, which takes the job.
          () => {
            for (const { topic, partition } of woken?.values() ?? [])
              writeWakeMarker!(topic, partition).catch((err: unknown) =>
                log.warn({ err, topic }, "could not write a wake-up marker; the job waits for a fetch to end"),
              );
          },
          (err: unknown) => log.warn({ err }, "release flush failed; the next fetch retries"),
        );
      }
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

  /** A topic this busy worker gave a job of back lately, or one it declined a job of: asked for nothing yet (see Member.restUntil, declinedUntil). */
  function resting(m: Member): boolean {
    const now = Date.now();
    return now < m.declinedUntil || (held.size > 0 && now < m.restUntil);
  }

  /** Fetches the rest of one model's waiting jobs that fit (the batch it is about to form). */
  async function fill(step: Step, m: Member): Promise<number> {
    const room = roomFor(step);
    return room > 0 && !m.polling && !resting(m) ? fetchFrom(m, room, 0) : 0;
  }

  /**
   * Leaves a fetch of `m` waiting at the broker for up to `waitMs`; when it ends the loop goes round
   * again and sends the next one at once: a topic with room is never left without a waiting fetch
   * (a job that arrives finds one and is answered at once). `took` runs when it brought jobs.
   */
  function poll(m: Member, room: number, waitMs: number, keep: ((r: ShareRecord) => boolean) | undefined, took: (n: number) => void): void {
    m.polling = true;
    // A fetch that carries acknowledgements waits briefly: stop() waits for it (its outcome says
    // whether they were taken), while a bare waiting fetch is cut short (see ShareConsumer.close).
    const wait = m.unsent ? Math.min(waitMs, ACK_WAIT_MS) : waitMs;
    const p = fetchFrom(m, room, wait, { background: true, ...(keep ? { keep } : {}) }).then((n) => {
      m.polling = false;
      polling.delete(p);
      if (n > 0) took(n);
      poke();
    });
    polling.add(p);
  }

  /**
   * How long a waiting fetch sent now waits. While the worker holds nothing: an interactive topic's
   * idleWaitMs (a released job is seen when it ends), a later topic's laterIdleWaitMs (an empty
   * ShareFetch costs the broker ~0.5–1 ms). While it holds jobs: at most ACK_WAIT_MS on an
   * interactive topic (a finished job's acknowledgement rides the next fetch) and LATER_POLL_MS on
   * a later one.
   */
  function waitFor(later: boolean): number {
    if (held.size === 0) return later ? laterIdleWaitMs : idleWaitMs;
    return later ? LATER_POLL_MS : Math.min(idleWaitMs, ACK_WAIT_MS);
  }

  /**
   * A waiting fetch begun while the worker held nothing asked for an idle worker's take; if the
   * worker has taken other jobs since, what no longer fits goes back to the group at once, for an
   * idle worker (a job delivered before is kept: no job spends more than one delivery this way).
   */
  function fits(idle: boolean): ((r: ShareRecord) => boolean) | undefined {
    if (!idle) return undefined;
    let kept = 0;
    return (r) => {
      // Jobs held now that this fetch did not bring: the worker is no longer idle.
      const ok = kept === 0 || r.deliveryCount > giveBacks || held.size === kept || keepsHere();
      if (ok) kept++;
      return ok;
    };
  }

  /**
   * The order a busy worker asks a model step's topics in: its own rotation from step.next (so no
   * model starves), or with headsMaxAgeMs the models whose head record was written first, oldest
   * first, as the central queue serves them (a rotation leaves a popular model's jobs waiting for
   * some worker's turn to come round: bench:dispatch); see QueueHeads.
   */
  function busyOrder(step: Step): Member[] {
    const n = step.members.length;
    const rotation = Array.from({ length: n }, (_, k) => step.members[(step.next + k) % n]!);
    if (step.heads === undefined) return rotation;
    step.heads.refresh();
    return step.heads.order(rotation);
  }

  /**
   * One model's jobs at a time from a per-model pool's topics (one member each: the share assignor
   * would otherwise spread the topics over the workers). A fetch over several models hands a
   * worker one job of each, i.e. one call per model, where one model's waiting jobs would have
   * made one batch. So: first more of the models whose jobs here are not computed yet (they join
   * a batch it forms anyway; a model whose jobs are all computed is not one: continuing with it
   * would keep a worker on a popular model while the other models' jobs wait in Kafka, see
   * `bench:dispatch`); then, while jobs were found recently, the models in turn from a rotating start,
   * the first with jobs taking the room; when a round finds nothing, a waiting fetch of one job
   * per model (every model when the worker holds nothing; else as many as the room allows) stays
   * at the broker, and the first job to come is followed by the rest of its model's queue (the
   * next round fills from the model it holds). Returns the jobs taken.
   */
  async function pullByModel(step: Step, later: boolean): Promise<number> {
    let took = 0;
    const filled = new Set<Member>();
    for (const m of step.members)
      if (m.held > 0 && (handler!.holds?.(m.model!) ?? true)) {
        filled.add(m);
        took += await fill(step, m);
      }
    if (took > 0) return took;
    if (step.busy) {
      for (const m of busyOrder(step)) {
        if (!running || paused) break;
        if (filled.has(m)) continue;
        const asked = roomFor(step) > 0 && !m.polling;
        const got = await fill(step, m);
        if (asked) step.heads?.taken(m, got);
        if (got > 0) {
          step.next = (step.members.indexOf(m) + 1) % step.members.length;
          return got;
        }
      }
      step.busy = false;
    }
    // A worker with nothing in hand waits on every model: a job of any of them may start at once.
    // A busy one with room left waits on as many models as the room allows, in turn.
    const fresh = held.size === 0;
    const room = fresh ? step.members.length : roomFor(step);
    const idle = step.members.filter((m) => !m.polling && !resting(m));
    const start = step.next % Math.max(1, idle.length);
    const polls = [...idle.slice(start), ...idle.slice(0, start)].slice(0, Math.max(0, room));
    // Fan-out calls to several models arrive at once, and the broker may answer every waiting fetch
    // of one worker (the longest waiting): that worker would run one call per model, one after
    // another, while others idle. So once a wait begun idle finds this worker holding another
    // model's job, a first delivery is released at once for an idle worker (a job delivered before
    // is kept: no job spends more than one of its deliveries this way). A busy worker's look-ahead
    // keeps what it asked for, unless the intake can tell when this worker would start it
    // (keepsHere): its waits on several models were sent together, and once one brought a job the
    // others still waiting would queue theirs behind it.
    const keep =
      (m: Member) =>
      (r: ShareRecord): boolean =>
        (!fresh && lookAheadKeepsAll) || m.held > 0 || r.deliveryCount > giveBacks || !step.members.some((x) => x !== m && x.held > 0) || keepsHere();
    const waitMs = waitFor(later);
    const spread = fresh && !later && idleJitter;
    for (const m of polls) poll(m, 1, spread ? Math.round(waitMs * (0.5 + Math.random())) : waitMs, keep(m), () => (step.busy = true));
    return 0;
  }

  /**
   * One step's fetch. A step that found jobs last time is asked again at once (no wait); one that
   * found nothing leaves a fetch waiting at the broker (see poll) while the loop goes on, and its
   * first jobs make it busy again.
   */
  async function pull(step: Step, later: boolean): Promise<number> {
    if (step.members.length > 1 || step.members[0]!.model !== undefined) return pullByModel(step, later);
    const m = step.members[0]!;
    let room = handler!.room(step.lane);
    if (room <= 0 || m.polling || Date.now() < m.declinedUntil) return 0;
    if (step.busy) {
      const n = await fetchFrom(m, room, 0);
      if (n > 0) return n;
      step.busy = false;
      room = handler!.room(step.lane);
      if (room <= 0 || m.polling || !running || paused) return 0;
    }
    // A waiting fetch answered with fewer jobs than it asked for emptied the queue: the next one waits.
    poll(m, room, waitFor(later), fits(held.size === 0), (n) => (step.busy = n >= room));
    return 0;
  }

  async function run(): Promise<void> {
    while (running) {
      poked = false;
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
      let took = 0;
      for (let i = 0; i < steps.length && running && !paused; i++) took += await pull(steps[i]!, i > 0);
      // Nothing taken: every topic with room has a fetch waiting at the broker. Sleep until one
      // ends (with jobs, or empty: then it is sent again), a job settles, or the intake stops.
      if (took === 0) await sleep(idleWaitMs);
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
      // so other workers take them at once; a fetch still waiting at the broker with nothing to
      // acknowledge is cut short (its connection closed: the broker releases what it took).
      if (held.size > 0) log.info({ unsettled: held.size }, "releasing unsettled jobs to the share group");
      await Promise.all(members.map((m) => m.member.close()));
      await Promise.all(polling);
      for (const step of steps) step.heads?.close();
      await headReader?.close();
    },
  };
}
