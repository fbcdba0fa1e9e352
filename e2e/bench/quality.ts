/**
 * `npm run bench:quality` — what the default reranker and classifier are worth (issue #48 item 4):
 * top-1 accuracy on Shoal's own small labelled set (e2e/bench/quality-set.json: 48 queries with
 * one relevant passage among four, 50 support tickets with gold intents), served by a real cluster
 * (gateway, Kafka, worker), for
 *  - the bi-encoder ranker and the zero-shot classifier over each embedder in BENCH_EMBEDDERS
 *    (default: bge-small-en-v1.5, the one `npm start` uses; any Maven embedder id works), with the
 *    default's labels and temperature (infra/dev/default-composites.ts);
 *  - the generated models they replace in the default fleet: `shoal-tiny-rerank`, and a generated
 *    classifier with the same five labels (tiny-classify's shape and seed; its own labels are
 *    sentiment, so it is rebuilt here with the set's labels to be scored at all).
 * Also the mean reciprocal rank for rerank and the mean score of the gold label for classify.
 * Prints figures; asserts nothing. Env: KAFKA_BROKERS (default: a scratch broker), BENCH_EMBEDDERS.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile } from "node:fs/promises";
import { cpus, hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { ensureMavenModel, getPreset, writeModelDir } from "@shoal/models";
import { DEFAULT_COMPOSITE_EMBEDDER, defaultComposites, SUPPORT_INTENT_LABELS } from "../../infra/dev/default-composites.ts";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { benchBroker } from "./bench-broker.ts";

interface QualitySet {
  readonly rerank: readonly { query: string; documents: string[]; relevant: number }[];
  readonly classify: readonly { text: string; label: string }[];
}

const EMBEDDERS = (process.env["BENCH_EMBEDDERS"] ?? DEFAULT_COMPOSITE_EMBEDDER).split(",").filter((e) => e !== "");
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const set = JSON.parse(await readFile(new URL("./quality-set.json", import.meta.url), "utf8")) as QualitySet;
const LABELS = Object.keys(SUPPORT_INTENT_LABELS);

const commit = ((): string => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
})();
console.log(`# bench:quality — top-1 accuracy of rerankers and classifiers on e2e/bench/quality-set.json`);
console.log(`# command: npm run bench:quality${process.env["BENCH_EMBEDDERS"] ? ` (BENCH_EMBEDDERS=${process.env["BENCH_EMBEDDERS"]})` : ""}`);
console.log(`# commit ${commit} (plus the working tree) · ${new Date().toISOString()} · host ${hostname()}, ${cpus().length}× ${cpus()[0]?.model ?? "?"}`);
console.log(`# set: ${set.rerank.length} rerank queries (1 relevant of 4 passages), ${set.classify.length} texts over ${LABELS.length} labels`);

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);

// One Maven fetch at a time (they race on ~/.m2).
const embedderDirs: string[] = [];
for (const e of EMBEDDERS) {
  log(`model ${e}…`);
  embedderDirs.push(await ensureMavenModel(e));
}
const genIntentDir = join(await mkdtemp(join(tmpdir(), "shoal-quality-")), "gen-intent");
const tinyClassify = getPreset("tiny-classify");
await writeModelDir({ ...tinyClassify, id: "shoal-tiny-intent", head: { task: "classify", labels: LABELS, problemType: "single_label" } }, genIntentDir);
const short = (e: string): string => e.replace(/-en-v1\.5/, "").replace(/-v2/, "");
// The default embedder's are `npm start`'s own entries; the others the same over another embedder.
const [defaultRanker, defaultIntent] = defaultComposites();
const rankerId = (e: string): string => (e === DEFAULT_COMPOSITE_EMBEDDER ? defaultRanker!.id : `${short(e)}-ranker`);
const intentId = (e: string): string => (e === DEFAULT_COMPOSITE_EMBEDDER ? defaultIntent!.id : `${short(e)}-intent`);
const composites = EMBEDDERS.flatMap((e) =>
  e === DEFAULT_COMPOSITE_EMBEDDER
    ? defaultComposites()
    : [
        { id: rankerId(e), biEncoder: { embedder: e } },
        { id: intentId(e), zeroShot: { embedder: e, temperature: 0.05, labels: SUPPORT_INTENT_LABELS } },
      ],
);

log("cluster: a gateway and a worker over a scratch broker…");
current = await startCluster({ presets: ["tiny-rerank"], modelDirs: [...embedderDirs, genIntentDir], composites });
const api = clientsFor(current.urls[0]!, "connect");
const opts = { timeoutMs: 180_000 };

interface Row {
  readonly model: string;
  readonly kind: string;
  readonly top1: number;
  readonly extra: string;
}
const rows: Row[] = [];

async function rerankAccuracy(model: string, kind: string): Promise<void> {
  let hits = 0;
  let rr = 0;
  for (const [i, q] of set.rerank.entries()) {
    const res = await api.inference.rerank({ model, query: q.query, documents: q.documents }, opts);
    const rank = res.results.findIndex((r) => r.index === q.relevant);
    if (rank === 0) hits += 1;
    rr += 1 / (rank + 1);
    if ((i + 1) % 16 === 0) log(`  ${model}: ${i + 1}/${set.rerank.length} queries, top-1 so far ${hits}/${i + 1}`);
  }
  rows.push({ model, kind, top1: hits / set.rerank.length, extra: `MRR ${(rr / set.rerank.length).toFixed(3)}` });
}

async function classifyAccuracy(model: string, kind: string): Promise<void> {
  let hits = 0;
  let goldScore = 0;
  const wrong = new Map<string, number>();
  for (let start = 0; start < set.classify.length; start += 10) {
    const chunk = set.classify.slice(start, start + 10);
    const res = await api.inference.classify({ model, inputs: chunk.map((c) => c.text) }, opts);
    res.classifications.forEach((c, k) => {
      const gold = chunk[k]!.label;
      if (c.labels[0]?.label === gold) hits += 1;
      else wrong.set(`${gold}→${c.labels[0]?.label}`, (wrong.get(`${gold}→${c.labels[0]?.label}`) ?? 0) + 1);
      goldScore += c.labels.find((l) => l.label === gold)?.score ?? 0;
    });
    log(`  ${model}: ${start + chunk.length}/${set.classify.length} texts, top-1 so far ${hits}/${start + chunk.length}`);
  }
  const errors = [...wrong.entries()].map(([k, n]) => `${k}×${n}`).join(" ");
  rows.push({
    model,
    kind,
    top1: hits / set.classify.length,
    extra: `mean gold score ${(goldScore / set.classify.length).toFixed(3)}${errors ? `; misses ${errors}` : ""}`,
  });
}

try {
  for (const e of EMBEDDERS) await rerankAccuracy(rankerId(e), `bi-encoder over ${e}`);
  await rerankAccuracy("shoal-tiny-rerank", "generated cross-encoder (random weights)");
  for (const e of EMBEDDERS) await classifyAccuracy(intentId(e), `zero-shot over ${e}, T = 0.05`);
  await classifyAccuracy("shoal-tiny-intent", "generated classifier (random weights), same labels");
} finally {
  await current.stop();
  await broker?.stop();
}

console.log("\n| model | what it is | top-1 | |\n| --- | --- | ---: | --- |");
for (const r of rows) console.log(`| \`${r.model}\` | ${r.kind} | ${(r.top1 * 100).toFixed(1)}% | ${r.extra} |`);
console.log(`\nchance: rerank 25.0% (1 of 4), classify ${(100 / LABELS.length).toFixed(1)}% (1 of ${LABELS.length})`);
