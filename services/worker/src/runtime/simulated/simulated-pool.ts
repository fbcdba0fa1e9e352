/**
 * The runtime adapter's interface ({@link InferenceThreads}) over a simulated accelerator: a model
 * "loads" for the profile's load time and "runs" for the profile's cost on the worker's one
 * shared device, answering deterministic rows of the model's shape. Selected per worker with
 * `SHOAL_RUNTIME=simulated:<profile>` (issue #16); the residency manager sees an ordinary load.
 */
import type { ModelSpec } from "@shoal/common/model-manifest";
import { InferenceError } from "../errors.ts";
import { groupProblem } from "../group-problem.ts";
import type { InferenceThreads, InferenceThreadsInfo, RunGroup, RunResult } from "../inference-threads.ts";
import type { SimulatedDevice } from "./device.ts";
import { syntheticRows } from "./synthetic-output.ts";

/** Options of {@link createSimulatedPool}. */
export interface SimulatedPoolOptions {
  readonly spec: ModelSpec;
  /** The worker's device, shared by all its models (one call at a time across them). */
  readonly device: SimulatedDevice;
  /** Reported in `info.threads` only: the device serialises calls whatever the thread count. */
  readonly threads?: number;
}

/** "Loads" the model (waits the profile's load time) and returns a pool that runs it on `device`. */
export async function createSimulatedPool(opts: SimulatedPoolOptions): Promise<InferenceThreads> {
  const { spec, device } = opts;
  await device.load();
  const info: InferenceThreadsInfo = Object.freeze({
    modelId: spec.id,
    provider: "simulated",
    runtime: device.label,
    requestedProvider: "cpu",
    threads: opts.threads ?? 1,
    intraOpThreads: 1,
  });
  let closing: Promise<void> | undefined;
  const inFlight = new Set<Promise<unknown>>();

  return {
    dimensions: spec.dimensions,
    info,
    run(groups: readonly RunGroup[]): Promise<RunResult> {
      if (closing !== undefined) return Promise.reject(new InferenceError("closed", "inference pool is closed"));
      for (const g of groups) {
        const problem = groupProblem(g);
        if (problem !== undefined) return Promise.reject(new InferenceError("invalid-input", problem));
      }
      if (groups.length === 0) return Promise.resolve({ vectors: new Float32Array(0), inferenceMs: 0, paddedTokens: 0 });
      const shapes = groups.map((g) => ({ batch: g.ids.length, seqLen: Math.max(...g.ids.map((s) => s.length)) }));
      const paddedTokens = shapes.reduce((n, s) => n + s.batch * s.seqLen, 0);
      const p = device.compute(shapes).then((inferenceMs) => ({
        vectors: syntheticRows(groups, spec.dimensions, spec.task),
        inferenceMs,
        paddedTokens,
      }));
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      return p;
    },
    close() {
      // Runs already on the device finish, as the thread pool lets executing runs finish.
      closing ??= Promise.allSettled([...inFlight]).then(() => undefined);
      return closing;
    },
  };
}
