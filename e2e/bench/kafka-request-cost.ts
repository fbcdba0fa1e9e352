/**
 * `npm run bench:request-cost` — what one Kafka request of each kind on the serving path costs, in
 * CPU ms of the client process and of the broker (/proc counters), one request at a time on a
 * scratch broker: an OffsetCommit (what kafkajs' autoCommit sent after every reply fetch), an
 * idempotent acks=all Produce of one result-sized record, an empty ShareFetch with no wait (what
 * the share intake sends for a lane with no jobs). Two rounds: the first warms the JIT of both.
 * With `bench:requests` (how many of each per call), this says where the path's CPU goes.
 */
import { Kafka, logLevel } from "kafkajs";
import { createShareConsumer } from "@shoal/kafka-share";
import { startScratchBroker } from "../../infra/dev/broker.ts";
import { pidListeningOn, processCpuMs } from "./cpu-counters.ts";
const broker = await startScratchBroker();
try {
  const kafka = new Kafka({ clientId: "exp", brokers: [broker.brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: "t", numPartitions: 1 }], waitForLeaders: true });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const c = kafka.consumer({ groupId: "g" });
  await c.connect();
  await c.subscribe({ topic: "t", fromBeginning: true });
  await c.run({ autoCommit: false, eachMessage: async () => {} });
  await new Promise((r) => setTimeout(r, 4000));
  const bpid = (await pidListeningOn(Number(broker.brokers.split(":")[1])))!;
  const N = 2000;
  for (const round of [1, 2]) {
    for (const [name, fn] of [
      ["OffsetCommit", (i: number) => c.commitOffsets([{ topic: "t", partition: 0, offset: String(i + round * N) }])],
      [
        "Produce (acks all, idempotent, one 1.5 KB record)",
        (i: number) => producer.send({ topic: "t", acks: -1, messages: [{ key: String(i), value: Buffer.alloc(1536) }] }),
      ],
    ] as const) {
      const u0 = process.cpuUsage();
      const b0 = await processCpuMs(bpid);
      for (let i = 0; i < N; i++) await fn(i);
      const u = process.cpuUsage(u0);
      const b = (await processCpuMs(bpid)) - b0;
      console.log(`round ${round} ${name}: client ${((u.user + u.system) / 1000 / N).toFixed(3)} ms CPU per request, broker ${(b / N).toFixed(3)} ms`);
    }
  }
  await admin.createTopics({ topics: [{ topic: "s", numPartitions: 1 }], waitForLeaders: true });
  const share = createShareConsumer({ brokers: [broker.brokers], groupId: "sg", clientId: "sc", groupConfig: { autoOffsetReset: "earliest" } });
  await new Promise<void>((resolve) => {
    share.on("joined", () => resolve());
    share.subscribe(["s"]);
  });
  for (const round of [1, 2]) {
    const u0 = process.cpuUsage();
    const b0 = await processCpuMs(bpid);
    for (let i = 0; i < 1000; i++) await share.fetch({ maxRecords: 10, maxWaitMs: 0 });
    const u = process.cpuUsage(u0);
    const b = (await processCpuMs(bpid)) - b0;
    console.log(
      `round ${round} empty ShareFetch (maxWaitMs 0): client ${((u.user + u.system) / 1000 / 1000).toFixed(3)} ms CPU per request, broker ${(b / 1000).toFixed(3)} ms`,
    );
  }
  await share.close();
  await c.disconnect();
  await producer.disconnect();
  await admin.disconnect();
} finally {
  await broker.stop();
}
