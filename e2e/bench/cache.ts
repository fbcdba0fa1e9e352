/**
 * `npm run bench:cache` — the embedding cache on a re-index workload (issue #50): a corpus of
 * chunks of which 30% repeat earlier ones is embedded, then the same corpus again with 10% of its
 * chunks changed, as an indexer does when a document set is re-indexed. The same workload goes
 * through a gateway without the cache and one with it (both in front of the same worker, one run,
 * that order); prints each pass's throughput, the ratios, the cache's counters, and how the
 * vectors compare (max |difference| and bit-identical share).
 *
 * Env: BENCH_CHUNKS (2000 per pass), BENCH_BATCH (32 chunks per call), BENCH_CONCURRENCY (4 calls
 * at once), BENCH_MODEL (`all-minilm-l6-v2`, a Maven embedder id, or `tiny`), BENCH_SEED (1).
 * Starts its own broker unless KAFKA_BROKERS is set.
 */
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ensureMavenModel, ensureModel, mulberry32 } from "@shoal/models";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape, total } from "../harness/prometheus.ts";
import { benchBroker } from "./bench-broker.ts";

const CHUNKS = Number(process.env["BENCH_CHUNKS"] ?? 2000);
const BATCH = Number(process.env["BENCH_BATCH"] ?? 32);
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 4);
const MODEL = process.env["BENCH_MODEL"] ?? "all-minilm-l6-v2";
const SEED = Number(process.env["BENCH_SEED"] ?? 1);
const REPEATED = 0.3;
const CHANGED = 0.1;
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

const WORDS = (
  "shoal kafka queue worker gateway vector index search query document chunk model token batch lane " +
  "river ocean fish school turn light signal answer cluster share group record offset commit revision " +
  "the a of and to in is that for on with as by at from it this be are was an or which"
).split(" ");

/** The two passes' corpora: the first with REPEATED of its chunks copies of earlier ones, the second with CHANGED of them rewritten. */
function corpora(n: number, seed: number): { first: string[]; second: string[] } {
  const rand = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const sentence = (tag: string): string => `${tag} ${Array.from({ length: 20 + Math.floor(rand() * 40) }, () => pick(WORDS)).join(" ")}.`;
  const first: string[] = [];
  for (let i = 0; i < n; i++) first.push(i > 0 && rand() < REPEATED ? pick(first) : sentence(`§${i}`));
  const second = first.map((text, i) => (rand() < CHANGED ? sentence(`§${i} (revised)`) : text));
  return { first, second };
}

/** Embeds `texts` in calls of BATCH, CONCURRENCY at once; the vectors in order. */
async function embedAll(client: ReturnType<typeof clientsFor>, model: string, texts: readonly string[]): Promise<Float32Array[]> {
  const out: Float32Array[] = new Array(texts.length);
  let next = 0;
  async function lane(): Promise<void> {
    while (next < texts.length) {
      const at = next;
      next += BATCH;
      const res = await client.inference.embed(
        { model, inputs: texts.slice(at, at + BATCH), options: { encoding: VectorEncoding.FLOAT32_LE } },
        { timeoutMs: 300_000 },
      );
      for (const [k, e] of res.embeddings.entries()) {
        const bytes = new Uint8Array(e.float32Le);
        out[at + k] = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
      }
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return out;
}

interface Arm {
  readonly name: string;
  readonly passSeconds: [number, number];
  readonly vectors: [Float32Array[], Float32Array[]];
}

async function runArm(name: string, client: ReturnType<typeof clientsFor>, model: string, passes: readonly [string[], string[]]): Promise<Arm> {
  const seconds: number[] = [];
  const vectors: Float32Array[][] = [];
  for (const [i, texts] of passes.entries()) {
    const t0 = performance.now();
    vectors.push(await embedAll(client, model, texts));
    seconds.push((performance.now() - t0) / 1000);
    log(`${name}: pass ${i + 1} — ${texts.length} chunks in ${seconds[i]!.toFixed(2)} s (${(texts.length / seconds[i]!).toFixed(0)} chunks/s)`);
  }
  return { name, passSeconds: [seconds[0]!, seconds[1]!], vectors: [vectors[0]!, vectors[1]!] };
}

/** Largest |a − b| over all vectors, and how many vectors are bit for bit the same. */
function compare(a: readonly Float32Array[], b: readonly Float32Array[]): { maxDiff: number; identical: number } {
  let maxDiff = 0;
  let identical = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    let same = x.length === y.length;
    for (let k = 0; k < x.length; k++) {
      const d = Math.abs(x[k]! - y[k]!);
      if (d > maxDiff) maxDiff = d;
      if (x[k] !== y[k]) same = false;
    }
    if (same) identical++;
  }
  return { maxDiff, identical };
}

let cluster: TestCluster | undefined;
const broker = await benchBroker(log, () => cluster);
try {
  const dir = MODEL === "tiny" ? await ensureModel("tiny") : await ensureMavenModel(MODEL);
  cluster = await startCluster({
    presets: [],
    modelDirs: [dir],
    gateways: 2,
    workers: 1,
    // Gateway 0 with the cache (the product's default size), gateway 1 without.
    gatewayEnvAt: (i): Record<string, string> => (i === 0 ? { SHOAL_EMBED_CACHE_BYTES: "256MiB" } : {}),
    workerEnv: { SHOAL_INFERENCE_THREADS: "2" },
  });
  const model = cluster.modelIds[0]!;
  const [withCache, without] = [clientsFor(cluster.urls[0]!, "connect"), clientsFor(cluster.urls[1]!, "connect")];
  const { first, second } = corpora(CHUNKS, SEED);
  const distinct = (xs: readonly string[]): number => new Set(xs).size;
  log(
    `model ${model}; ${CHUNKS} chunks per pass (${distinct(first)} distinct in pass 1; ${second.filter((t, i) => t !== first[i]).length} changed in pass 2), ${BATCH} per call, ${CONCURRENCY} calls at once`,
  );
  // Loads the model on the worker before anything is timed.
  for (const c of [without, withCache]) await embedAll(c, model, ["warm-up text one", "warm-up text two"]);
  const off = await runArm("cache off", without, model, [first, second]);
  const on = await runArm("cache on ", withCache, model, [first, second]);
  const metrics = await scrape(`${cluster.urls[0]!}/metrics`);
  const count = (what: string): number => total(metrics, `shoal_gateway_embed_cache_${what}`);

  const rate = (arm: Arm, pass: 0 | 1): number => CHUNKS / arm.passSeconds[pass];
  const both = (arm: Arm): number => (2 * CHUNKS) / (arm.passSeconds[0] + arm.passSeconds[1]);
  const rows = [
    ["pass 1 (30% repeats)", rate(off, 0), rate(on, 0)],
    ["pass 2 (10% changed)", rate(off, 1), rate(on, 1)],
    ["both passes", both(off), both(on)],
  ] as const;
  console.log("\nthroughput, chunks/s        cache off   cache on   ratio");
  for (const [label, a, b] of rows)
    console.log(`${label.padEnd(26)} ${a.toFixed(0).padStart(9)} ${b.toFixed(0).padStart(10)} ${(b / a).toFixed(2).padStart(7)}x`);
  const c1 = compare(off.vectors[0], on.vectors[0]);
  const c2 = compare(off.vectors[1], on.vectors[1]);
  console.log(
    `\nvectors, cache on vs off: max |difference| ${Math.max(c1.maxDiff, c2.maxDiff).toExponential(2)}; bit-identical ${c1.identical + c2.identical} of ${2 * CHUNKS}`,
  );
  console.log(
    `cache counters (texts): hits ${count("hits_total")}, misses ${count("misses_total")}, in-flight joins ${count("inflight_joins_total")}, evictions ${count("evictions_total")}; ${(count("bytes") / 2 ** 20).toFixed(1)} MiB in ${count("entries")} entries`,
  );
} finally {
  await cluster?.stop();
  await broker?.stop();
}
