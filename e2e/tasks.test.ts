import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { createShoalClient } from "@shoal/client";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { ClassifyResponse, RerankResponse } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf, type Protocol } from "./harness/clients.ts";

/**
 * Rerank and Classify get the coverage Embed has: every protocol, the typed client, bad input,
 * and a concurrent burst with nothing lost — on the real stack with generated models (a
 * cross-encoder with a sigmoid head, a 3-label softmax classifier, a 4-label multi-label one).
 */
const RERANK = "shoal-tiny-rerank";
const CLASSIFY = "shoal-tiny-classify";
const TAGS = "shoal-tiny-tags";
const EMBED = "shoal-tiny-embed";
const PROTOCOLS: Protocol[] = ["connect", "connect-json", "grpc"];

const QUERY = "where do cats like to sleep";
const DOCUMENTS = [
  "Quarterly revenue grew by twelve percent.",
  "A cat sleeps on the warm windowsill.",
  "The striker scored twice in the final.",
  "Kittens nap in the afternoon sun by the window.",
  "Parliament debated the new budget bill.",
];
const TEXTS = ["a new chip doubles inference throughput", "the striker scored twice in the final", "a cat sleeps on the windowsill"];

const close = (a: number, b: number, tol = 1e-5): boolean => Math.abs(a - b) <= tol;
/** Scores by document index. */
const byIndex = (res: RerankResponse): number[] => [...res.results].sort((x, y) => x.index - y.index).map((r) => r.score);
/** Per text, its label → score map. */
const labelMaps = (res: ClassifyResponse): Map<string, number>[] => res.classifications.map((c) => new Map(c.labels.map((l) => [l.label, l.score])));

describe("Rerank and Classify end to end (real Kafka, gateway and worker, real ONNX Runtime)", () => {
  let cluster: TestCluster;
  let labels: { [model: string]: string[] };
  let rerankRef: RerankResponse;
  let classifyRef: ClassifyResponse;

  before(async () => {
    cluster = await startCluster({ presets: ["tiny-rerank", "tiny-classify", "tiny-multilabel", "tiny"] });
    const { inference, models } = clientsFor(cluster.urls[0]!, "connect");
    labels = Object.fromEntries((await models.listModels({})).models.map((m) => [m.id, [...m.labels]]));
    rerankRef = await inference.rerank({ model: RERANK, query: QUERY, documents: DOCUMENTS });
    classifyRef = await inference.classify({ model: CLASSIFY, inputs: TEXTS });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("the catalog reports the classifiers' labels", () => {
    assert.equal(labels[CLASSIFY]!.length, 3);
    assert.equal(labels[TAGS]!.length, 4);
    assert.deepEqual(labels[RERANK], []);
  });

  for (const protocol of PROTOCOLS) {
    test(`${protocol}: Rerank scores every document once, sorted, with its original index; the same scores on every protocol`, async () => {
      const { inference } = clientsFor(cluster.urls[0]!, protocol);
      const res = await inference.rerank({ model: RERANK, query: QUERY, documents: DOCUMENTS, returnDocuments: true });
      assert.equal(res.model, RERANK);
      assert.deepEqual(res.results.map((r) => r.index).sort(), [0, 1, 2, 3, 4]);
      for (let i = 1; i < res.results.length; i++) assert.ok(res.results[i - 1]!.score >= res.results[i]!.score, "highest score first");
      for (const r of res.results) {
        assert.ok(r.score > 0 && r.score < 1, `sigmoid score ${r.score}`);
        assert.equal(r.document, DOCUMENTS[r.index], "return_documents copies the document");
        assert.ok(r.tokens > 0 && !r.truncated);
      }
      assert.ok(new Set(res.results.map((r) => r.score)).size > 1, "documents get different scores");
      byIndex(res).forEach((s, i) => {
        assert.ok(close(s, byIndex(rerankRef)[i]!), `document ${i}: ${s} vs ${byIndex(rerankRef)[i]}`);
      });
      assert.equal(
        res.usage?.promptTokens,
        res.results.reduce((n, r) => n + r.tokens, 0),
      );
    });

    test(`${protocol}: Classify gives every label of every text, softmax for single-label and sigmoid for multi-label`, async () => {
      const { inference } = clientsFor(cluster.urls[0]!, protocol);
      const single = await inference.classify({ model: CLASSIFY, inputs: TEXTS });
      assert.deepEqual(
        single.classifications.map((c) => c.index),
        [0, 1, 2],
      );
      for (const c of single.classifications) {
        assert.deepEqual(c.labels.map((l) => l.label).sort(), [...labels[CLASSIFY]!].sort());
        for (let i = 1; i < c.labels.length; i++) assert.ok(c.labels[i - 1]!.score >= c.labels[i]!.score, "best label first");
        assert.ok(
          close(
            c.labels.reduce((s, l) => s + l.score, 0),
            1,
            1e-5,
          ),
          "softmax probabilities sum to 1",
        );
      }
      labelMaps(single).forEach((m, i) => {
        for (const [label, score] of labelMaps(classifyRef)[i]!) assert.ok(close(m.get(label)!, score), `${label} of text ${i}`);
      });
      const multi = await inference.classify({ model: TAGS, inputs: TEXTS });
      for (const c of multi.classifications) {
        assert.equal(c.labels.length, 4);
        for (const l of c.labels) assert.ok(l.score > 0 && l.score < 1, "an independent sigmoid per label");
      }
      const sums = multi.classifications.map((c) => c.labels.reduce((s, l) => s + l.score, 0));
      assert.ok(
        sums.some((s) => !close(s, 1, 1e-3)),
        `multi-label scores are not a distribution (${sums})`,
      );
    });
  }

  test("a document scores the same alone and batched with others; top_k keeps the best", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const ref = byIndex(rerankRef);
    const alone = await Promise.all(DOCUMENTS.map((d) => inference.rerank({ model: RERANK, query: QUERY, documents: [d] })));
    alone.forEach((r, i) => {
      assert.ok(close(r.results[0]!.score, ref[i]!), `document ${i}: alone ${r.results[0]!.score} vs batched ${ref[i]}`);
    });
    const top2 = await inference.rerank({ model: RERANK, query: QUERY, documents: DOCUMENTS, topK: 2 });
    assert.deepEqual(
      top2.results.map((r) => r.index),
      rerankRef.results.slice(0, 2).map((r) => r.index),
    );
    assert.equal(top2.results[0]!.document, "", "no documents unless asked");
    const all = await inference.rerank({ model: RERANK, query: QUERY, documents: DOCUMENTS, topK: 50 });
    assert.equal(all.results.length, DOCUMENTS.length, "top_k above the count returns all");
    const top1 = await inference.classify({ model: TAGS, inputs: TEXTS, topK: 1 });
    assert.ok(top1.classifications.every((c) => c.labels.length === 1));
  });

  test("long inputs: truncate cuts them and says so; without it the error names the input and its tokens", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const long = "the tide carries sand along the shoal ".repeat(60);
    const cut = await inference.rerank({ model: RERANK, query: QUERY, documents: ["short one", long], truncate: true });
    const hit = cut.results.find((r) => r.index === 1)!;
    assert.equal(hit.truncated, true);
    assert.ok(hit.tokens <= 128, `pair cut to the model's limit (${hit.tokens})`);
    const refused = await codeOf(inference.rerank({ model: RERANK, query: QUERY, documents: ["short one", long] }));
    assert.equal(refused.code, Code.InvalidArgument);
    assert.match(refused.message, /^documents\[1\]: \d+ tokens exceed the limit of 128 tokens/);
    const classified = await inference.classify({ model: CLASSIFY, inputs: [long], truncate: true });
    assert.equal(classified.classifications[0]!.truncated, true);
    assert.match((await codeOf(inference.classify({ model: CLASSIFY, inputs: ["ok", long] }))).message, /^inputs\[1\]: \d+ tokens exceed/);
  });

  test("bad input gets a clear error with the right code, never echoing the text", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect-json");
    const cases: Array<[string, () => Promise<unknown>, Code, RegExp]> = [
      ["empty query", () => inference.rerank({ model: RERANK, query: "  ", documents: ["d"] }), Code.InvalidArgument, /^query: empty text$/],
      [
        "no documents",
        () => inference.rerank({ model: RERANK, query: "q", documents: [] }),
        Code.InvalidArgument,
        /^documents: at least one document is required$/,
      ],
      ["empty document", () => inference.rerank({ model: RERANK, query: "q", documents: ["d", ""] }), Code.InvalidArgument, /^documents\[1\]: empty text$/],
      ["no model", () => inference.rerank({ model: "", query: "q", documents: ["d"] }), Code.InvalidArgument, /^model: required$/],
      ["unknown model", () => inference.rerank({ model: "nope-reranker", query: "q", documents: ["d"] }), Code.NotFound, /nope-reranker/],
      [
        "rerank on a classifier",
        () => inference.rerank({ model: CLASSIFY, query: "q", documents: ["d"] }),
        Code.InvalidArgument,
        /is a classification model, not a rerank model/i,
      ],
      ["classify on an embedder", () => inference.classify({ model: EMBED, inputs: ["t"] }), Code.InvalidArgument, /not a classification model/i],
      ["no texts", () => inference.classify({ model: CLASSIFY, inputs: [] }), Code.InvalidArgument, /^inputs: at least one text is required$/],
      ["empty text", () => inference.classify({ model: CLASSIFY, inputs: ["fine", " "] }), Code.InvalidArgument, /^inputs\[1\]: empty text$/],
    ];
    for (const [name, call, code, message] of cases) {
      const got = await codeOf(call());
      assert.equal(got.code, code, `${name}: ${Code[got.code]} (${got.message})`);
      assert.match(got.message, message, name);
    }
    // The worker and gateway are still serving.
    assert.equal((await inference.rerank({ model: RERANK, query: QUERY, documents: DOCUMENTS })).results.length, 5);
  });

  test("200 concurrent Rerank and Classify calls on both lanes through the typed client: every one answered with its own result", async () => {
    const client = createShoalClient({ baseUrl: cluster.urls[0]!, retry: { maxAttempts: 5, initialBackoffMs: 50, maxBackoffMs: 500 } });
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    // References, one call per distinct request, computed first.
    const queries = Array.from({ length: 10 }, (_, i) => `${QUERY} number ${i}`);
    const rerankRefs = await Promise.all(queries.map((q) => inference.rerank({ model: RERANK, query: q, documents: DOCUMENTS })));
    const texts = Array.from({ length: 10 }, (_, i) => `${TEXTS[i % TEXTS.length]} variant ${i}`);
    const classifyRefs = await Promise.all(texts.map((t) => inference.classify({ model: TAGS, inputs: [t] })));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, async (_, i) => {
        const lane = i % 3 === 0 ? Lane.BATCH : Lane.INTERACTIVE;
        if (i % 2 === 0) {
          const k = (i / 2) % queries.length;
          const res = await client.rerank(RERANK, queries[k]!, DOCUMENTS, { lane, timeoutMs: 60_000 });
          const ref = byIndex(rerankRefs[k]!);
          const got = [...res.results].sort((a, b) => a.index - b.index).map((r) => r.score);
          return got.length === ref.length && got.every((s, j) => close(s, ref[j]!));
        }
        const k = ((i - 1) / 2) % texts.length;
        const res = await client.classify(TAGS, [texts[k]!], { lane, timeoutMs: 60_000 });
        const ref = labelMaps(classifyRefs[k]!)[0]!;
        return res.classifications[0]!.labels.every((l) => close(l.score, ref.get(l.label)!));
      }),
    );
    const failed = outcomes.filter((o) => o.status === "rejected");
    assert.equal(failed.length, 0, `every call answered (${failed.slice(0, 3).map((o) => String((o as PromiseRejectedResult).reason))})`);
    const wrong = outcomes.filter((o) => o.status === "fulfilled" && !o.value).length;
    assert.equal(wrong, 0, "every answer is the result of its own request");
  });
});
