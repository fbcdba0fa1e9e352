/**
 * Body of an inference worker thread: opens the session described by `workerData` (a
 * {@link ThreadInit}), then serves `run` messages one at a time. `session.run()` blocks the thread
 * it runs on for the whole forward pass, which is why it lives here and not on the worker's
 * event loop (platform-notes.md, "onnxruntime-node").
 *
 * Started through inference-thread-entry.mjs, not directly: see the note there.
 */
import { parentPort, workerData } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import { InferenceError, ModelLoadError } from "./errors.ts";
import type { FromThread, ThreadInit, ToThread } from "./inference-protocol.ts";
import { openSession, type OpenedSession } from "./onnx-session.ts";
import type { PackedGroup } from "./packed-group.ts";
import { poolInto } from "./pooling.ts";

if (parentPort === null) throw new Error("inference-thread.ts must run inside a worker thread");
const port = parentPort;
const init = workerData as ThreadInit;
const { model } = init;

function post(msg: FromThread, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

async function runGroups(session: ort.InferenceSession, groups: readonly PackedGroup[]): Promise<{ vectors: Float32Array; inferenceMs: number }> {
  const dims = model.dimensions;
  let rows = 0;
  for (const g of groups) rows += g.batch;
  const vectors = new Float32Array(rows * dims);
  let inferenceMs = 0;
  let row = 0;
  for (const g of groups) {
    const shape = [g.batch, g.seqLen];
    if (
      g.inputIds.length !== g.batch * g.seqLen ||
      g.attentionMask.length !== g.inputIds.length ||
      (g.tokenTypeIds !== undefined && g.tokenTypeIds.length !== g.inputIds.length)
    ) {
      throw new InferenceError(
        "invalid-input",
        `group of ${g.batch}×${g.seqLen} carries ${g.inputIds.length} ids, ${g.attentionMask.length} mask values and ${g.tokenTypeIds?.length ?? "no"} type ids`,
      );
    }
    const feeds: Record<string, ort.Tensor> = {
      [model.inputNames.inputIds]: new ort.Tensor("int64", g.inputIds, shape),
      [model.inputNames.attentionMask]: new ort.Tensor("int64", g.attentionMask, shape),
    };
    if (model.inputNames.tokenTypeIds !== undefined) {
      // Pairs carry their types; single texts have none and every type is 0. A model without a
      // token-type input (XLM-R rerankers) gets no types: its pairs rely on the separators.
      const types = g.tokenTypeIds ?? new BigInt64Array(g.inputIds.length);
      feeds[model.inputNames.tokenTypeIds] = new ort.Tensor("int64", types, shape);
    }
    const started = performance.now();
    let outputs: ort.InferenceSession.ReturnType;
    try {
      outputs = await session.run(feeds, [model.outputName]);
    } catch (err) {
      throw new InferenceError("run-failed", `session.run failed on a ${g.batch}×${g.seqLen} group: ${(err as Error).message}`, { cause: err });
    }
    inferenceMs += performance.now() - started;
    const out = outputs[model.outputName];
    try {
      const expected = model.pooling === "none" ? [g.batch, dims] : [g.batch, g.seqLen, dims];
      if (out === undefined || out.type !== "float32" || out.dims.join() !== expected.join()) {
        throw new InferenceError(
          "bad-output",
          `output "${model.outputName}" is ${out?.type} [${out?.dims.join(", ")}], expected float32 [${expected.join(", ")}]`,
        );
      }
      poolInto(vectors, row, out.data as Float32Array, g.attentionMask, { batch: g.batch, seqLen: g.seqLen, dims }, model.pooling);
    } finally {
      for (const t of Object.values(outputs)) t.dispose();
    }
    row += g.batch;
  }
  return { vectors, inferenceMs };
}

async function main(): Promise<void> {
  let opened: OpenedSession;
  try {
    opened = await openSession(model, init.settings);
  } catch (err) {
    const problems = err instanceof ModelLoadError ? err.problems : [`onnx.file: ${(err as Error).message}`];
    post({ type: "load-failed", path: model.modelPath, problems });
    port.close();
    return;
  }
  const { session } = opened;
  // Runs are serialised: a new message waits for the previous run, so `close` never releases
  // the session under a run in flight.
  let queue: Promise<void> = Promise.resolve();
  port.on("message", (msg: ToThread) => {
    queue = queue.then(async () => {
      if (msg.type === "close") {
        await session.release();
        post({ type: "closed" });
        port.close();
        return;
      }
      try {
        const { vectors, inferenceMs } = await runGroups(session, msg.groups);
        post({ type: "result", id: msg.id, vectors, inferenceMs }, [vectors.buffer as ArrayBuffer]);
      } catch (err) {
        const reason = err instanceof InferenceError ? err.reason : "run-failed";
        post({ type: "error", id: msg.id, reason, message: (err as Error).message });
      }
    });
  });
  post({ type: "ready", provider: opened.provider, fallbackReason: opened.fallbackReason });
}

await main();
