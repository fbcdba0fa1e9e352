import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadCatalog } from "@shoal/common";
import { ensureModel } from "../../../infra/models/src/ensure-model.ts";
import { toModel } from "./model-service.ts";

describe("ListModels scoring", () => {
  it("says how each model scores: cross-encoder, classifier, bi-encoder cosine, zero-shot softmax; nothing for an embedder", async () => {
    const [tiny, rerank, classify] = await Promise.all([ensureModel("tiny"), ensureModel("tiny-rerank"), ensureModel("tiny-classify")]);
    const path = join(await mkdtemp(join(tmpdir(), "shoal-scoring-")), "catalog.yaml");
    await writeFile(
      path,
      [
        "models:",
        `  - { path: ${JSON.stringify(tiny)}, id: emb }`,
        `  - { path: ${JSON.stringify(rerank)}, id: xenc }`,
        `  - { path: ${JSON.stringify(classify)}, id: cls }`,
        "  - { id: rank, biEncoder: { embedder: emb } }",
        "  - { id: intent, zeroShot: { embedder: emb, labels: { a: x, b: y, c: z } } }",
        "",
      ].join("\n"),
    );
    const catalog = await loadCatalog(path);
    const scoring = (id: string): string => toModel(catalog.models.get(id)!, []).scoring;
    assert.equal(scoring("emb"), "");
    assert.match(scoring("xenc"), /^cross-encoder logit, sigmoid/);
    assert.match(scoring("cls"), /^sequence classifier: softmax over \d+ label logits$/);
    assert.match(scoring("rank"), /^bi-encoder: cosine in \[-1, 1\] \(no sigmoid\) of embeddings by emb, its query prompt on the query/);
    assert.equal(scoring("intent"), "zero-shot: softmax over labels of cosine(text, label description) / 0.05, 3 label descriptions embedded by emb");
    const intent = toModel(catalog.models.get("intent")!, []);
    assert.deepEqual(intent.labels, ["a", "b", "c"]);
    assert.equal(intent.origin, "zero-shot over emb (generated)");
    assert.equal(intent.generated, true, "a composite over a generated embedder means nothing either");
  });
});
