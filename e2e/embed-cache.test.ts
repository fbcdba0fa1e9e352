import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { ensureModel } from "@shoal/models";
import { startCluster, workerMetricsUrl, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff, norm } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";
import { tinyVariant } from "./harness/tiny-variant.ts";

const TEXTS = Array.from({ length: 10 }, (_, i) => `chunk ${i}: ${"shoals of fish turn at once ".repeat(1 + (i % 4))}(${i * 7919})`);

/**
 * The embedding cache on real processes: gateway 0 has it (64 MiB), gateway 1 has it off, both in
 * front of the same worker, so gateway 1's answers are the freshly computed vectors to compare with.
 */
describe("embedding cache at the gateway (real Kafka, gateway and worker processes, real ONNX Runtime)", () => {
  let cluster: TestCluster;
  let cached: ReturnType<typeof clientsFor>;
  let fresh: ReturnType<typeof clientsFor>;
  let admin: Client<typeof ModelAdminService>;
  let model: string;
  let workerMetrics: string;
  /** "swap"'s vector of TEXTS[0] before and after it was replaced under its id. */
  let swapped: { old: number[]; replaced: number[] } | undefined;

  before(async () => {
    cluster = await startCluster({
      gateways: 2,
      workers: 1,
      gatewayEnvAt: (i): Record<string, string> => (i === 0 ? { SHOAL_EMBED_CACHE_BYTES: "64MiB" } : {}),
      workerEnv: { SHOAL_STATUS_INTERVAL_MS: "500" },
    });
    cached = clientsFor(cluster.urls[0]!, "connect");
    fresh = clientsFor(cluster.urls[1]!, "connect");
    admin = createClient(ModelAdminService, createConnectTransport({ baseUrl: cluster.urls[0]!, httpVersion: "1.1" }));
    model = cluster.modelIds[0]!;
    workerMetrics = await workerMetricsUrl(cluster.workers[0]!);
  });
  after(async () => {
    await cluster?.stop();
  });

  /** Jobs the worker answered, once the count has stopped moving (it is counted as the result goes out). */
  async function workerJobs(): Promise<number> {
    let last = -1;
    for (;;) {
      const n = total(await scrape(workerMetrics), "shoal_worker_jobs_total");
      if (n === last) return n;
      last = n;
      await sleep(150);
    }
  }
  const cacheCount = async (what: "hits" | "misses" | "inflight_joins"): Promise<number> =>
    total(await scrape(`${cluster.urls[0]!}/metrics`), `shoal_gateway_embed_cache_${what}_total`);
  const embed = async (c: ReturnType<typeof clientsFor>, inputs: string[], options: { normalize?: boolean } = {}, id = model) => {
    const headers = new Headers();
    const res = await c.inference.embed(
      { model: id, inputs, options },
      {
        timeoutMs: 60_000,
        onHeader: (h) => {
          for (const [k, v] of h) headers.set(k, v);
        },
      },
    );
    return { res, headers, vectors: res.embeddings.map((e) => e.values) };
  };

  test("a repeated text is answered from the cache: the hit counter rises, the worker's job count does not, the vectors are the fresh ones", async () => {
    const first = await embed(cached, TEXTS.slice(0, 2));
    const jobs = await workerJobs();
    const hits = await cacheCount("hits");
    const again = await embed(cached, [TEXTS[1]!, TEXTS[0]!]);
    assert.equal(await cacheCount("hits"), hits + 2);
    assert.equal(await workerJobs(), jobs, "answered without a job");
    assert.equal(again.headers.get("shoal-cached-inputs"), "2");
    // The same texts computed now by a gateway without the cache: the same batch, so the same bytes.
    const computed = await embed(fresh, TEXTS.slice(0, 2));
    assert.deepEqual(computed.vectors, first.vectors);
    assert.deepEqual(again.vectors, [computed.vectors[1], computed.vectors[0]]);
    assert.deepEqual(
      again.res.embeddings.map((e) => e.tokens),
      [computed.res.embeddings[1]!.tokens, computed.res.embeddings[0]!.tokens],
    );
    assert.equal(again.res.usage?.promptTokens, computed.res.usage?.promptTokens, "usage counts every input, cached or not");

    // The OpenAI route is the same Embed: a hit there too.
    const openai = await fetch(`${cluster.urls[0]!}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, input: TEXTS[0] }),
    });
    const body = (await openai.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    assert.equal(openai.headers.get("shoal-cached-inputs"), "1");
    assert.ok(maxAbsDiff(body.data[0]!.embedding, computed.vectors[0]!) < 1e-7);
    assert.equal(body.usage.prompt_tokens, computed.res.embeddings[0]!.tokens);
    assert.equal(await workerJobs(), jobs + 1, "one job: the uncached gateway's");
  });

  test("partial hits: of 10 texts with 7 cached, one job carries the 3 others and the answer keeps input order", async () => {
    const known = [0, 1, 3, 4, 6, 7, 9].map((i) => TEXTS[i]!);
    await embed(cached, known.slice(2));
    const [hits, misses, jobs] = [await cacheCount("hits"), await cacheCount("misses"), await workerJobs()];
    const all = await embed(cached, TEXTS);
    assert.equal((await cacheCount("hits")) - hits, 7);
    assert.equal((await cacheCount("misses")) - misses, 3);
    assert.equal(await workerJobs(), jobs + 1);
    assert.equal(all.headers.get("shoal-cached-inputs"), "7");
    const computed = await embed(fresh, TEXTS);
    for (let i = 0; i < TEXTS.length; i++) assert.ok(maxAbsDiff(all.vectors[i]!, computed.vectors[i]!) < 1e-5, `text ${i} in its place`);
    assert.equal(all.res.usage?.promptTokens, computed.res.usage?.promptTokens);
  });

  test("identical calls at once make one job; the others wait for it", async () => {
    const text = "eight callers ask for this text at the same moment";
    const [jobs, joins, hits] = [await workerJobs(), await cacheCount("inflight_joins"), await cacheCount("hits")];
    const answers = await Promise.all(Array.from({ length: 8 }, () => embed(cached, [text])));
    assert.equal(await workerJobs(), jobs + 1);
    const joined = (await cacheCount("inflight_joins")) - joins;
    // A call that reaches the gateway after the job's answer is a plain hit.
    assert.ok(joined >= 1, `calls joined the job in flight (${joined})`);
    assert.equal(joined + (await cacheCount("hits")) - hits, 7);
    for (const a of answers) assert.deepEqual(a.vectors, answers[0]!.vectors);
  });

  test("another option, or a model replaced under the same id, does not hit", async () => {
    const unit = await embed(cached, [TEXTS[0]!]);
    const misses = await cacheCount("misses");
    const raw = await embed(cached, [TEXTS[0]!], { normalize: false });
    assert.equal((await cacheCount("misses")) - misses, 1);
    assert.ok(Math.abs(norm(raw.vectors[0]!) - 1) > 1e-3, "the raw vector, not the cached unit one");
    assert.ok(
      maxAbsDiff(
        raw.vectors[0]!.map((x) => x / norm(raw.vectors[0]!)),
        unit.vectors[0]!,
      ) < 1e-5,
    );

    // "swap" is first the tiny encoder, then (removed and added again under its id) another one.
    const before = await admin.addModel({ source: await tinyVariant("swap-a", {}), id: "swap", pool: cluster.pool });
    const old = await embed(cached, [TEXTS[0]!], {}, "swap");
    await admin.removeModel({ id: "swap" });
    const after = await admin.addModel({ source: await ensureModel("tiny-embed-b"), id: "swap", pool: cluster.pool });
    assert.notEqual(after.model?.revision, before.model?.revision);
    const [jobs, missesBefore] = [await workerJobs(), await cacheCount("misses")];
    const replaced = await embed(cached, [TEXTS[0]!], {}, "swap");
    assert.equal((await cacheCount("misses")) - missesBefore, 1, "the new revision misses");
    assert.equal(await workerJobs(), jobs + 1);
    swapped = { old: old.vectors[0]!, replaced: replaced.vectors[0]! };
    // Gateway 1 follows the registry too: once it serves the new revision, its answer is the same.
    for (let i = 0; ; i++) {
      const listed = (await fresh.models.listModels({})).models.find((m) => m.id === "swap");
      if (listed?.revision === after.model?.revision) break;
      assert.ok(i < 100, "gateway 1 learns of the new revision");
      await sleep(100);
    }
    assert.ok(maxAbsDiff((await embed(fresh, [TEXTS[0]!], {}, "swap")).vectors[0]!, replaced.vectors[0]!) < 1e-6);
  });

  // The gateway keys and misses by revision (above); the worker, which had the old revision's
  // session resident under the same id, retires it and loads the new one (model-fleet.ts).
  test("the replaced model's answer is the new model's vector, not the old one's", async () => {
    assert.ok(swapped, "the test above ran");
    assert.ok(maxAbsDiff(swapped.replaced, swapped.old) > 1e-3, "not the old model's vector");
    // The new model's own vector: the same files served under an id of their own.
    await admin.addModel({ source: await ensureModel("tiny-embed-b"), id: "swap-reference", pool: cluster.pool });
    const reference = await embed(cached, [TEXTS[0]!], {}, "swap-reference");
    assert.ok(maxAbsDiff(swapped.replaced, reference.vectors[0]!) < 1e-6, "the new model's vector");
  });
});
