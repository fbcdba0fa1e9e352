// Readiness probe for the dev broker, used by `kafka.sh wait`.
// An open port only means the socket server is up; a broker is usable once it
// answers Metadata and lists itself (it does so only after it has registered
// with the KRaft controller and been unfenced), and consumer groups work once
// a group coordinator is up. So ask with the real client.
//
// Env: KAFKA_PORT (default 9092), KAFKA_HOST (default 127.0.0.1),
//      KAFKA_EXPECT_CLUSTER_ID (optional: fail if another cluster answers),
//      KAFKA_READY_VERBOSE=1 (print why it is not ready).
// Exit: 0 ready, 1 not ready (yet), 2 a different cluster answers on this port,
//       3 kafkajs cannot be loaded.
// Never hangs: hard deadline below.

// kafkajs is CommonJS: take the default export. Imported dynamically so that a
// missing `npm install` is reported at once (exit 3) instead of looking like a
// broker that never becomes ready.
let kafkajs;
try {
  kafkajs = (await import("kafkajs")).default;
} catch (err) {
  console.error(`ready: cannot load kafkajs (run npm install at the repo root): ${err?.message ?? err}`);
  process.exit(3);
}
const { Kafka, logLevel } = kafkajs;
const host = process.env.KAFKA_HOST || "127.0.0.1";
const port = process.env.KAFKA_PORT || "9092";
const expectId = process.env.KAFKA_EXPECT_CLUSTER_ID || "";
const verbose = process.env.KAFKA_READY_VERBOSE === "1";

const deadline = setTimeout(() => {
  if (verbose) console.error(`ready: no answer from ${host}:${port} within 5s`);
  process.exit(1);
}, 5000);

const kafka = new Kafka({
  clientId: "shoal-kafka-ready",
  brokers: [`${host}:${port}`],
  connectionTimeout: 1000,
  requestTimeout: 3000,
  retry: { retries: 0 }, // the caller polls; one quick attempt per call
  logLevel: logLevel.NOTHING,
});
const admin = kafka.admin();

let code = 1;
try {
  await admin.connect();
  const cluster = await admin.describeCluster();
  if (cluster.brokers.length === 0) {
    if (verbose) console.error("ready: broker answers but lists no brokers yet");
  } else if (expectId && cluster.clusterId !== expectId) {
    console.error(`ready: ${host}:${port} belongs to cluster ${cluster.clusterId}, expected ${expectId} (another broker on this port?)`);
    code = 2;
  } else {
    // Also ask for a group coordinator. On a fresh data dir this makes the
    // broker create __consumer_offsets now (the first FindCoordinator answers
    // COORDINATOR_NOT_AVAILABLE while it does), so the
    // first real consumer group joins at once instead of logging errors.
    // Retry here briefly rather than in a fresh node process per poll.
    for (let i = 0; ; i++) {
      try {
        await admin.describeGroups(["shoal-kafka-ready-probe"]);
        break;
      } catch (err) {
        if (i >= 25) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    code = 0;
  }
} catch (err) {
  if (verbose) console.error(`ready: ${err?.message ?? err}`);
} finally {
  await admin.disconnect().catch(() => {});
}
clearTimeout(deadline);
process.exit(code);
