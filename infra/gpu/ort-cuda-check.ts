/**
 * Opens the generated tiny model on onnxruntime-node's CUDA provider and says which provider the
 * session got: exit 0 on CUDA, 1 when the worker would fall back to CPU (the reason printed).
 *   node --import tsx infra/gpu/ort-cuda-check.ts
 * Run by infra/gpu/onnxruntime-cuda.sh after installing the provider libraries.
 */
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel } from "@shoal/models";
import { openSession } from "../../services/worker/src/runtime/onnx-session.ts";

const spec = await readModelDir(await ensureModel("tiny"));
const opened = await openSession(spec, { intraOpThreads: 1, executionProvider: "cuda" });
await opened.session.release();
if (opened.fallbackReason !== undefined) {
  console.log(`onnxruntime-node: CPU (the worker would fall back: ${opened.fallbackReason})`);
  process.exit(1);
}
console.log(`onnxruntime-node: ${opened.provider} provider in use`);
