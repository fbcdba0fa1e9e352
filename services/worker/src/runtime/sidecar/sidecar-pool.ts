/**
 * The runtime adapter's interface ({@link InferenceThreads}) over a runtime sidecar: the model's
 * Hugging Face folder is loaded into the worker's sidecar process, and each run sends the groups'
 * token ids as int32 tensors (one frame) and reads back pooled float32 vectors (logits for rerank
 * and classify). Selected per model with the catalog's `runtime: sidecar:<name>`.
 *
 * When the sidecar is restarted (a crash, a hang), the model is loaded again before the next run.
 */
import { type ModelSpec, ModelLoadError } from "@shoal/common/model-manifest";
import { InferenceError, type InferenceErrorReason } from "../errors.ts";
import { groupProblem } from "../group-problem.ts";
import type { InferenceThreads, InferenceThreadsInfo, RunGroup, RunResult } from "../inference-threads.ts";
import type { ExecutionProviderChoice } from "../onnx-session.ts";
import { float32Of, type OutTensor } from "./frames.ts";
import { SidecarRequestError, type SidecarHost } from "./sidecar-host.ts";

export interface SidecarPoolOptions {
  readonly spec: ModelSpec;
  readonly host: SidecarHost;
  /** The model's Hugging Face folder (config.json + weights). */
  readonly weightsDir: string;
  /** Reported in `info.threads`: the sidecar runs one call at a time whatever the count. */
  readonly threads?: number;
}

const REASONS: readonly InferenceErrorReason[] = ["run-failed", "bad-output", "invalid-input", "thread-crashed", "closed"];

/** One group as tensors: ids [B, L] zero-padded, lengths [B], types [B, L] when given. */
function groupTensors(g: RunGroup, index: number, typed: boolean): Record<string, OutTensor> {
  const batch = g.ids.length;
  const seqLen = Math.max(...g.ids.map((s) => s.length));
  const ids = new Int32Array(batch * seqLen);
  const lengths = new Int32Array(batch);
  const types = typed && g.typeIds !== undefined ? new Int32Array(batch * seqLen) : undefined;
  for (let b = 0; b < batch; b++) {
    const seq = g.ids[b]!;
    lengths[b] = seq.length;
    ids.set(seq, b * seqLen);
    if (types !== undefined) types.set(g.typeIds![b]!, b * seqLen);
  }
  const out: Record<string, OutTensor> = {
    [`g${index}.ids`]: { shape: [batch, seqLen], data: ids },
    [`g${index}.lengths`]: { shape: [batch], data: lengths },
  };
  if (types !== undefined) out[`g${index}.types`] = { shape: [batch, seqLen], data: types };
  return out;
}

function inferenceErrorOf(err: unknown): Error {
  if (err instanceof SidecarRequestError) {
    const reason = (REASONS as readonly string[]).includes(err.reason) ? (err.reason as InferenceErrorReason) : "run-failed";
    return new InferenceError(reason, err.message, { cause: err });
  }
  return err as Error;
}

let loadCounter = 0;

/**
 * Loads the model into the sidecar (starting the sidecar if needed) and returns a pool that runs it.
 * @throws ModelLoadError when the sidecar cannot load the weights folder
 * @throws InferenceError `thread-crashed` when the sidecar cannot be started
 */
export async function createSidecarPool(opts: SidecarPoolOptions): Promise<InferenceThreads> {
  const { spec, host, weightsDir } = opts;
  const key = `${spec.id}#${++loadCounter}`;
  const typed = spec.inputNames.tokenTypeIds !== undefined;
  let closing: Promise<void> | undefined;

  async function load(): Promise<void> {
    try {
      const reply = await host.request({ op: "load", model: key, path: weightsDir, pooling: spec.pooling });
      const dims = Number(reply.meta["dimensions"]);
      if (dims !== spec.dimensions) {
        throw new ModelLoadError(weightsDir, [`the sidecar's model gives ${dims} values per input, the manifest says ${spec.dimensions}`]);
      }
    } catch (err) {
      if (err instanceof SidecarRequestError) throw new ModelLoadError(weightsDir, [err.message]);
      throw err;
    }
  }

  let loaded = load();
  await loaded;
  const unsubscribe = host.onRestart(() => {
    loaded = load();
    // Awaited by the next run; a failed reload must not go unhandled meanwhile.
    loaded.catch(() => {});
  });
  const hello = await host.hello();
  const provider: ExecutionProviderChoice = hello.device === "cuda" ? "cuda" : "cpu";
  const info: InferenceThreadsInfo = Object.freeze({
    modelId: spec.id,
    provider,
    runtime: `sidecar:pytorch`,
    requestedProvider: provider,
    threads: opts.threads ?? 1,
    intraOpThreads: 0,
  });
  const inFlight = new Set<Promise<unknown>>();

  async function runGroups(groups: readonly RunGroup[]): Promise<RunResult> {
    const tensors: Record<string, OutTensor> = {};
    let paddedTokens = 0;
    let rows = 0;
    for (const [i, g] of groups.entries()) {
      Object.assign(tensors, groupTensors(g, i, typed));
      paddedTokens += g.ids.length * Math.max(...g.ids.map((s) => s.length));
      rows += g.ids.length;
    }
    await loaded;
    const reply = await host.request({ op: "run", model: key, groups: groups.length }, tensors).catch((err: unknown) => {
      throw inferenceErrorOf(err);
    });
    const output = reply.tensors.get("output");
    if (output === undefined || output.dtype !== "F32" || output.shape.length !== 2 || output.shape[0] !== rows || output.shape[1] !== spec.dimensions) {
      throw new InferenceError(
        "bad-output",
        `the sidecar answered ${output === undefined ? "no output" : `[${output.shape.join(", ")}] ${output.dtype}`}; expected [${rows}, ${spec.dimensions}] F32`,
      );
    }
    return { vectors: float32Of(output), inferenceMs: Number(reply.meta["ms"] ?? 0), paddedTokens };
  }

  return {
    dimensions: spec.dimensions,
    info,
    run(groups: readonly RunGroup[]): Promise<RunResult> {
      if (closing !== undefined) return Promise.reject(new InferenceError("closed", "inference pool is closed"));
      for (const g of groups) {
        const problem = groupProblem(g, true);
        if (problem !== undefined) return Promise.reject(new InferenceError("invalid-input", problem));
      }
      if (groups.length === 0) return Promise.resolve({ vectors: new Float32Array(0), inferenceMs: 0, paddedTokens: 0 });
      const p = runGroups(groups);
      inFlight.add(p);
      void p.catch(() => {}).finally(() => inFlight.delete(p));
      return p;
    },
    close() {
      unsubscribe();
      closing ??= Promise.allSettled([...inFlight]).then(async () => {
        await host.request({ op: "unload", model: key }).catch(() => {});
      });
      return closing;
    },
  };
}
