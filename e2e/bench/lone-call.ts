/**
 * `npm run bench:lone-call` — where a lone call's time goes, hop by hop, with the worker idle
 * (issues #16, #17): on each intake (share group over one topic per lane, share group with a queue
 * per model, consumer group), N calls are sent one at a time with the worker idle between them, and
 * the broker's request log (kafka.request.logger at DEBUG, `request-log.ts`) says when each
 * Kafka request of the path arrived and completed: the gateway's job Produce, the intake's fetch
 * that brought the job (and whether it was already waiting at the broker when the job arrived),
 * the worker's result Produce, the gateway's reply Fetch, and the acknowledgement (or offset commit)
 * of the job. The worker's debug log says when the job's batch started. Prints median/p90 per hop,
 * and the intake's requests: per second while idle, per call under lone calls.
 *
 * Env: BENCH_CALLS (30 per arm), BENCH_GAP_MS (400: idle time between calls), BENCH_IDLE_SECONDS
 * (5), BENCH_ARMS (share,share-model,group), BENCH_WORKERS (1), BENCH_MODELS (3 model ids, at most
 * 9: the calls go to them in turn), SHOAL_SHARE_IDLE_WAIT_MS (passed to the workers).
 * Starts its own broker.
 */
import { writeFile } from "node:fs/promises";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ensureModel } from "@shoal/models";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { parseCompleted, startRequestLoggedBroker, type Completed } from "./request-log.ts";

const CALLS = Number(process.env["BENCH_CALLS"] ?? 30);
const GAP_MS = Number(process.env["BENCH_GAP_MS"] ?? 400);
const IDLE_SECONDS = Number(process.env["BENCH_IDLE_SECONDS"] ?? 5);
const ARMS = (process.env["BENCH_ARMS"] ?? "share,share-model,group").split(",");
const WORKERS = Number(process.env["BENCH_WORKERS"] ?? 1);
const MODELS = ["m-a", "m-b", "m-c", "m-d", "m-e", "m-f", "m-g", "m-h", "m-i"].slice(0, Number(process.env["BENCH_MODELS"] ?? 3));
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Call {
  readonly sentMs: number;
  readonly answeredMs: number;
  /** Gateway receipt to reply, from the answer's timing. */
  readonly gatewayTotalMs: number;
  readonly inferenceMs: number;
}

/** Per-hop times of one call (ms), or why it could not be read. */
interface Hops {
  readonly hops: Record<string, number>;
  /** The fetch that brought the job was at the broker before the job arrived. */
  readonly waiting: boolean;
}

const HOPS = [
  "client → job Produce arrives",
  "job Produce (broker)",
  "job stored → fetch answered",
  "fetch answered → batch start",
  "batch start → result Produce arrives",
  "result Produce (broker)",
  "result stored → reply Fetch answered",
  "reply Fetch → client",
  "total (client)",
  "result stored → job acknowledged",
] as const;

const topicsOf = (e: Completed): string[] => {
  const r = e.request as { topicData?: Array<{ name?: string }>; topics?: Array<{ topic?: string }> };
  return [...(r.topicData ?? []).map((t) => t.name ?? ""), ...(r.topics ?? []).map((t) => t.topic ?? "")];
};
const arrivedMs = (e: Completed): number => e.atMs - e.totalMs;

/** Offsets a share fetch or acknowledgement acknowledged (type accept), from its request. */
function ackedOffsets(e: Completed): bigint[] {
  const r = e.request as { topics?: Array<{ partitions?: Array<{ acknowledgementBatches?: Array<{ firstOffset: number; lastOffset: number }> }> }> };
  const out: bigint[] = [];
  for (const t of r.topics ?? [])
    for (const p of t.partitions ?? [])
      for (const b of p.acknowledgementBatches ?? []) for (let o = BigInt(b.firstOffset); o <= BigInt(b.lastOffset); o++) out.push(o);
  return out;
}

/** Offsets a share fetch acquired, from its response. */
function acquiredOffsets(e: Completed): bigint[] {
  const r = e.response as { responses?: Array<{ partitions?: Array<{ acquiredRecords?: Array<{ firstOffset: number; lastOffset: number }> }> }> };
  const out: bigint[] = [];
  for (const t of r.responses ?? [])
    for (const p of t.partitions ?? [])
      for (const a of p.acquiredRecords ?? []) for (let o = BigInt(a.firstOffset); o <= BigInt(a.lastOffset); o++) out.push(o);
  return out;
}

/** Bytes of records a (kafkajs) Fetch response carried for `topic`. */
function fetchedBytes(e: Completed, topic: (name: string) => boolean): number {
  const r = e.response as { responses?: Array<{ topic?: string; partitions?: Array<{ recordsSizeInBytes?: number }> }> };
  let n = 0;
  for (const t of r.responses ?? []) if (topic(t.topic ?? "")) for (const p of t.partitions ?? []) n += p.recordsSizeInBytes ?? 0;
  return n;
}

function hopsOf(call: Call, entries: readonly Completed[], batchStarts: readonly number[], share: boolean): Hops | string {
  const within = entries.filter((e) => e.atMs >= call.sentMs - 1 && e.atMs <= call.sentMs + GAP_MS);
  const jobProduce = within.find((e) => e.api === "PRODUCE" && e.role === "gateway" && topicsOf(e).some((t) => t.startsWith("shoal.jobs.")));
  if (!jobProduce) return "no job Produce";
  const offset = BigInt(
    (jobProduce.response as { responses: Array<{ partitionResponses: Array<{ baseOffset: number }> }> }).responses[0]!.partitionResponses[0]!.baseOffset,
  );
  const fetch = within.find((e) =>
    share
      ? e.api === "SHARE_FETCH" && e.role === "worker" && acquiredOffsets(e).includes(offset)
      : e.api === "FETCH" && e.role === "worker" && fetchedBytes(e, (t) => t.startsWith("shoal.jobs.")) > 0,
  );
  if (!fetch) return "no fetch with the job";
  const result = within.find(
    (e) => e.api === "PRODUCE" && e.role === "worker" && e.atMs >= fetch.atMs && topicsOf(e).some((t) => t.startsWith("shoal.replies.")),
  );
  if (!result) return "no result Produce";
  const reply = within.find(
    (e) => e.api === "FETCH" && e.role === "gateway" && e.atMs >= result.atMs && fetchedBytes(e, (t) => t.startsWith("shoal.replies.")) > 0,
  );
  if (!reply) return "no reply Fetch";
  const ack = entries.find((e) =>
    share
      ? (e.api === "SHARE_ACKNOWLEDGE" || e.api === "SHARE_FETCH") && e.role === "worker" && e.atMs >= result.atMs && ackedOffsets(e).includes(offset)
      : e.api === "OFFSET_COMMIT" && e.role === "worker" && arrivedMs(e) >= result.atMs,
  );
  const batchStart = batchStarts.find((t) => t >= fetch.atMs - 2 && t <= arrivedMs(result) + 2) ?? Number.NaN;
  return {
    waiting: arrivedMs(fetch) < arrivedMs(jobProduce),
    hops: {
      [HOPS[0]]: arrivedMs(jobProduce) - call.sentMs,
      [HOPS[1]]: jobProduce.totalMs,
      [HOPS[2]]: fetch.atMs - jobProduce.atMs,
      [HOPS[3]]: batchStart - fetch.atMs,
      [HOPS[4]]: arrivedMs(result) - batchStart,
      [HOPS[5]]: result.totalMs,
      [HOPS[6]]: reply.atMs - result.atMs,
      [HOPS[7]]: call.answeredMs - reply.atMs,
      [HOPS[8]]: call.answeredMs - call.sentMs,
      // When the broker took the acknowledgement: a ShareFetch carrying it may then wait on.
      [HOPS[9]]: ack ? arrivedMs(ack) - result.atMs : Number.NaN,
    },
  };
}

function percentile(xs: readonly number[], p: number): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

async function armCluster(arm: string): Promise<TestCluster> {
  const dir = await ensureModel("tiny");
  const idleWait = process.env["SHOAL_SHARE_IDLE_WAIT_MS"];
  // The hops read here are Kafka's: results go through the reply topic (no direct replies), so the
  // result Produce and the reply Fetch are in the broker's request log.
  const workerEnv = { LOG_LEVEL: "debug", SHOAL_DIRECT_REPLY: "0", ...(idleWait ? { SHOAL_SHARE_IDLE_WAIT_MS: idleWait } : {}) };
  if (arm === "share-model")
    return startCluster({
      presets: [],
      entries: MODELS.map((id) => ({ dir, fields: { id } })),
      intake: "share",
      jobTopics: "per-model",
      workers: WORKERS,
      workerEnv,
    });
  if (arm === "share" || arm === "group")
    return startCluster({ presets: [], entries: MODELS.map((id) => ({ dir, fields: { id } })), intake: arm, workers: WORKERS, workerEnv });
  throw new Error(`unknown arm '${arm}' (share, share-model, group)`);
}

const broker = await startRequestLoggedBroker();
process.env["KAFKA_BROKERS"] = broker.broker.brokers;
const report: string[] = [];
try {
  for (const arm of ARMS) {
    log(`==> ${arm}`);
    const cluster = await armCluster(arm);
    const calls: Call[] = [];
    let idleFrom = 0;
    let idleTo = 0;
    try {
      const { inference } = clientsFor(cluster.urls[0]!, "connect");
      const embed = async (i: number): Promise<Call> => {
        const sentMs = Date.now();
        const res = await inference.embed(
          { model: MODELS[i % MODELS.length]!, inputs: [`a lone call ${i}`], options: { encoding: VectorEncoding.FLOAT32_LE } },
          { timeoutMs: 30_000 },
        );
        return { sentMs, answeredMs: Date.now(), gatewayTotalMs: res.timing?.totalMs ?? Number.NaN, inferenceMs: res.timing?.inferenceMs ?? Number.NaN };
      };
      for (let i = 0; i < 3 * MODELS.length; i++) await embed(i);
      await sleep(2_000);
      idleFrom = Date.now();
      await sleep(IDLE_SECONDS * 1000);
      idleTo = Date.now();
      for (let i = 0; i < CALLS; i++) {
        calls.push(await embed(i));
        await sleep(GAP_MS - (calls.at(-1)!.answeredMs - calls.at(-1)!.sentMs));
      }
      await sleep(1_000);
    } finally {
      await cluster.stop();
    }
    const entries = parseCompleted(await broker.read()).filter((e) => e.pool === cluster.pool);
    const dump = process.env["BENCH_DUMP"];
    if (dump) await writeFile(`${dump}-${arm}.json`, JSON.stringify({ calls, entries }));
    const batchStarts = cluster.workers
      .flatMap((w) => w.logs)
      .filter((l) => l.msg === "batch done" && typeof l["time"] === "string")
      .map((l) => Date.parse(l["time"] as string) - Number(l["ms"] ?? 0))
      .sort((a, b) => a - b);
    const share = arm !== "group";
    const read = calls.map((c) => hopsOf(c, entries, batchStarts, share));
    const ok = read.filter((h): h is Hops => typeof h !== "string");
    const problems = read.filter((h): h is string => typeof h === "string");
    report.push(`\n### ${arm}: ${ok.length} of ${calls.length} lone calls read${problems.length > 0 ? ` (unread: ${[...new Set(problems)].join(", ")})` : ""}`);
    const totals = calls.map((c) => c.answeredMs - c.sentMs);
    report.push(`\nevery call (read or not): median ${percentile(totals, 50).toFixed(0)} ms, p90 ${percentile(totals, 90).toFixed(0)} ms`);
    report.push(`\nfetch already waiting at the broker when the job arrived: ${ok.filter((h) => h.waiting).length} of ${ok.length}\n`);
    report.push("| hop | median ms | p90 ms |", "| --- | ---: | ---: |");
    for (const hop of HOPS) {
      const xs = ok.map((h) => h.hops[hop]!);
      report.push(`| ${hop} | ${percentile(xs, 50).toFixed(1)} | ${percentile(xs, 90).toFixed(1)} |`);
    }
    const worker = entries.filter((e) => e.role === "worker");
    const count = (from: number, to: number): Map<string, number> => {
      const m = new Map<string, number>();
      for (const e of worker) if (e.atMs >= from && e.atMs < to) m.set(e.api, (m.get(e.api) ?? 0) + 1);
      return m;
    };
    const idle = count(idleFrom, idleTo);
    const busy = count(calls[0]!.sentMs, calls.at(-1)!.sentMs + GAP_MS);
    const apis = [...new Set([...idle.keys(), ...busy.keys()])].sort();
    report.push("", "| worker requests | idle, per second | per lone call |", "| --- | ---: | ---: |");
    for (const api of apis)
      report.push(`| ${api} | ${((idle.get(api) ?? 0) / ((idleTo - idleFrom) / 1000)).toFixed(1)} | ${((busy.get(api) ?? 0) / calls.length).toFixed(2)} |`);
  }
  console.log(
    `\nLone calls, one every ${GAP_MS} ms (workers idle between them), ${CALLS} per arm, ${WORKERS} worker(s), ${MODELS.length} models; broker request log\n${report.join("\n")}`,
  );
} finally {
  await broker.stop();
}
