import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { ModelLoadError } from "./errors.ts";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { missingCudaProviderLibraries, openSession } from "./onnx-session.ts";
import { generatedModelDir } from "./test-models.ts";

describe("openSession", () => {
  let spec: ModelSpec;
  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny"));
  });

  it("opens a CPU session when CPU is asked for", async () => {
    const opened = await openSession(spec, { intraOpThreads: 1, executionProvider: "cpu" });
    assert.equal(opened.provider, "cpu");
    assert.equal(opened.fallbackReason, undefined);
    assert.deepEqual([...opened.session.inputNames].sort(), ["attention_mask", "input_ids", "token_type_ids"]);
    await opened.session.release();
  });

  it("sees that this CPU-only install lacks the CUDA provider libraries", () => {
    const missing = missingCudaProviderLibraries();
    assert.ok(
      missing.some((f) => f.endsWith("libonnxruntime_providers_cuda.so")),
      missing.join(", "),
    );
  });

  it("cuda requested, library check mocked to pass, no GPU here: the CUDA session fails and CPU takes over", async () => {
    // Exercises the path a GPU host with a broken CUDA install takes (ONNX Runtime prints its own
    // native error line to stderr here; that is expected).
    const opened = await openSession(spec, { intraOpThreads: 1, executionProvider: "cuda" }, { missingCudaProviderLibraries: () => [] });
    assert.equal(opened.provider, "cpu");
    assert.match(opened.fallbackReason ?? "", /^CUDA session creation failed \(.+\)$/);
    await opened.session.release();
  });

  it("reports a graph input the manifest does not map (tokenTypeIds omitted for a model that has it)", async () => {
    const model = { ...spec, inputNames: { ...spec.inputNames, tokenTypeIds: undefined } };
    await assert.rejects(openSession(model, { intraOpThreads: 1, executionProvider: "cpu" }), (err: unknown) => {
      assert.ok(err instanceof ModelLoadError);
      assert.deepEqual(err.problems, ['onnx.inputs: graph input "token_type_ids" is not mapped by the manifest']);
      return true;
    });
  });

  it("reports an output name the graph lacks and a pooling whose rank does not fit", async () => {
    const model = { ...spec, outputName: "pooler_output" };
    await assert.rejects(
      openSession(model, { intraOpThreads: 1, executionProvider: "cpu" }),
      /onnx\.output: the graph has no output "pooler_output" \(outputs: last_hidden_state\)/,
    );
    await assert.rejects(openSession({ ...spec, pooling: "none" }, { intraOpThreads: 1, executionProvider: "cpu" }), /has rank 3, pooling "none" needs 2/);
  });

  it("rejects a negative intra-op thread count", async () => {
    await assert.rejects(openSession(spec, { intraOpThreads: -1, executionProvider: "cpu" }), RangeError);
  });
});
