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
import { createBatchingProducer, createLogger } from "@shoal/common";
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
