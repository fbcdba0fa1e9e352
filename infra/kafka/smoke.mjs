// Smoke test for a broker started by kafka.sh: create a 4-partition topic,
// produce a message, consume it back through a consumer group with a short
// session timeout, check that topics are NOT auto-created, delete the topic.
//
//   KAFKA_PORT=9092 node infra/kafka/smoke.mjs     (exit 0 = all good)
import kafkajs from "kafkajs"; // CommonJS package: take the default export

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1"; // read when the producer is created

const { Kafka, logLevel } = kafkajs;
const port = process.env.KAFKA_PORT || "9092";
const t0 = performance.now();
const ms = () => `${Math.round(performance.now() - t0)}ms`;
const step = (msg) => console.log(`[${ms()}] ${msg}`);

const kafka = new Kafka({
  clientId: "shoal-kafka-smoke",
  brokers: [`127.0.0.1:${port}`],
  logLevel: logLevel.WARN,
});
const topic = `smoke-${process.pid}-${Date.now()}`;
const admin = kafka.admin();
const producer = kafka.producer({ allowAutoTopicCreation: false });
// 3 s session: legal only because server.properties lowers group.min.session.timeout.ms.
const consumer = kafka.consumer({ groupId: `${topic}-g`, sessionTimeout: 3000, heartbeatInterval: 500 });

const watchdog = setTimeout(() => {
  console.error(`[${ms()}] FAIL: timed out`);
  process.exit(1);
}, 60_000);

try {
  await admin.connect();
  const cluster = await admin.describeCluster();
  step(`cluster ${cluster.clusterId}, brokers ${cluster.brokers.map((b) => `${b.host}:${b.port}`).join(",")}`);

  await admin.createTopics({ topics: [{ topic, numPartitions: 4, replicationFactor: 1 }], waitForLeaders: true });
  const [meta] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics;
  if (meta.partitions.length !== 4) throw new Error(`expected 4 partitions, got ${meta.partitions.length}`);
  step(`created ${topic} with ${meta.partitions.length} partitions`);

  await producer.connect();
  const value = `hello ${new Date().toISOString()}`;
  const [rec] = await producer.send({ topic, messages: [{ key: "k1", value }] });
  step(`produced to partition ${rec.partition} offset ${rec.baseOffset}`);

  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = await new Promise((resolve, reject) => {
    consumer.run({ eachMessage: async ({ partition, message }) => resolve({ partition, value: message.value.toString() }) }).catch(reject);
  });
  if (got.value !== value) throw new Error(`consumed ${JSON.stringify(got.value)}, expected ${JSON.stringify(value)}`);
  step(`consumed it back from partition ${got.partition}`);

  // auto.create.topics.enable=false: metadata for an unknown topic must fail.
  const missing = `${topic}-missing`;
  let created = true;
  // Own quiet client: kafkajs logs the (expected) UNKNOWN_TOPIC error at ERROR.
  const quiet = new Kafka({ clientId: "shoal-kafka-smoke", brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING }).admin();
  await quiet.connect();
  try {
    await quiet.fetchTopicMetadata({ topics: [missing] });
  } catch {
    created = false;
  } finally {
    await quiet.disconnect();
  }
  const listed = (await admin.listTopics()).includes(missing);
  if (created || listed) throw new Error("broker auto-created a topic");
  step("unknown topic was not auto-created");

  // Leave the group first: deleting a topic under a live consumer only makes noise.
  await consumer.disconnect();
  await producer.disconnect();
  await admin.deleteTopics({ topics: [topic] });
  step("deleted topic; OK");
} catch (err) {
  console.error(`[${ms()}] FAIL: ${err?.stack ?? err}`);
  process.exitCode = 1;
} finally {
  await consumer.disconnect().catch(() => {});
  await producer.disconnect().catch(() => {});
  await admin.disconnect().catch(() => {});
  clearTimeout(watchdog);
}
