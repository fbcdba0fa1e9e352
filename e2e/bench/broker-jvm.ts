/**
 * `npm run bench:broker-jvm` — what the broker JVM's collector and JIT settings cost per record
 * (issue #17: the broker is the largest share of the path's CPU on these 2-core machines).
 *
 * One scratch broker per setting (`KAFKA_GC_OPTS` of infra/kafka/kafka.sh), all running at once,
 * each with a share consumer of this process that fetches as the worker's intake does (a waiting
 * fetch of 100 ms, each record accepted 3 ms after it came, acks held 100 ms) and an idempotent
 * producer. Each broker first gets a warm-up at the top rate. Then the idle background of every
 * broker is read over one window (all consumers attached, nothing produced), and phases take
 * turns, the order reversed every round: one record at a time to one broker at a fixed rate, its
 * /proc CPU charged per record. The table gives each setting's median round, and the ratio to the
 * first setting (the default).
 *
 * Env: BENCH_JVM_SETTINGS (name=flags;name=flags, default below; `name=flags@key=value,key=value`
 * also gives that broker server properties, appended through `KAFKA_EXTRA_PROPERTIES`, e.g. its
 * thread counts), BENCH_RATES ("50,200"),
 * BENCH_SECONDS (15 per phase), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (60 per broker),
 * BENCH_IDLE_SECONDS (30), BENCH_BURN_THREADS (0; N > 0 runs every phase twice, alone and beside N
 * threads of this process spinning, as inference keeps the cores busy at bulk load), BENCH_BURN_KIND
 * (`spin`, the default: a loop that touches no memory; `memory`: each thread streams over 64 MiB of
 * its own, reading and writing every cache line, as a model's weights and activations pass through
 * the caches).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { stopKafkajsIdleLoop } from "@shoal/common";
import { createShareConsumer, type ShareConsumer } from "@shoal/kafka-share";
import { Kafka, logLevel, type Producer } from "kafkajs";
import { type ScratchBroker, startScratchBroker } from "../../infra/dev/broker.ts";
import { pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { consumeLikeIntake } from "./intake-pattern.ts";

const DEFAULT_SETTINGS = [
  "g1=-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent",
  "serial=-XX:+UseSerialGC",
  "parallel=-XX:+UseParallelGC -XX:ParallelGCThreads=2",
  "serial-c1=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
].join(";");
const SETTINGS = (process.env["BENCH_JVM_SETTINGS"] ?? DEFAULT_SETTINGS).split(";").map((s) => {
  const at = s.indexOf("=");
  const [flags, props] = s.slice(at + 1).split("@");
  return { name: s.slice(0, at), flags: flags!, properties: props === undefined ? [] : props.split(",").filter((p) => p.includes("=")) };
});
const RATES = (process.env["BENCH_RATES"] ?? "50,200").split(",").map(Number);
const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 15);
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3);
const WARMUP_SECONDS = Number(process.env["BENCH_WARMUP_SECONDS"] ?? 60);
const IDLE_SECONDS = Number(process.env["BENCH_IDLE_SECONDS"] ?? 30);
const BURN_THREADS = Number(process.env["BENCH_BURN_THREADS"] ?? 0);
const BURN_KIND = process.env["BENCH_BURN_KIND"] ?? "spin";
if (BURN_KIND !== "spin" && BURN_KIND !== "memory") throw new Error(`BENCH_BURN_KIND must be spin or memory, not ${BURN_KIND}`);
const BURN_LABEL = `${BURN_THREADS} busy threads${BURN_KIND === "memory" ? " (memory-bound)" : ""}`;
const VALUE = Buffer.alloc(1_024, 7);
const TOPIC = "jvm-bench";
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Arm {
  readonly name: string;
  readonly broker: ScratchBroker;
  readonly pid: number;
  readonly producer: Producer;
  readonly consumer: ShareConsumer;
  received: number;
}

async function startArm(name: string, flags: string, properties: readonly string[]): Promise<Arm> {
  process.env["KAFKA_GC_OPTS"] = flags;
  if (properties.length > 0) {
    const file = join(mkdtempSync(join(tmpdir(), "shoal-jvm-bench-")), "extra.properties");
    writeFileSync(file, `${properties.join("\n")}\n`);
    process.env["KAFKA_EXTRA_PROPERTIES"] = file;
  } else delete process.env["KAFKA_EXTRA_PROPERTIES"];
  const broker = await startScratchBroker();
  const pid = (await pidListeningOn(Number(broker.brokers.split(":")[1])))!;
  const kafka = new Kafka({ clientId: `jvm-bench-${name}`, brokers: [broker.brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const consumer = createShareConsumer({
    brokers: [broker.brokers],
    groupId: "g-jvm-bench",
    clientId: `jvm-bench-${name}`,
    groupConfig: { autoOffsetReset: "earliest" },
    ackLingerMs: 100,
  });
  await new Promise<void>((resolve) => {
    consumer.on("joined", () => resolve());
    consumer.subscribe([TOPIC]);
  });
  return { name, broker, pid, producer, consumer, received: 0 };
}

/** `rate` records/s to `arm` for `seconds`; the broker's CPU ms per record. */
async function phase(arm: Arm, rate: number, seconds: number): Promise<number> {
  const n = Math.round(rate * seconds);
  const r0 = arm.received;
  const b0 = await processCpuMs(arm.pid);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    await arm.producer.send({ topic: TOPIC, acks: -1, messages: [{ value: VALUE }] });
  }
  const deadline = performance.now() + 5_000;
  while ((arm.received - r0 < n || arm.consumer.metrics().sessions.some((s) => s.pendingAcks > 0)) && performance.now() < deadline) await sleep(20);
  return ((await processCpuMs(arm.pid)) - b0) / n;
}

const SPIN = "const { workerData } = require('node:worker_threads'); const flag = new Int32Array(workerData); while (Atomics.load(flag, 0) === 0) {}";
// 64 MiB per thread, more than the last-level cache; 8 doubles = one 64-byte line per step.
const STREAM =
  "const { workerData } = require('node:worker_threads'); const flag = new Int32Array(workerData); const a = new Float64Array(8 << 20); " +
  "while (Atomics.load(flag, 0) === 0) { for (let i = 0; i < a.length; i += 8) a[i] = a[i] + 1; }";

/** Runs `n` busy threads until the returned stop is called (the busy cores of a worker at bulk load). */
function burn(n: number): () => Promise<void> {
  const code = BURN_KIND === "memory" ? STREAM : SPIN;
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const threads = Array.from({ length: n }, () => new Worker(code, { eval: true, workerData: flag.buffer }));
  return async () => {
    Atomics.store(flag, 0, 1);
    await Promise.all(threads.map((t) => new Promise((r) => t.once("exit", r))));
  };
}

stopKafkajsIdleLoop();
const arms: Arm[] = [];
let running = true;
const loops: Promise<void>[] = [];
try {
  for (const s of SETTINGS) {
    log(`==> broker "${s.name}": ${s.flags}${s.properties.length > 0 ? `; ${s.properties.join(", ")}` : ""}`);
    const arm = await startArm(s.name, s.flags, s.properties);
    arms.push(arm);
    loops.push(consumeLikeIntake(arm, () => running));
  }
  const top = Math.max(...RATES);
  for (const arm of arms) {
    log(`==> warm-up of "${arm.name}": ${WARMUP_SECONDS} s at ${top} records/s`);
    await phase(arm, top, WARMUP_SECONDS);
  }
  log(`==> idle background: ${IDLE_SECONDS} s, every broker at once`);
  const i0 = await Promise.all(arms.map((a) => processCpuMs(a.pid)));
  await sleep(IDLE_SECONDS * 1000);
  const idle = (await Promise.all(arms.map((a) => processCpuMs(a.pid)))).map((c, i) => (c - i0[i]!) / IDLE_SECONDS);
  log(`   ${arms.map((a, i) => `${a.name} ${idle[i]!.toFixed(1)}`).join(", ")} CPU ms/s`);

  const perRecord = new Map<string, number[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? arms : [...arms].reverse();
    for (const rate of RATES)
      for (const arm of order)
        for (const threads of BURN_THREADS > 0 ? [0, BURN_THREADS] : [0]) {
          const stop = threads > 0 ? burn(threads) : undefined;
          const ms = await phase(arm, rate, SECONDS);
          await stop?.();
          const name = threads > 0 ? `${arm.name} + ${BURN_LABEL}` : arm.name;
          const key = `${name}@${rate}`;
          perRecord.set(key, [...(perRecord.get(key) ?? []), ms]);
          log(`   round ${round}, ${rate}/s, ${name}: broker ${ms.toFixed(3)} CPU ms per record`);
        }
  }
  const base = arms[0]!.name;
  const cell = (name: string, rate: number): string => {
    const m = median(perRecord.get(`${name}@${rate}`)!);
    return `${m.toFixed(3)} (${(m / median(perRecord.get(`${base}@${rate}`)!)).toFixed(2)}×)`;
  };
  console.log(`
Broker JVM settings, one share consumer each (acks held 100 ms); the median of ${ROUNDS} alternating rounds of ${SECONDS} s per rate
| setting | idle CPU ms/s | ${RATES.map((r) => `broker CPU ms per record at ${r}/s`).join(" | ")} |
| --- | ---: | ${RATES.map(() => "---:").join(" | ")} |
${arms
  .flatMap((a, i) => [
    `| ${a.name} | ${idle[i]!.toFixed(1)} | ${RATES.map((r) => cell(a.name, r)).join(" | ")} |`,
    ...(BURN_THREADS > 0 ? [`| ${a.name} + ${BURN_LABEL} | | ${RATES.map((r) => cell(`${a.name} + ${BURN_LABEL}`, r)).join(" | ")} |`] : []),
  ])
  .join("\n")}
`);
} finally {
  running = false;
  await Promise.all(loops);
  for (const arm of arms) {
    await arm.consumer.close();
    await arm.producer.disconnect();
    await arm.broker.stop();
  }
}
