import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { InputType, Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ensureMavenModel } from "@shoal/models";
import { SUPPORT_INTENT_LABELS } from "../infra/dev/default-composites.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { ServiceProcess } from "./harness/service-process.ts";
import { cosine } from "../infra/pretrained/cosine.ts";

/** The real bge-small-en-v1.5 (query instruction, no passage prompt, CLS pooling). */
const BGE = "bge-small-en-v1.5";
const RANKER = "ranker";
const INTENT = "intent";
const T = 0.05;
const LABELS = Object.keys(SUPPORT_INTENT_LABELS);

describe("a bi-encoder ranker and a zero-shot classifier over a real embedder (bge-small-en-v1.5)", () => {
  let cluster: TestCluster;
  let bgeDir: string;
  let api: ReturnType<typeof clientsFor>;
  before(async () => {
    bgeDir = await ensureMavenModel(BGE);
    cluster = await startCluster({
      presets: [],
      modelDirs: [bgeDir],
      composites: [
        { id: RANKER, biEncoder: { embedder: BGE } },
        { id: INTENT, zeroShot: { embedder: BGE, temperature: T, labels: SUPPORT_INTENT_LABELS } },
      ],
    });
    api = clientsFor(cluster.urls[0]!, "connect");
  });
  after(async () => {
    await cluster?.stop();
  });
  const opts = { timeoutMs: 120_000 };

  test("ListModels: a rerank and a classify model, not generated, labels from the catalog, and how each scores", async () => {
    const models = new Map((await api.models.listModels({})).models.map((m) => [m.id, m]));
    const ranker = models.get(RANKER)!;
    const intent = models.get(INTENT)!;
    assert.equal(ranker.task, Task.RERANK);
    assert.equal(ranker.generated, false);
    assert.match(ranker.scoring, /^bi-encoder: cosine in \[-1, 1\] \(no sigmoid\) of embeddings by bge-small-en-v1\.5/);
    assert.equal(intent.task, Task.CLASSIFY);
    assert.deepEqual(intent.labels, LABELS);
    assert.match(
      intent.scoring,
      /^zero-shot: softmax over labels of cosine\(text, label description\) \/ 0\.05, 5 label descriptions embedded by bge-small-en-v1\.5$/,
    );
    assert.equal(models.get(BGE)?.scoring, "");
  });

  test("the relevant passage ranks first on clear pairs", async () => {
    const cases = [
      {
        query: "what is the capital of france",
        documents: ["Bananas are rich in potassium.", "Paris is the capital and largest city of France.", "The Rhine flows through Germany."],
        best: 1,
      },
      {
        query: "how do I reset my password",
        documents: [
          "To reset your password, click 'Forgot password' on the sign-in page and follow the email link.",
          "Our offices are closed on Sundays.",
          "Passwords were invented in the 1960s at MIT.",
        ],
        best: 0,
      },
      {
        query: "why do cats purr",
        documents: ["The stock market closed higher today.", "Dogs wag their tails.", "Cats purr by vibrating their larynx muscles, often when content."],
        best: 2,
      },
    ];
    for (const c of cases) {
      const res = await api.inference.rerank({ model: RANKER, query: c.query, documents: c.documents }, opts);
      assert.equal(res.results[0]?.index, c.best, c.query);
      assert.ok(res.results.every((r) => r.score >= -1 && r.score <= 1));
    }
  });

  test("the right label wins on clear texts; scores sum to 1", async () => {
    const texts = [
      ["I was charged twice for my subscription, please refund me.", "billing"],
      ["My parcel still hasn't been delivered and tracking shows nothing.", "shipping"],
      ["The app crashes with an error every time I open it.", "technical"],
      ["I forgot my password and can't log in to my account.", "account"],
      ["Thank you so much, I love this product!", "praise"],
    ] as const;
    const res = await api.inference.classify({ model: INTENT, inputs: texts.map((t) => t[0]) }, opts);
    res.classifications.forEach((c, i) => {
      assert.equal(c.labels[0]?.label, texts[i]![1], texts[i]![0]);
      assert.ok(Math.abs(c.labels.reduce((n, l) => n + l.score, 0) - 1) < 1e-4);
    });
  });

  test("scores are the cosines (and the softmax of cosines / T) of the embedder's own Embed answers, to 1e-4", async () => {
    const query = "how do bees make honey";
    const documents = ["Bees turn nectar into honey by evaporating it in the hive.", "Honey badgers are fearless.", "Sugar is sweet."];
    const [ranked, q, d] = await Promise.all([
      api.inference.rerank({ model: RANKER, query, documents }, opts),
      api.inference.embed({ model: BGE, inputs: [query], options: { inputType: InputType.QUERY } }, opts),
      api.inference.embed({ model: BGE, inputs: documents, options: { inputType: InputType.DOCUMENT } }, opts),
    ]);
    for (const r of ranked.results) {
      const expected = cosine(q.embeddings[0]!.values, d.embeddings[r.index]!.values);
      assert.ok(Math.abs(r.score - expected) < 1e-4, `document ${r.index}: ${r.score} vs ${expected}`);
    }
    const text = "where is my order?";
    const [classified, t, l] = await Promise.all([
      api.inference.classify({ model: INTENT, inputs: [text] }, opts),
      api.inference.embed({ model: BGE, inputs: [text], options: { inputType: InputType.CLASSIFICATION } }, opts),
      api.inference.embed({ model: BGE, inputs: Object.values(SUPPORT_INTENT_LABELS), options: { inputType: InputType.CLASSIFICATION } }, opts),
    ]);
    const logits = l.embeddings.map((e) => cosine(t.embeddings[0]!.values, e.values) / T);
    const max = Math.max(...logits);
    const sum = logits.reduce((n, x) => n + Math.exp(x - max), 0);
    for (const s of classified.classifications[0]!.labels) {
      const expected = Math.exp(logits[LABELS.indexOf(s.label)]! - max) / sum;
      assert.ok(Math.abs(s.score - expected) < 1e-4, `${s.label}: ${s.score} vs ${expected}`);
    }
  });

  test("concurrent Rerank, Classify and Embed calls share the embedder: each gets the answer it gets alone", async () => {
    const query = "what do pandas eat";
    const documents = ["Giant pandas eat bamboo.", "Pandas is a Python library.", "Bears hibernate."];
    const inputs = ["my card was declined", "the website shows a blank page"];
    const [rAlone, cAlone] = [
      await api.inference.rerank({ model: RANKER, query, documents }, opts),
      await api.inference.classify({ model: INTENT, inputs }, opts),
    ];
    const calls = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        i % 3 === 0
          ? api.inference.rerank({ model: RANKER, query, documents }, opts)
          : i % 3 === 1
            ? api.inference.classify({ model: INTENT, inputs }, opts)
            : api.inference.embed({ model: BGE, inputs: [`text ${i}`] }, opts),
      ),
    );
    calls.forEach((res, i) => {
      if (i % 3 === 0) {
        const r = res as typeof rAlone;
        assert.deepEqual(
          r.results.map((x) => x.index),
          rAlone.results.map((x) => x.index),
        );
        for (const [k, x] of r.results.entries()) assert.ok(Math.abs(x.score - rAlone.results[k]!.score) < 1e-4);
      } else if (i % 3 === 1) {
        const c = res as typeof cAlone;
        for (const [k, x] of c.classifications.entries()) assert.equal(x.labels[0]?.label, cAlone.classifications[k]!.labels[0]?.label);
      }
    });
  });

  test("a catalog naming an unknown embedder, or one of the wrong task, stops the service with a CatalogError naming the field", async () => {
    const dir = await mkdtemp(join(tmpdir(), "shoal-bad-composite-"));
    const path = join(dir, "catalog.yaml");
    await writeFile(
      path,
      [
        "models:",
        `  - path: ${JSON.stringify(bgeDir)}`,
        "  - { id: r1, biEncoder: { embedder: bge-large } }",
        "  - { id: r2, biEncoder: { embedder: r1 } }",
        `  - { id: c1, zeroShot: { embedder: r3, labels: { a: x, b: y } } }`,
        `  - { id: r3, biEncoder: { embedder: ${BGE} } }`,
        "",
      ].join("\n"),
    );
    const gateway = ServiceProcess.start("gateway", "bad-catalog-g", { KAFKA_BROKERS: kafkaBrokers(), SHOAL_CATALOG: path, SHOAL_PORT: "0" });
    const code = await gateway.exited;
    assert.notEqual(code, 0);
    const text = gateway.logs.map((l) => JSON.stringify(l)).join("\n");
    assert.match(text, /CatalogError|invalid model catalog/);
    assert.match(text, /models\[1\]\.biEncoder\.embedder: no model 'bge-large' in the catalog/);
    assert.match(text, /models\[2\]\.biEncoder\.embedder: 'r1' is a rerank model \(a composite itself\)/);
    assert.match(text, /models\[3\]\.zeroShot\.embedder: 'r3' is a rerank model \(a composite itself\); a composite scores through an embed model/);
  });
});
