import type { Kafka } from "kafkajs";
import {
  createResilientConsumer,
  eachRecordInSlices,
  decodeGatewayRegistration,
  GATEWAYS_TOPIC,
  RecordDecodeError,
  replyTopic,
  SIGNATURE_HEADER,
  SOLO_GROUP_CONSUMER,
  statusSignedBytes,
  type Logger,
  type RecordSigner,
} from "@shoal/common";

/** Slack for clock differences between a gateway and this worker. */
const CLOCK_SLACK_MS = 2_000;
/** Longest registration interval honoured. */
const MAX_INTERVAL_MS = 60_000;
/**
 * Results waiting for a registration at once; past it an unregistered topic is refused at once. A
 * waiting result holds its job's in-flight slot: a flood of forged jobs must not hold them all
 * (only a gateway that has just started can be legitimately unseen, for a few milliseconds).
 */
export const MAX_WAITING_RESULTS = 16;

/** How long a lapse that cannot be proven (see RegistrationState) keeps its entry. */
const UNPROVEN_RETAIN_MS = 10 * 60_000;

export type RegistrationRejection = "signature" | "malformed" | "capacity";
export type RegistrationOutcome = "stored" | "removed" | "stale" | RegistrationRejection;

/**
 * A reply topic's standing: `live` (its registration has not lapsed); `lapsed`, proven (this
 * reader has read records written after the registration lapsed: had it been refreshed, the
 * refresh would have been read); `unproven` (the registration lapsed by the clock, but this
 * reader has read nothing written since: it may be the reader that is cut off, not the gateway);
 * `unknown` (never registered, withdrawn, or long lapsed).
 */
export type RegistrationState = "live" | "lapsed" | "unproven" | "unknown";

/** Where a gateway takes results directly (its signed registration's address), and which gateway that is. */
export interface DirectTarget {
  readonly address: string;
  readonly instanceId: string;
}

/** The Kafka record, as much of it as the table reads. */
export interface RegistrationRecord {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** The record's timestamp (ms since the epoch, as a string, as kafkajs gives it). */
  readonly timestamp?: string;
  readonly headers?: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
}

/**
 * The live gateways' reply topics, bounded and expiring like the gateway's worker table: with
 * cluster keys only signed registrations count; a registration must name its own gateway's reply
 * topic (`shoal.replies.<instance id>`, the record's key); it lapses three intervals after it was
 * written (at most after it arrived); past `maxGateways` a new instance is refused until one lapses.
 *
 * A lapse counts only once it is proven: the topic has one partition, read in order, so having read
 * a record written at T means every refresh written before T has been read too. A worker cut off
 * from the brokers (or one whose reader is rejoining its group) sees every registration lapse by
 * the clock while the gateways are alive and refreshing; it must not drop their results.
 */
export class RegistrationTable {
  /** Instance id → when its registration lapses (local clock). */
  private readonly expiries = new Map<string, number>();
  /** Instance id → the direct-reply address its latest registration gave (none: reply topic only). */
  private readonly addresses = new Map<string, string>();
  /** Every record written up to this time (local clock) has been read. */
  private readUpToMs = 0;

  constructor(
    private readonly maxGateways: number,
    private readonly signer?: RecordSigner,
  ) {}

  get size(): number {
    return this.expiries.size;
  }

  accept(record: RegistrationRecord, nowMs: number): RegistrationOutcome {
    const key = record.key?.toString("utf8") ?? "";
    const value = record.value !== null && record.value.length > 0 ? record.value : null;
    if (this.signer?.enabled && !this.signer.verify("gateway", statusSignedBytes(key, value), record.headers?.[SIGNATURE_HEADER])) return "signature";
    if (value === null) {
      this.forget(key);
      if (record.timestamp !== undefined) this.observe(Number(record.timestamp), nowMs);
      return "removed";
    }
    let instanceId: string;
    let expiresAtMs: number;
    let address: string;
    try {
      const r = decodeGatewayRegistration(value);
      if (r.instanceId !== key || r.replyTopic !== replyTopic(key)) return "malformed";
      if (r.directReplyAddress.length > 300) return "malformed";
      instanceId = r.instanceId;
      address = r.directReplyAddress;
      const interval = Math.min(r.intervalMs > 0 ? r.intervalMs : 5_000, MAX_INTERVAL_MS);
      const writtenAtMs = Math.min(Number(r.updatedUnixMs), nowMs);
      this.observe(writtenAtMs, nowMs);
      expiresAtMs = writtenAtMs + 3 * interval + CLOCK_SLACK_MS;
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      return "malformed";
    }
    if (expiresAtMs <= nowMs) return "stale";
    const known = this.expiries.get(instanceId);
    if (known === undefined && this.expiries.size >= this.maxGateways) {
      this.sweep(nowMs);
      if (this.expiries.size >= this.maxGateways) return "capacity";
    }
    this.expiries.set(instanceId, Math.max(known ?? 0, expiresAtMs));
    if (address === "") this.addresses.delete(instanceId);
    else this.addresses.set(instanceId, address);
    return "stored";
  }

  private forget(instanceId: string): void {
    this.expiries.delete(instanceId);
    this.addresses.delete(instanceId);
  }

  /** Everything written up to `writtenAtMs` (a verified record's time, capped at now) has been read. */
  observe(writtenAtMs: number, nowMs: number): void {
    if (Number.isFinite(writtenAtMs)) this.readUpToMs = Math.max(this.readUpToMs, Math.min(writtenAtMs, nowMs));
  }

  /** Drops proven lapses, and unproven ones after UNPROVEN_RETAIN_MS. */
  sweep(nowMs: number): void {
    for (const [id, at] of this.expiries) if (at <= this.readUpToMs || at + UNPROVEN_RETAIN_MS <= nowMs) this.forget(id);
  }

  state(topic: string, nowMs: number): RegistrationState {
    const prefix = replyTopic("");
    if (!topic.startsWith(prefix)) return "unknown";
    const at = this.expiries.get(topic.slice(prefix.length));
    if (at === undefined || at + UNPROVEN_RETAIN_MS <= nowMs) return "unknown";
    if (at > nowMs) return "live";
    return at <= this.readUpToMs ? "lapsed" : "unproven";
  }

  /** The direct-reply address and instance id of `topic`'s gateway, while its registration is live and gave one. */
  direct(topic: string, nowMs: number): DirectTarget | undefined {
    if (this.state(topic, nowMs) !== "live") return undefined;
    const instanceId = topic.slice(replyTopic("").length);
    const address = this.addresses.get(instanceId);
    return address === undefined ? undefined : { address, instanceId };
  }

  /** Whether `topic` is the reply topic of a gateway whose registration is live at `nowMs`. */
  registered(topic: string, nowMs: number): boolean {
    return this.state(topic, nowMs) === "live";
  }
}

/** Reply topics live gateways registered on `shoal.gateways`, followed from the topic's start. */
export interface ReplyRegistry {
  /** Resolves once the registrations on the topic when it was called have been read (at most `catchUpMs`). */
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Whether a live gateway registered `topic`. A registration not seen yet is waited for up to the
   * grace (the gateway registers before it serves, but this reader and the job intake fetch apart),
   * by at most MAX_WAITING_RESULTS results at once. A lapse this reader cannot prove (it may be the
   * one cut off) is checked against the topic's end offset; unproven, the result is allowed.
   */
  allows(topic: string): Promise<boolean>;
  /** `topic`'s gateway's direct-reply address, while its registration is live and gave one. */
  direct(topic: string): DirectTarget | undefined;
}

export interface ReplyRegistryOptions {
  readonly workerId: string;
  readonly maxGateways: number;
  readonly signer?: RecordSigner;
  /** How long a result waits for its reply topic's registration to arrive (default 1 s). */
  readonly graceMs?: number;
  /** Longest wait in start() for the existing registrations (default 10 s). */
  readonly catchUpMs?: number;
  readonly onRejected?: (reason: RegistrationRejection) => void;
  /** A result allowed to a reply topic whose registration lapsed by the clock while this reader could not prove it. */
  readonly onUnproven?: () => void;
}

/** At most one end-offset check per this long (each is a connection and two requests to the brokers). */
const PROBE_EVERY_MS = 1_000;

export function createReplyRegistry(kafka: Kafka, logger: Logger, opts: ReplyRegistryOptions): ReplyRegistry {
  const log = logger.child({ component: "reply-registry" });
  const table = new RegistrationTable(opts.maxGateways, opts.signer);
  const graceMs = opts.graceMs ?? 1_000;
  /** Results waiting for a registration, woken by each stored one. */
  const waiters = new Set<() => void>();
  let lastReadOffset = -1n;
  let sweeper: NodeJS.Timeout | undefined;
  let lastWarnMs = 0;
  const admin = kafka.admin();
  const consumer = createResilientConsumer(kafka, logger, {
    component: "reply-registry",
    consumerConfig: { groupId: `shoal-worker-registry-${opts.workerId}`, ...SOLO_GROUP_CONSUMER, allowAutoTopicCreation: false },
    subscribe: (c) => c.subscribe({ topic: GATEWAYS_TOPIC, fromBeginning: true }),
    deleteGroupOnStop: true,
    run: {
      autoCommit: false,
      // In slices that yield between them: a flood of registrations must not stall the worker.
      eachBatch: eachRecordInSlices((message) => {
        const now = Date.now();
        lastReadOffset = BigInt(message.offset);
        const outcome = table.accept(message, now);
        if (outcome === "stored") for (const wake of waiters) wake();
        if (outcome !== "signature" && outcome !== "malformed" && outcome !== "capacity") return;
        opts.onRejected?.(outcome);
        if (now - lastWarnMs >= 10_000) {
          lastWarnMs = now;
          log.warn({ reason: outcome, offset: message.offset, held: table.size }, "gateway registration refused");
        }
      }),
    },
  });

  /**
   * The topic's last offset now (-1: empty), asked until `until`: a topic another service has just
   * created may not have its leader yet. Unknown after that: undefined (results then wait out the grace).
   */
  async function lastOffset(until: number): Promise<bigint | undefined> {
    for (;;) {
      try {
        return await lastOffsetOnce();
      } catch (err) {
        if (Date.now() >= until) {
          log.warn({ err }, "could not read where the gateway registrations end; results wait for theirs");
          return undefined;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async function lastOffsetOnce(): Promise<bigint> {
    try {
      await admin.connect();
      const [end] = await admin.fetchTopicOffsets(GATEWAYS_TOPIC);
      return BigInt(end?.high ?? "0") - 1n;
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /** The end-offset check in flight (it may outlive the wait for it); when the last one began. */
  let probing: Promise<void> | undefined;
  let probedAtMs = 0;
  /**
   * Asks where the topic ends; if this reader has read that far, everything written before the
   * question has been read (and lapses before it are proven). Waits at most the grace; one check
   * at a time, at most one per PROBE_EVERY_MS.
   */
  async function probe(): Promise<void> {
    if (probing === undefined && Date.now() - probedAtMs >= PROBE_EVERY_MS) {
      const askedAtMs = Date.now();
      probedAtMs = askedAtMs;
      probing = lastOffsetOnce()
        .then((last) => {
          if (lastReadOffset >= last) table.observe(askedAtMs, Date.now());
        })
        .catch(() => undefined)
        .finally(() => {
          probing = undefined;
        });
    }
    if (probing === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([probing, new Promise<void>((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
  }

  return {
    async start() {
      const askedAtMs = Date.now();
      const until = askedAtMs + (opts.catchUpMs ?? 10_000);
      const last = await lastOffset(until);
      await consumer.start();
      sweeper = setInterval(() => table.sweep(Date.now()), 5_000);
      sweeper.unref();
      if (last === undefined) return;
      while (lastReadOffset < last && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      if (lastReadOffset < last)
        log.warn({ lastReadOffset: String(lastReadOffset), last: String(last) }, "gateway registrations not all read at start; results wait for theirs");
      else table.observe(askedAtMs, Date.now());
    },
    async stop() {
      clearInterval(sweeper);
      for (const wake of waiters) wake();
      await consumer.stop();
    },
    async allows(topic) {
      const state = table.state(topic, Date.now());
      if (state === "live") return true;
      if (state === "unproven") {
        await probe();
        const after = table.state(topic, Date.now());
        if (after === "unproven") opts.onUnproven?.();
        if (after === "unproven" || after === "live") return true;
      }
      if (waiters.size >= MAX_WAITING_RESULTS) return false;
      return new Promise<boolean>((resolve) => {
        const check = (): void => {
          if (!table.registered(topic, Date.now())) return;
          finish(true);
        };
        const finish = (ok: boolean): void => {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(ok);
        };
        const timer = setTimeout(() => finish(table.registered(topic, Date.now())), graceMs);
        waiters.add(check);
      });
    },
    direct: (topic) => table.direct(topic, Date.now()),
  };
}
