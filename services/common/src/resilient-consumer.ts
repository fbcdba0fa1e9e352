import type { Consumer, ConsumerConfig, ConsumerGroupJoinEvent, ConsumerRunConfig, Kafka } from "kafkajs";
import type { Logger } from "./logger.ts";

/**
 * kafkajs consumer timings for a group of one member (a gateway's reply and status readers, a
 * worker's cancel reader): no other member waits on a rebalance, so heartbeats go every 3 s (a third
 * of the session, Kafka's own ratio) rather than every second, and an idle consumer asks the broker
 * twice a second. Records are handed over as soon as they arrive: the broker answers a waiting
 * fetch at once when data comes, so the wait only sets the idle polling rate (and how long a stop
 * may wait for the fetch in flight).
 */
export const SOLO_GROUP_CONSUMER = { sessionTimeout: 10_000, heartbeatInterval: 3_000, maxWaitTimeInMs: 500 } as const;

export interface ResilientConsumerOptions {
  /** `component` of the log lines (`reply-consumer`, `cancel-consumer`, ...). */
  readonly component: string;
  /** Given to `kafka.consumer()` for the first consumer and every replacement. */
  readonly consumerConfig: ConsumerConfig;
  /** Subscribes a fresh consumer (called again for each replacement). */
  readonly subscribe: (consumer: Consumer) => Promise<void>;
  /** What `consumer.run()` gets: `eachMessage` or `eachBatch` and their settings. */
  readonly run: ConsumerRunConfig;
  /**
   * `joined`: `start()` (and a replacement) resolves once the consumer joined its group, e.g. so
   * that nothing produced afterwards can be missed; `running` (default): once `run()` returned.
   */
  readonly startWhen?: "joined" | "running";
  /** With `startWhen: "joined"`, how long a join may take before start() fails (default: no limit). */
  readonly joinTimeoutMs?: number;
  /** Every (re)join of the group, e.g. to reset per-generation state. */
  readonly onGroupJoin?: (event: ConsumerGroupJoinEvent) => void;
  /** Called with each consumer created, before it connects (to listen to more of its events). */
  readonly onConsumer?: (consumer: Consumer) => void;
  /** Runs on the live consumer before it disconnects in `stop()` (e.g. commit completed offsets). */
  readonly beforeStop?: (consumer: Consumer) => Promise<void>;
  /** Deletes the consumer group once stopped: for a group that only this process ever uses. */
  readonly deleteGroupOnStop?: boolean;
  /** First delay before a crashed consumer is replaced; doubles per failed attempt (default 1 s). */
  readonly replaceAfterMs?: number;
  /** Longest delay between replacement attempts (default 30 s). */
  readonly maxReplaceAfterMs?: number;
}

export interface ResilientConsumer {
  /** Creates, subscribes and runs the consumer; see `startWhen`. */
  start(): Promise<void>;
  /** Stops replacing, runs `beforeStop`, leaves the group (and deletes it if asked). Idempotent. */
  stop(): Promise<void>;
  /** Stops fetching `topics`; a replacement consumer starts paused on them too. */
  pause(topics: readonly string[]): void;
  /** Whether the consumer is a member of its group right now. */
  readonly joined: boolean;
  /** Between start() and stop(), including while a crashed consumer waits for its replacement. */
  readonly running: boolean;
  /** The live kafkajs consumer (a new one after each replacement), e.g. to commit offsets. */
  readonly consumer: Consumer | undefined;
  /** Consumers that replaced one kafkajs crashed for good. */
  readonly replacements: number;
}

/**
 * A kafkajs consumer that survives kafkajs giving up on it. kafkajs restarts a consumer after a
 * retriable failure, but a crash it does not restart (CRASH with `restart: false`: a long broker
 * outage exhausts its retries, `KafkaJSNoBrokerAvailableError`, `restartOnFailure` said no) leaves
 * the consumer stopped for good and the process unaware. Here a new consumer replaces it after a
 * backoff (1 s, doubling to 30 s while attempts fail), subscribes and runs the same way, and the
 * crash and each replacement are logged. Every kafkajs consumer of Shoal is created through this.
 */
export function createResilientConsumer(kafka: Kafka, logger: Logger, opts: ResilientConsumerOptions): ResilientConsumer {
  const log = logger.child({ component: opts.component });
  const firstDelayMs = opts.replaceAfterMs ?? 1_000;
  const maxDelayMs = opts.maxReplaceAfterMs ?? 30_000;
  let consumer: Consumer | undefined;
  let running = false;
  let joined = false;
  let replacements = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  let paused: readonly string[] = [];
  let stopping: Promise<void> | undefined;

  /** Creates a consumer and runs it; resolves as `startWhen` says. */
  async function launch(): Promise<void> {
    const c = kafka.consumer(opts.consumerConfig);
    consumer = c;
    let timer: NodeJS.Timeout | undefined;
    const joinedOnce = new Promise<void>((resolve, reject) => {
      if (opts.joinTimeoutMs !== undefined && opts.startWhen === "joined") {
        timer = setTimeout(
          () => reject(new Error(`${opts.component}: did not join group ${opts.consumerConfig.groupId} within ${opts.joinTimeoutMs} ms`)),
          opts.joinTimeoutMs,
        );
      }
      c.on(c.events.GROUP_JOIN, (e) => {
        if (consumer !== c) return;
        joined = true;
        opts.onGroupJoin?.(e);
        clearTimeout(timer);
        resolve();
      });
    });
    // Unobserved until awaited below; a timeout after `running` start must not be unhandled.
    joinedOnce.catch(() => undefined);
    c.on(c.events.REBALANCING, () => {
      if (consumer === c) joined = false;
    });
    c.on(c.events.STOP, () => {
      if (consumer === c) joined = false;
    });
    c.on(c.events.CRASH, (e) => {
      if (consumer !== c) return;
      joined = false;
      if (e.payload.restart) return; // kafkajs restarts it itself
      if (!running) return;
      log.error({ err: e.payload.error, groupId: opts.consumerConfig.groupId }, `consumer crashed for good; replacing it in ${firstDelayMs} ms`);
      scheduleReplace(c, firstDelayMs);
    });
    opts.onConsumer?.(c);
    try {
      await c.connect();
      await opts.subscribe(c);
      await c.run(opts.run);
      if (paused.length > 0) c.pause(paused.map((topic) => ({ topic })));
      if (opts.startWhen === "joined") await joinedOnce;
    } finally {
      clearTimeout(timer);
    }
  }

  function scheduleReplace(old: Consumer, delayMs: number): void {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(() => void replace(old, delayMs), delayMs);
  }

  async function replace(old: Consumer, delayMs: number): Promise<void> {
    if (!running || consumer !== old) return;
    await old.disconnect().catch(() => undefined);
    try {
      await launch();
      replacements += 1;
      log.warn({ groupId: opts.consumerConfig.groupId, replacements }, "consumer replaced");
    } catch (err) {
      if (!running) return;
      const next = Math.min(maxDelayMs, delayMs * 2);
      log.warn({ err, groupId: opts.consumerConfig.groupId }, `could not replace the consumer; retrying in ${next} ms`);
      scheduleReplace(consumer ?? old, next);
    }
  }

  async function shutdown(): Promise<void> {
    running = false;
    clearTimeout(retryTimer);
    const c = consumer;
    if (!c) return;
    try {
      await opts.beforeStop?.(c);
    } finally {
      await c.disconnect();
      joined = false;
    }
    if (opts.deleteGroupOnStop) {
      const admin = kafka.admin();
      try {
        await admin.connect();
        await admin.deleteGroups([opts.consumerConfig.groupId]);
      } catch (err) {
        log.warn({ err, groupId: opts.consumerConfig.groupId }, "could not delete the consumer group");
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
    }
  }

  return {
    get joined() {
      return joined;
    },
    get running() {
      return running;
    },
    get consumer() {
      return consumer;
    },
    get replacements() {
      return replacements;
    },
    async start() {
      if (running) return;
      running = true;
      stopping = undefined;
      try {
        await launch();
      } catch (err) {
        running = false;
        await consumer?.disconnect().catch(() => undefined);
        throw err;
      }
    },
    pause(topics) {
      paused = topics;
      consumer?.pause(topics.map((topic) => ({ topic })));
    },
    stop() {
      if (!running && stopping === undefined) return Promise.resolve();
      stopping ??= shutdown();
      return stopping;
    },
  };
}
