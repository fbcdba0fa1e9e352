/**
 * Opens an ONNX Runtime session for a model spec: provider choice with CPU fallback, and a check
 * that the graph's inputs and output are the ones the manifest names. Used by the inference
 * thread and by the raw-throughput benchmark, so both run the same session configuration.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as ort from "onnxruntime-node";
import { ModelLoadError } from "./errors.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";

/** Execution provider a caller may ask for. */
export type ExecutionProviderChoice = "cpu" | "cuda";

/** The part of a {@link ModelSpec} a session needs (plain data: it crosses to worker threads). */
export type SessionModel = Pick<ModelSpec, "modelPath" | "inputNames" | "outputName" | "dimensions" | "pooling">;

/** How to configure the session. */
export interface SessionSettings {
  /** ONNX Runtime intra-op threads; 0 lets ONNX Runtime pick (one per core). */
  readonly intraOpThreads: number;
  readonly executionProvider: ExecutionProviderChoice;
  /**
   * Let idle intra-op threads spin between parallel sections (ONNX Runtime's default). Off by
   * default here: on a host shared with the worker's main thread, the gateway and the broker,
   * spinning threads starve them; measured 0.82 -> 0.88 of the raw ceiling with it off.
   */
  readonly allowSpinning?: boolean;
}

/** An open session and the provider it actually runs on. */
export interface OpenedSession {
  readonly session: ort.InferenceSession;
  readonly provider: ExecutionProviderChoice;
  /** Why CUDA was asked for but CPU is used; undefined when the provider is the one asked for. */
  readonly fallbackReason: string | undefined;
}

/**
 * The CUDA provider's shared libraries that are missing next to onnxruntime-node's binding (on
 * linux/x64 they are only downloaded by `ONNXRUNTIME_NODE_INSTALL=cuda12`). Checked before asking
 * ONNX Runtime, which would otherwise print its own native error to stderr (not silenced by
 * session log levels) on top of our one fallback warning. Empty on other platforms: there the
 * session creation attempt decides.
 */
export function missingCudaProviderLibraries(): string[] {
  if (process.platform !== "linux") return [];
  const pkg = createRequire(import.meta.url).resolve("onnxruntime-node/package.json");
  const binDir = join(dirname(pkg), "bin", "napi-v6", process.platform, process.arch);
  return ["libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"].map((f) => join(binDir, f)).filter((f) => !existsSync(f));
}

/** Replaceable checks, for tests that mock the GPU host this machine is not. */
export interface SessionProbes {
  readonly missingCudaProviderLibraries: () => string[];
}

const defaultProbes: SessionProbes = { missingCudaProviderLibraries };

function baseOptions(settings: SessionSettings): ort.InferenceSession.SessionOptions {
  if (!(Number.isSafeInteger(settings.intraOpThreads) && settings.intraOpThreads >= 0)) {
    throw new RangeError(`intraOpThreads must be an integer >= 0 (got ${settings.intraOpThreads})`);
  }
  return {
    graphOptimizationLevel: "all",
    executionMode: "sequential",
    intraOpNumThreads: settings.intraOpThreads,
    // One graph branch at a time: BERT encoders are a chain, extra inter-op threads only contend.
    interOpNumThreads: 1,
    extra: { session: { intra_op: { allow_spinning: settings.allowSpinning === true ? "1" : "0" } } },
  };
}

/** Problems with the graph's signature versus the manifest, each naming the manifest field. */
function signatureProblems(session: ort.InferenceSession, model: SessionModel): string[] {
  const problems: string[] = [];
  const mapped = new Map<string, string>([
    [model.inputNames.inputIds, "onnx.inputs.inputIds"],
    [model.inputNames.attentionMask, "onnx.inputs.attentionMask"],
  ]);
  if (model.inputNames.tokenTypeIds !== undefined) mapped.set(model.inputNames.tokenTypeIds, "onnx.inputs.tokenTypeIds");
  for (const [name, field] of mapped) {
    if (!session.inputNames.includes(name)) {
      problems.push(`${field}: the graph has no input "${name}" (inputs: ${session.inputNames.join(", ")})`);
    }
  }
  for (const meta of session.inputMetadata) {
    if (!mapped.has(meta.name)) problems.push(`onnx.inputs: graph input "${meta.name}" is not mapped by the manifest`);
    else if (meta.isTensor && meta.type !== "int64") problems.push(`onnx.inputs: graph input "${meta.name}" is ${meta.type}, not int64`);
  }
  const out = session.outputMetadata.find((m) => m.name === model.outputName);
  if (out === undefined) {
    problems.push(`onnx.output: the graph has no output "${model.outputName}" (outputs: ${session.outputNames.join(", ")})`);
  } else if (out.isTensor) {
    if (out.type !== "float32") problems.push(`onnx.output: "${model.outputName}" is ${out.type}, not float32`);
    const rank = model.pooling === "none" ? 2 : 3;
    if (out.shape.length !== 0 && out.shape.length !== rank) {
      problems.push(`onnx.output: "${model.outputName}" has rank ${out.shape.length}, pooling "${model.pooling}" needs ${rank}`);
    }
    const last = out.shape[out.shape.length - 1];
    if (typeof last === "number" && last !== model.dimensions) {
      problems.push(`dimensions: ${model.dimensions} does not match the graph output's last dimension ${last}`);
    }
  }
  return problems;
}

/**
 * Creates the session. With `executionProvider: 'cuda'` it tries CUDA then CPU; when the CUDA
 * provider cannot be created (not installed, no device) it opens a CPU session and says why in
 * `fallbackReason` — the caller logs it once.
 * @throws ModelLoadError when the model file cannot be loaded or does not match the manifest
 */
export async function openSession(model: SessionModel, settings: SessionSettings, probes: SessionProbes = defaultProbes): Promise<OpenedSession> {
  const options = baseOptions(settings);
  let fallbackReason: string | undefined;
  let session: ort.InferenceSession | undefined;
  if (settings.executionProvider === "cuda") {
    const missing = probes.missingCudaProviderLibraries();
    if (missing.length > 0) {
      fallbackReason = `CUDA provider libraries are not installed (missing ${missing.join(", ")}; install onnxruntime-node with ONNXRUNTIME_NODE_INSTALL=cuda12 on GPU hosts)`;
    } else {
      try {
        session = await ort.InferenceSession.create(model.modelPath, { ...options, executionProviders: ["cuda", "cpu"] });
      } catch (err) {
        fallbackReason = `CUDA session creation failed (${err instanceof Error ? err.message : String(err)})`;
      }
    }
  }
  if (session === undefined) {
    try {
      session = await ort.InferenceSession.create(model.modelPath, { ...options, executionProviders: ["cpu"] });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new ModelLoadError(model.modelPath, [`onnx.file: ONNX Runtime cannot load it (${message})`], { cause: err });
    }
  }
  const problems = signatureProblems(session, model);
  if (problems.length > 0) {
    await session.release();
    throw new ModelLoadError(model.modelPath, problems);
  }
  return { session, provider: fallbackReason === undefined ? settings.executionProvider : "cpu", fallbackReason };
}
