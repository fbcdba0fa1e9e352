import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff } from "./harness/clients.ts";

const REQUESTS = 1_000;
const DISTINCT = 50;

describe("1,000 concurrent requests through 2 gateway replicas to 2 workers", () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({ gateways: 2, workers: 2, partitions: 4 });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("every request answered once, with its own text's vector; none lost", async () => {
    const model = cluster.modelIds[0]!;
    const texts = Array.from({ length: DISTINCT }, (_, i) => `request text number ${i} ${"padding words ".repeat(i % 9)}`);
    // Reference vectors, one sequential call per distinct text.
    const { inference: ref } = clientsFor(cluster.urls[0]!, "connect");
    const expected: number[][] = [];
    for (const t of texts) expected.push((await ref.embed({ model, inputs: [t] })).embeddings[0]!.values);

    const clients = cluster.urls.flatMap((u) => [clientsFor(u, "connect").inference, clientsFor(u, "grpc").inference]);
    const answers = new Map<number, number>();
    const workersSeen = new Set<string>();
    await Promise.all(
      Array.from({ length: REQUESTS }, async (_, i) => {
        const client = clients[i % clients.length]!;
        const text = i % DISTINCT;
        const res = await client.embed(
          { model, inputs: [texts[text]!] },
          { timeoutMs: 120_000, onHeader: (h) => workersSeen.add(h.get("shoal-worker") ?? "") },
        );
        answers.set(i, (answers.get(i) ?? 0) + 1);
        assert.ok(maxAbsDiff(res.embeddings[0]!.values, expected[text]!) < 1e-5, `request ${i} got another text's vector`);
      }),
    );
    assert.equal(answers.size, REQUESTS, "every request answered");
    assert.ok(
      [...answers.values()].every((n) => n === 1),
      "no request answered twice",
    );
    assert.equal(workersSeen.size, 2, `both workers served requests (${[...workersSeen].join(", ")})`);
  });
});
