/**
 * A produce request whose outcome the client cannot know: the broker wrote the record, then the
 * connection died before its answer came back (a partition leader that crashed right after it
 * appended and replicated). kafkajs rolls its sequence numbers back after any failed request and
 * hands them to the next records of the partition; the broker takes those for a retry of the
 * written batch, acknowledges them with its offset and never writes them. The batching producer
 * (gateway jobs, worker results) must not lose a record that way: after a failed request it
 * starts a new producer (a new producer id, sequences of its own).
 *
 * Real broker, real kafkajs; the fault is injected in kafkajs's own socket (its `socketFactory`):
 * the answer to one Produce request is cut off, and the connections that follow are refused until
 * kafkajs gives the request up.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { Kafka, logLevel, type Admin, type ISocketFactory } from "kafkajs";
import { createBatchingProducer, createLogger, stopKafkajsIdleLoop } from "@shoal/common";
import { createJobProducer } from "../services/gateway/src/job-producer.ts";
import { QueueUnavailableError } from "../services/gateway/src/errors.ts";
import { kafkaBrokers } from "./harness/cluster.ts";

const PRODUCE_API_KEY = 0;

/** kafkajs sockets that can lose the answer to the next Produce request, then refuse connections. */
class FaultySockets {
  /** Set: the next Produce request is written, its answer is cut off. */
  private cutNextProduce = false;
  private refusing = false;
  cutAnswers = 0;
  refused = 0;

  /** The answer to the next Produce request never arrives; connections are refused until `heal`. */
  arm(): void {
    this.cutNextProduce = true;
  }

  heal(): void {
    this.cutNextProduce = false;
    this.refusing = false;
  }

  readonly factory: ISocketFactory = ({ host, port, onConnect }) => {
    if (this.refusing) {
      this.refused += 1;
      // Port 1 on the loopback: nothing listens there, the connect is refused (ECONNREFUSED).
      return connect({ host: "127.0.0.1", port: 1 }, onConnect);
    }
    const socket = connect({ host, port }, onConnect);
    this.watch(socket);
    return socket;
  };

  private watch(socket: Socket): void {
    let awaitingCut = false;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    socket.write = ((...args: unknown[]) => {
      const chunk = args[0];
      // A request: 4 bytes of size, then its api key (int16). kafkajs writes each request whole.
      if (this.cutNextProduce && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === PRODUCE_API_KEY) {
        this.cutNextProduce = false;
        awaitingCut = true;
      }
      return write(...args);
    }) as Socket["write"];
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event === "data" && awaitingCut) {
        // The broker answered, so the record is written: the client never hears of it.
        awaitingCut = false;
        this.cutAnswers += 1;
        this.refusing = true;
        // With an error, as a reset connection: kafkajs listens for errors, not for a bare close.
        socket.destroy(Object.assign(new Error("read ECONNRESET (injected)"), { code: "ECONNRESET" }));
        return true;
      }
      return emit(event, ...args);
    }) as Socket["emit"];
  }
}

describe("a produce request lost after the broker wrote it (unknown outcome)", () => {
  const admin: Admin = new Kafka({ clientId: "e2e-unknown-outcome-admin", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING }).admin();
  before(() => admin.connect());
  after(() => admin.disconnect());

  test("the record sent next to the same partition is written, not acknowledged as a retry of the lost one", async () => {
    const topic = `e2e-unknown-outcome-${randomBytes(4).toString("hex")}`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const sockets = new FaultySockets();
    const kafka = new Kafka({
      clientId: "e2e-unknown-outcome",
      brokers: [kafkaBrokers()],
      logLevel: logLevel.NOTHING,
      socketFactory: sockets.factory,
      connectionTimeout: 1_000,
    });
    // The gateway's job producer settings: few, short retries.
    const producer = createBatchingProducer(kafka, createLogger("e2e-unknown-outcome", "silent"), {
      name: "unknown-outcome-producer",
      retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
    });
    await producer.connect();
    try {
      await producer.send(topic, { key: "first", value: "written before the cut" });

      sockets.arm();
      await assert.rejects(producer.send(topic, { key: "lost", value: "written, its answer cut off" }), "the client hears only a failure");
      assert.equal(sockets.cutAnswers, 1, "one Produce answer was cut off");
      assert.ok(sockets.refused >= 1, `kafkajs retried on refused connections (${sockets.refused})`);
      sockets.heal();

      await producer.send(topic, { key: "next", value: "must be written" });

      const [offsets] = await admin.fetchTopicOffsets(topic);
      assert.equal(offsets?.high, "3", "three records in the partition: the first, the one whose answer was lost, and the next");
      const keys = await readKeys(topic, 3);
      assert.deepEqual(keys, ["first", "lost", "next"]);
    } finally {
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    }
  });
});

/**
 * kafkajs sockets whose next Produce answer never comes (a silent leader), and whose connections
 * opened after that answer every request late (a broker still loading its producer-id block:
 * InitProducerId answered COORDINATOR_LOAD_IN_PROGRESS for seconds in chaos seed 1).
 */
class SilentThenSlowSockets {
  private silenceNextProduce = false;
  private slowMs = 0;
  private slowUntil = 0;
  private readonly sockets = new Set<Socket>();

  private closed = false;

  /** Closes every connection it made and refuses new ones (the silenced producer's would keep the process alive). */
  destroyAll(): void {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
  }

  /**
   * The next Produce request is written and never answered; for `forMs` from now, every answer on
   * a connection opened after this comes `slowMs` late.
   */
  arm(slowMs: number, forMs: number): void {
    this.silenceNextProduce = true;
    this.slowMs = slowMs;
    this.slowUntil = Date.now() + forMs;
  }

  readonly factory: ISocketFactory = ({ host, port, onConnect }) => {
    // Port 1 on the loopback: nothing listens there, the connect is refused.
    if (this.closed) return connect({ host: "127.0.0.1", port: 1 }, onConnect);
    const socket = connect({ host, port }, onConnect);
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    const slow = Date.now() < this.slowUntil;
    let silent = false;
    // When the last delayed chunk is emitted: later ones never overtake it.
    let releasedAt = 0;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    socket.write = ((...args: unknown[]) => {
      const chunk = args[0];
      if (this.silenceNextProduce && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === PRODUCE_API_KEY) {
        this.silenceNextProduce = false;
        silent = true;
      }
      return write(...args);
    }) as Socket["write"];
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event !== "data" || !(slow || silent)) return emit(event, ...args);
      if (silent) return true;
      const now = Date.now();
      releasedAt = Math.max(releasedAt, now < this.slowUntil ? now + this.slowMs : now);
      setTimeout(() => emit(event, ...args), releasedAt - now);
      return true;
    }) as Socket["emit"];
    return socket;
  };
}

describe("a job given up while the producer that replaced a stuck one is still connecting", () => {
  const admin: Admin = new Kafka({ clientId: "e2e-given-up-admin", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING }).admin();
  before(() => admin.connect());
  after(() => admin.disconnect());

  test("is never written later: its call was answered Unavailable, so no worker may run it (chaos seed 1, finding 2)", async () => {
    const topic = `e2e-given-up-${randomBytes(4).toString("hex")}`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    // kafkajs' 1 ms idle loop would keep the refused connections of the retired producer alive.
    stopKafkajsIdleLoop();
    const sockets = new SilentThenSlowSockets();
    const kafka = new Kafka({ clientId: "e2e-given-up", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING, socketFactory: sockets.factory });
    // The gateway's job producer, its acknowledgement bound 1 s (3 s in the gateway).
    const producer = createJobProducer(kafka, createLogger("e2e-given-up", "silent"), 1_000);
    await producer.start();
    try {
      await producer.send(topic, { key: "first", value: "written before the fault" });
      // For 6 s, each answer on a new connection comes 1.5 s late: the replacement producer needs seconds to connect.
      sockets.arm(1_500, 6_000);
      const stuck = producer.send(topic, { key: "stuck", value: "written, never acknowledged" });
      const stuckErr = await stuck.then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(stuckErr instanceof QueueUnavailableError && stuckErr.maybeWritten, `the stuck record may be written: ${String(stuckErr)}`);
      // Sent while the replacement connects: it waits in the queue until its own bound.
      const queuedErr = await producer.send(topic, { key: "queued", value: "given up before it went out" }).then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(queuedErr instanceof QueueUnavailableError, `answered Unavailable: ${String(queuedErr)}`);
      assert.equal(queuedErr.maybeWritten, false, "it never left the gateway");
      // Once the replacement is up, a record goes out; the given-up one must not go with it.
      let sentAfter = false;
      for (let i = 0; i < 20 && !sentAfter; i++) {
        sentAfter = await producer.send(topic, { key: `after-${i}`, value: "written once the producer is back" }).then(
          () => true,
          () => false,
        );
      }
      assert.ok(sentAfter, "the replacement producer writes again");
      const [offsets] = await admin.fetchTopicOffsets(topic);
      const keys = await readKeys(topic, Number(offsets?.high ?? 0));
      assert.equal(keys.includes("queued"), false, `the given-up record was never written (keys: ${keys.join(", ")})`);
      assert.deepEqual(keys.slice(0, 2), ["first", "stuck"]);
    } finally {
      await producer.stop();
      sockets.destroyAll();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    }
  });
});

/** The keys of the first `n` records of partition 0, read with a plain consumer. */
async function readKeys(topic: string, n: number): Promise<string[]> {
  const kafka = new Kafka({ clientId: "e2e-unknown-outcome-reader", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `${topic}-reader` });
  const keys: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`read ${keys.length} of ${n} records in 20 s`)), 20_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          keys.push(String(message.key));
          if (keys.length >= n) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    await done;
  } finally {
    await consumer.disconnect();
  }
  return keys;
}
