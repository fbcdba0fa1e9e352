import assert from "node:assert/strict";
import { test } from "node:test";
import { modelReadiness } from "./model-readiness.ts";

const corrupted = new Error("cannot load model at /models/a/model.onnx: Protobuf parsing failed.");

test("not ready when every model of the pool failed its last load, naming them and the error", () => {
  const r = modelReadiness(["a"], 0, [{ model: "a", error: corrupted, failures: 2, retryInMs: 1_500 }]);
  assert.deepEqual(r, {
    ready: false,
    reason: "cannot serve any model of the pool: a (2 failed load(s), next try in 2 s): cannot load model at /models/a/model.onnx: Protobuf parsing failed.",
  });
});

test("ready while one model of the pool can serve, naming the failing ones", () => {
  const r = modelReadiness(["a", "b"], 1, [{ model: "a", error: corrupted, failures: 1, retryInMs: 1_000 }]);
  assert.deepEqual(r, { ready: true, reason: "1 model(s) resident, failing to load: a (1 failed load(s), next try in 1 s)" });
});

test("ready with no failures, and with a failed model no longer in the pool", () => {
  assert.deepEqual(modelReadiness(["a"], 1, []), { ready: true, reason: "1 model(s) resident" });
  assert.equal(modelReadiness(["a"], 0, [{ model: "gone", error: corrupted, failures: 1, retryInMs: 0 }]).ready, true);
  assert.equal(modelReadiness([], 0, []).ready, true, "a pool with no models yet is not a failure");
});
