/**
 * `npm run bench:residency` — the worker's model residency policies on a skewed stream, measured
 * in one run on this machine:
 *  - a seeded stream of requests over 20 catalog models, Zipf s=1.1 (model rank k asked with
 *    probability ∝ 1/k^1.1), arriving open-loop at a fixed rate, each one short text;
 *  - a residency budget for 5 of them; each model is a REAL onnxruntime-node inference thread set opened
 *    from the generated `tiny` model directory (all 20 ids share the directory, each load opens its
 *    own thread and session; unloading closes it);
 *  - the same stream replayed under `lru`, then `pinned-by-traffic`: cold loads per 1,000 requests,
 *    p50/p99 latency from arrival to inference done (lease wait + inference), thrash events;
 *  - computed offline on the same sequence: the Belady/MIN optimum (the fewest cold loads any
 *    eviction policy can get, knowing the future), plus the manager itself replayed with instant
 *    loads (no timing effects) on it and on a 20,000-request stream of the same distribution.
 * Prints figures and ratios; asserts nothing.
 *
 * A load costs 0.3–0.45 s (thread start, ONNX Runtime session) and concurrent loads nearly
 * serialize on 2 cores (~2.2 loads/s at most), so the default rate keeps LRU's ~1.3 loads/s within
 * reach; from ~4 requests/s LRU saturates the machine with loads and its latency runs away.
 *
 * With 120 requests p99 is the 2nd-slowest request: it moves by ±50% from run to run (a GC pause,
 * two loads overlapping); cold loads per 1,000 are stable (the offline replay of the same
 * sequence lands within a few percent of the live figure). Raise BENCH_REQUESTS for a steadier p99.
 *
 * Env: BENCH_RATE (requests/s, 3), BENCH_REQUESTS (per policy, 120), BENCH_SEED (11),
 * BENCH_HALF_LIFE_MS / BENCH_HOT_THRESHOLD / BENCH_BUSY_WAIT_MS (pinned-by-traffic tuning; default:
 * the manager's defaults).
 */
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel, mulberry32 } from "@shoal/models";
import { createInferenceThreads, type InferenceThreads } from "@shoal/worker/runtime/inference-threads";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { systemClock } from "../../services/worker/src/batching/clock.ts";
import { ManualClock } from "../../services/worker/src/batching/manual-clock.ts";
import { DEFAULT_TRAFFIC, Residency, type ResidencyPolicy, type TrafficOptions } from "../../services/worker/src/residency/residency.ts";
import { percentile, textOfTokens } from "./workload.ts";

const MODELS = 20;
const RESIDENT = 5;
const ZIPF_S = 1.1;
const RATE = Number(process.env["BENCH_RATE"] ?? 3);
const REQUESTS = Number(process.env["BENCH_REQUESTS"] ?? 120);
const SEED = Number(process.env["BENCH_SEED"] ?? 11);
const LONG_STREAM = 20_000;
const TRAFFIC: TrafficOptions = {
  halfLifeMs: Number(process.env["BENCH_HALF_LIFE_MS"] ?? DEFAULT_TRAFFIC.halfLifeMs),
  hotThreshold: Number(process.env["BENCH_HOT_THRESHOLD"] ?? DEFAULT_TRAFFIC.hotThreshold),
};
const BUSY_WAIT_MS = process.env["BENCH_BUSY_WAIT_MS"] === undefined ? undefined : Number(process.env["BENCH_BUSY_WAIT_MS"]);
const POLICIES: readonly ResidencyPolicy[] = ["lru", "pinned-by-traffic"];

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const modelId = (rank: number): string => `zipf-${String(rank + 1).padStart(2, "0")}`;

/** Model ranks (0 = most popular) drawn from Zipf(ZIPF_S) over MODELS models. */
function zipfStream(count: number, seed: number): number[] {
  const weights = Array.from({ length: MODELS }, (_, k) => 1 / (k + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  const cdf: number[] = [];
  let acc = 0;
  for (const w of weights) {
    acc += w / total;
    cdf.push(acc);
  }
  const rand = mulberry32(seed);
  return Array.from({ length: count }, () => {
    const u = rand();
    const k = cdf.findIndex((c) => u < c);
    return k < 0 ? MODELS - 1 : k;
  });
}

/** Belady/MIN: on a miss with the cache full, evict the model asked for again furthest in the future. */
function beladyLoads(seq: readonly number[], capacity: number): number {
  const nextUse = new Array<number>(seq.length);
  const last = new Map<number, number>();
  for (let i = seq.length - 1; i >= 0; i--) {
    nextUse[i] = last.get(seq[i]!) ?? Infinity;
    last.set(seq[i]!, i);
  }
  const cached = new Map<number, number>(); // model -> its next use
  let loads = 0;
  seq.forEach((m, i) => {
    if (!cached.has(m)) {
      loads += 1;
      if (cached.size >= capacity) {
        let victim = -1;
        let furthest = -1;
        for (const [c, next] of cached) {
          if (next > furthest) {
            furthest = next;
            victim = c;
          }
        }
        cached.delete(victim);
      }
    }
    cached.set(m, nextUse[i]!);
  });
  return loads;
}

/** The residency manager itself on the sequence, with instant loads: cold loads only, no timing. */
async function replayInstant(seq: readonly number[], policy: ResidencyPolicy): Promise<number> {
  const clock = new ManualClock();
  const res = new Residency<number>({
    budgetBytes: RESIDENT,
    policy,
    sizeOf: () => 1,
    load: async () => 1,
    unload: async () => {},
    clock,
    traffic: TRAFFIC,
  });
  for (const rank of seq) {
    clock.advance(1000 / RATE);
    const model = modelId(rank);
    (res.tryAcquire(model) ?? (await res.acquire(model))).release();
  }
  return res.snapshot().reduce((n, i) => n + i.loadCount, 0);
}

interface LiveResult {
  readonly coldLoads: number;
  readonly latencies: number[];
  readonly thrash: number;
  readonly evictions: number;
  readonly coldStartMs: number[];
  readonly maxUsedBytes: number;
  readonly errors: number;
  readonly seconds: number;
  readonly hot: string[];
}

const per1000 = (loads: number, requests: number): number => (loads / requests) * 1000;

log(`==> model: generated tiny preset`);
const spec = await readModelDir(await ensureModel("tiny"));
const tokenizer = await createTextTokenizer(spec);
const modelBytes = spec.memoryBytes ?? 50 * 2 ** 20;
const budgetBytes = RESIDENT * modelBytes;
const textRand = mulberry32(SEED ^ 0x5eed);
const texts = Array.from({ length: 64 }, () => {
  const t = textOfTokens(tokenizer, 8 + Math.floor(textRand() * 25), textRand);
  return tokenizer.encode(t.text, { truncate: true }).ids;
});
const seq = zipfStream(REQUESTS, SEED);
const requestText = seq.map(() => texts[Math.floor(textRand() * texts.length)]!);
const distinct = new Set(seq).size;
log(
  `workload: ${REQUESTS} requests at ${RATE}/s (${(REQUESTS / RATE).toFixed(0)} s per policy), Zipf s=${ZIPF_S} over ${MODELS} models ` +
    `(${distinct} asked for), budget ${budgetBytes} bytes = ${RESIDENT} × ${modelBytes}, seed ${SEED}`,
);

async function openThreads(): Promise<InferenceThreads> {
  return createInferenceThreads({ spec, intraOpThreads: 1, threads: 1 });
}

log("==> warm-up: one load, run and close (so the first policy does not pay for module loading)");
{
  const threads = await openThreads();
  await threads.run([{ ids: [texts[0]!] }]);
  await threads.close();
}

async function live(policy: ResidencyPolicy): Promise<LiveResult> {
  let coldLoads = 0;
  let evictions = 0;
  let maxUsedBytes = 0;
  const coldStartMs: number[] = [];
  const res: Residency<InferenceThreads> = new Residency<InferenceThreads>({
    budgetBytes,
    policy,
    sizeOf: () => modelBytes,
    load: () => openThreads(),
    unload: (_model, threads) => threads.close(),
    clock: systemClock,
    traffic: TRAFFIC,
    ...(BUSY_WAIT_MS === undefined ? {} : { busyVictimWaitMs: BUSY_WAIT_MS }),
    onEvent: (e) => {
      if (e.type === "loaded") {
        coldLoads += 1;
        coldStartMs.push(e.coldStartMs);
      } else if (e.type === "evicted" && e.reason === "room") evictions += 1;
      else if (e.type === "load-failed") log(`   load of ${e.model} failed: ${e.error.message}`);
      maxUsedBytes = Math.max(maxUsedBytes, res.usedBytes);
    },
  });
  const interval = 1000 / RATE;
  const latencies: number[] = [];
  let errors = 0;
  let issued = 0;
  const start = performance.now() + 100;
  const serve = async (i: number, arrival: number): Promise<void> => {
    const model = modelId(seq[i]!);
    try {
      const lease = res.tryAcquire(model) ?? (await res.acquire(model));
      try {
        await lease.resource.run([{ ids: [requestText[i]!] }]);
      } finally {
        lease.release();
      }
      latencies.push(performance.now() - arrival);
    } catch (err) {
      errors += 1;
      if (errors <= 3) log(`   request ${i} (${model}) failed: ${(err as Error).message}`);
    }
  };
  const progress = setInterval(() => {
    const s = (performance.now() - start) / 1000;
    const resident = res.snapshot().filter((m) => m.state === "resident").length;
    log(
      `   ${policy} ${s.toFixed(0)}s: ${latencies.length}/${issued} requests answered, ${coldLoads} cold loads, ` +
        `${resident} resident, p99 so far ${percentile(latencies, 99).toFixed(0)} ms`,
    );
  }, 5_000);
  await new Promise<void>((resolveAll) => {
    let done = 0;
    const fire = (): void => {
      const now = performance.now();
      while (issued < REQUESTS && start + issued * interval <= now) {
        const i = issued++;
        void serve(i, start + i * interval).then(() => {
          if (++done === REQUESTS) resolveAll();
        });
      }
      if (issued < REQUESTS) setTimeout(fire, Math.max(0, start + issued * interval - performance.now()));
    };
    setTimeout(fire, Math.max(0, start - performance.now()));
  });
  clearInterval(progress);
  const seconds = (performance.now() - start) / 1000;
  const hot = res
    .snapshot()
    .filter((m) => m.pinnedBy === "traffic")
    .map((m) => m.model);
  const thrash = res.thrashEvents;
  await res.close();
  return { coldLoads, latencies, thrash, evictions, coldStartMs, maxUsedBytes, errors, seconds, hot };
}

const results = new Map<ResidencyPolicy, LiveResult>();
for (const policy of POLICIES) {
  log(`==> ${policy}: replaying the stream live`);
  const r = await live(policy);
  results.set(policy, r);
  log(
    `   ${policy} done in ${r.seconds.toFixed(1)} s: ${r.coldLoads} cold loads, p99 ${percentile(r.latencies, 99).toFixed(0)} ms, ` +
      `${r.thrash} thrash events${r.errors > 0 ? `, ${r.errors} errors` : ""}`,
  );
}

log("==> offline: Belady/MIN and instant-load replays");
const longSeq = zipfStream(LONG_STREAM, SEED + 1);
const offline = {
  beladySame: beladyLoads(seq, RESIDENT),
  beladyLong: beladyLoads(longSeq, RESIDENT),
  instantSame: new Map<ResidencyPolicy, number>(),
  instantLong: new Map<ResidencyPolicy, number>(),
};
for (const p of POLICIES) {
  offline.instantSame.set(p, await replayInstant(seq, p));
  offline.instantLong.set(p, await replayInstant(longSeq, p));
}

const lru = results.get("lru")!;
const pin = results.get("pinned-by-traffic")!;
const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const row = (k: string, a: string, b: string, r: string): string => `| ${k.padEnd(62)} | ${a.padStart(9)} | ${b.padStart(17)} | ${r.padStart(12)} |`;
const ordinal = (n: number): string => `${n}${n % 100 >= 11 && n % 100 <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th")}`;
const ratio = (a: number, b: number): string => (b === 0 ? "n/a" : (a / b).toFixed(3));
const lruLoads = per1000(lru.coldLoads, REQUESTS);
const pinLoads = per1000(pin.coldLoads, REQUESTS);
const lruP99 = percentile(lru.latencies, 99);
const pinP99 = percentile(pin.latencies, 99);
const minSame = per1000(offline.beladySame, REQUESTS);
const minLong = per1000(offline.beladyLong, LONG_STREAM);
const instSame = (p: ResidencyPolicy): number => per1000(offline.instantSame.get(p)!, REQUESTS);
const instLong = (p: ResidencyPolicy): number => per1000(offline.instantLong.get(p)!, LONG_STREAM);

console.log(`
Shoal residency benchmark — Zipf s=${ZIPF_S} over ${MODELS} models, budget for ${RESIDENT}, ${REQUESTS} requests at ${RATE}/s open loop (seed ${SEED})
each model: tiny preset, 1 thread × 1 intra-op thread; pinned-by-traffic half-life ${TRAFFIC.halfLifeMs} ms, hot ≥ ${TRAFFIC.hotThreshold}
${row("figure", "lru", "pinned-by-traffic", "pinned / lru")}
${row("LIVE: cold loads per 1,000 requests", f1(lruLoads), f1(pinLoads), ratio(pinLoads, lruLoads))}
${row("LIVE: p50 latency ms (arrival → inference done)", f1(percentile(lru.latencies, 50)), f1(percentile(pin.latencies, 50)), ratio(percentile(pin.latencies, 50), percentile(lru.latencies, 50)))}
${row("LIVE: p95 latency ms", f1(percentile(lru.latencies, 95)), f1(percentile(pin.latencies, 95)), ratio(percentile(pin.latencies, 95), percentile(lru.latencies, 95)))}
${row(`LIVE: p99 latency ms (${ordinal(REQUESTS - Math.ceil(0.99 * REQUESTS) + 1)} slowest request)`, f1(lruP99), f1(pinP99), ratio(pinP99, lruP99))}
${row("LIVE: thrash events (reload < 30 s after eviction)", String(lru.thrash), String(pin.thrash), ratio(pin.thrash, lru.thrash))}
${row("LIVE: evictions", String(lru.evictions), String(pin.evictions), ratio(pin.evictions, lru.evictions))}
${row("LIVE: mean cold start ms (load = new thread + session)", f1(mean(lru.coldStartMs)), f1(mean(pin.coldStartMs)), ratio(mean(pin.coldStartMs), mean(lru.coldStartMs)))}
${row("LIVE: requests failed", String(lru.errors), String(pin.errors), "")}
${row("LIVE: peak bytes reserved / budget", f2(lru.maxUsedBytes / budgetBytes), f2(pin.maxUsedBytes / budgetBytes), "")}
${row("offline, same sequence, instant loads: cold loads / 1,000", f1(instSame("lru")), f1(instSame("pinned-by-traffic")), ratio(instSame("pinned-by-traffic"), instSame("lru")))}
${row("offline, same sequence: Belady/MIN optimum cold loads / 1,000", f1(minSame), f1(minSame), `${ratio(minSame, instSame("lru"))} (MIN)`)}
${row(`offline, ${LONG_STREAM} requests, instant loads: cold loads / 1,000`, f1(instLong("lru")), f1(instLong("pinned-by-traffic")), ratio(instLong("pinned-by-traffic"), instLong("lru")))}
${row(`offline, ${LONG_STREAM} requests: Belady/MIN cold loads / 1,000`, f1(minLong), f1(minLong), `${ratio(minLong, instLong("lru"))} (MIN)`)}
models hot at the end (pinned-by-traffic): ${pin.hot.join(", ") || "none"}

goal "pinned-by-traffic cuts cold loads by >= 50% vs LRU, p99 no worse":
  live cold loads: pinned / lru = ${ratio(pinLoads, lruLoads)} (goal <= 0.5); p99: pinned / lru = ${ratio(pinP99, lruP99)} (goal <= 1)
  bound: no eviction policy can go below Belady/MIN = ${ratio(minSame, lruLoads)} of live LRU on this sequence (${ratio(minLong, instLong("lru"))} of LRU on the long stream)
`);
