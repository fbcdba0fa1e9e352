import { stat } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { firstExisting, modelIdentity, sessionBytesOfFile, type Catalog, type CatalogModel, type Logger } from "@shoal/common";
import type { Clock } from "../batching/clock.ts";
import type { ComputeGate } from "../batching/compute-gate.ts";
import { LoadBackoff, type LoadFailure } from "../residency/load-backoff.ts";
import { Residency, type Lease, type ResidencyEvent } from "../residency/residency.ts";
import { createInferenceThreads, type InferenceThreads } from "../runtime/inference-threads.ts";
import { SidecarHost } from "../runtime/sidecar/sidecar-host.ts";
import { createSidecarPool } from "../runtime/sidecar/sidecar-pool.ts";
import { createSimulatedDevice, type SimulatedDevice } from "../runtime/simulated/device.ts";
import { simProfile } from "../runtime/simulated/profile.ts";
import { createSimulatedPool } from "../runtime/simulated/simulated-pool.ts";
import { createTextTokenizer } from "../runtime/text-tokenizer.ts";
import type { WorkerConfig } from "../config.ts";
import type { WorkerMetrics } from "../telemetry/worker-metrics.ts";
import { CompositeRunner } from "./composite-runner.ts";
import { ModelRunner, type ModelRunnerOptions } from "./model-runner.ts";

/** What serves one model on this worker: its own session (ModelRunner), or a composite over an embedder's. */
export type FleetRunner = ModelRunner | CompositeRunner;

/**
 * Resident bytes of a model on this worker: each inference thread holds its own session, so the
 * per-session size (the catalog's `memory`, else the manifest's, else 1.5× the ONNX file) times
 * the threads.
 */
export async function estimateModelBytes(model: CatalogModel, sessions: number): Promise<number> {
  // A composite holds no session: its embedder's bytes are counted once, under the embedder.
  if (model.composite !== undefined) return 0;
  if (model.runtime?.kind === "sidecar") {
    // One copy in the sidecar process whatever the thread count: the weights file plus activations.
    return (
      model.memoryBytes ?? sessionBytesOfFile((await stat(join(model.runtime.weightsDir, "model.safetensors")).catch(() => stat(model.spec.modelPath))).size)
    );
  }
  const perSession = model.memoryBytes ?? sessionBytesOfFile((await stat(model.spec.modelPath)).size);
  return perSession * sessions;
}

/** The PyTorch sidecar's script: beside a bundle (build:services copies it there), else services/sidecar-pytorch/sidecar.py. */
const PYTORCH_SIDECAR = firstExisting([
  fileURLToPath(new URL("./sidecar-pytorch/sidecar.py", import.meta.url)),
  fileURLToPath(new URL("../../../sidecar-pytorch/sidecar.py", import.meta.url)),
]);

export interface ModelFleetDeps {
  readonly config: WorkerConfig;
  readonly catalog: Catalog;
  readonly gate: ComputeGate;
  readonly metrics: WorkerMetrics;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Per-model runner options (batching, callbacks) the worker composes. */
  readonly runnerOptions: (model: CatalogModel) => ModelRunnerOptions;
  /** Told about every residency change (status publishing). */
  readonly onChange: () => void;
}

/**
 * The pool's models on this worker: loaded on demand under the memory budget, evicted by policy.
 * A lease is always on the model's current revision (the registry's record now, compared by
 * modelIdentity): a session loaded from a model since replaced under its id is retired (no new
 * lease; freed once its batches in flight finish) and the new revision loaded in its place, so a
 * batch only ever holds rows of one revision.
 */
export interface ModelFleet {
  readonly residency: Residency<FleetRunner>;
  /** `cpu`, `cuda` or `simulated:<profile>` (as the cluster status should show it). */
  readonly runtimeLabel: string;
  /** The worker's simulated accelerator, when `SHOAL_RUNTIME` names one (benchmarks read its lag). */
  readonly device: SimulatedDevice | undefined;
  /** Loads the start-up models (those named, else the pool's while they fit); failures are logged. */
  preload(): Promise<void>;
  /** A lease at once when the model's current revision is resident, else undefined (a replaced one is retired). */
  tryAcquire(model: string): Lease<FleetRunner> | undefined;
  /**
   * A lease on the model's current revision, loading it if needed (after a replaced one's batches and
   * unload). While the model's last load failed and waits out its backoff (LoadBackoff), rejects at
   * once with that load's error.
   */
  acquire(model: string): Promise<Lease<FleetRunner>>;
  /** The model's last load failed here: its error and the backoff before the next try; else undefined. */
  loadFailure(model: string): LoadFailure | undefined;
  /** Every model whose last load failed here (readiness). */
  loadFailures(): LoadFailure[];
  close(): Promise<void>;
}

export async function createModelFleet(deps: ModelFleetDeps): Promise<ModelFleet> {
  const { config, catalog, metrics } = deps;
  const log = deps.logger.child({ component: "models" });
  // One session per inference thread: the compute gate never runs more than `inferenceThreads`
  // calls at once across all models, interactive ones included.
  const sessions = config.inferenceThreads;
  const poolModels = [...catalog.models.values()].filter((m) => m.pool === config.pool);
  const device =
    config.runtime.kind === "simulated"
      ? createSimulatedDevice({
          profile: { ...simProfile(config.runtime.profile), ...(config.runtime.loadMs !== undefined ? { loadMs: config.runtime.loadMs } : {}) },
          dilation: config.runtime.dilation,
          // Benchmarks (bench:intake) rebuild each device's busy intervals from these lines.
          ...(config.runtime.logCalls
            ? { onRun: (startUnixMs: number, ms: number) => log.info({ startUnixMs, ms: Math.round(ms * 100) / 100 }, "simulated run") }
            : {}),
        })
      : undefined;
  metrics.runtimeInfo.set({ runtime: config.runtimeLabel }, 1);
  if (device !== undefined) {
    metrics.simulatedLag.watch(() => device.lag());
    log.warn(
      {
        runtime: device.label,
        dilation: device.dilation,
        source: device.profile.source,
        aMs: device.profile.aMs,
        bMsPerToken: device.profile.bMsPerToken,
        cMsPerToken2: device.profile.cMsPerToken2,
      },
      "SIMULATED accelerator runtime: models are not computed, answers are synthetic, timings come from the profile",
    );
  }
  const sizes = new Map<string, number>();
  for (const m of poolModels) {
    // Its files not fetched yet and no size recorded: sized on its first need (sizeOnFirstNeed).
    if (m.ensureFiles !== undefined && m.memoryBytes === undefined && device === undefined) continue;
    // A simulated model lives once on the worker's one device, whatever the thread count.
    sizes.set(m.id, device === undefined || m.composite !== undefined ? await estimateModelBytes(m, sessions) : (m.memoryBytes ?? device.profile.memoryBytes));
  }

  // A model the registry added after start (or replaced under the same id) is sized on its first
  // need, from its files, as the start-up ones were above; the residency checks it against the budget.
  const sizedFrom = new Map<string, string>(poolModels.filter((m) => sizes.has(m.id)).map((m) => [m.id, modelIdentity(m)]));
  async function sizeOnFirstNeed(id: string): Promise<void> {
    const m = catalog.models.get(id);
    if (m === undefined || sizedFrom.get(id) === modelIdentity(m)) return;
    // An hf: model known from its registry record: its files come now, on its first need.
    if (m.memoryBytes === undefined) await m.ensureFiles?.();
    sizes.set(id, device === undefined || m.composite !== undefined ? await estimateModelBytes(m, sessions) : (m.memoryBytes ?? device.profile.memoryBytes));
    sizedFrom.set(id, modelIdentity(m));
  }

  // Which model (its identity) each runner was loaded from.
  const loadedFrom = new WeakMap<FleetRunner, string>();
  /** Whether a lease is on the model's current revision (a model no longer in the registry: whatever is loaded). */
  function current(lease: Lease<FleetRunner>): boolean {
    const now = catalog.models.get(lease.model);
    return now === undefined || loadedFrom.get(lease.resource) === modelIdentity(now);
  }
  /** A lease on an out-of-date runner is given back and the runner retired: no new lease; freed once idle. */
  function retired(lease: Lease<FleetRunner>): undefined {
    lease.release();
    log.info({ model: lease.model }, "model replaced under its id in the registry: its loaded revision is retired");
    residency.retire(lease.model);
    return undefined;
  }
  function tryAcquire(id: string): Lease<FleetRunner> | undefined {
    const lease = residency.tryAcquire(id);
    return lease === undefined || current(lease) ? lease : retired(lease);
  }
  // After a failed load a model is not tried again for a while, growing while it keeps failing.
  const backoff = new LoadBackoff({ now: () => deps.clock.now() });
  async function acquire(id: string): Promise<Lease<FleetRunner>> {
    const failed = backoff.failure(id);
    if (failed !== undefined && failed.retryInMs > 0) throw failed.error;
    for (;;) {
      await sizeOnFirstNeed(id);
      // After a retire, this waits for the old runner's batches and unload, then loads the new revision.
      const lease = await residency.acquire(id);
      if (current(lease)) return lease;
      retired(lease);
    }
  }
  // What a composite leases its embedder through: the same revision check.
  const embedders = { tryAcquire, acquire };

  // Started on the first sidecar model's load, shared by all of them, closed with the fleet.
  let sidecar: SidecarHost | undefined;
  function sidecarHost(): SidecarHost {
    sidecar ??= new SidecarHost({ name: "pytorch", script: PYTORCH_SIDECAR, ...config.sidecar, logger: log });
    return sidecar;
  }

  function openRuntime(model: CatalogModel): Promise<InferenceThreads> {
    if (device !== undefined) return createSimulatedPool({ spec: model.spec, device, threads: sessions });
    if (model.runtime?.kind === "sidecar") {
      return createSidecarPool({ spec: model.spec, host: sidecarHost(), weightsDir: model.runtime.weightsDir, threads: sessions });
    }
    return createInferenceThreads({
      spec: model.spec,
      threads: sessions,
      intraOpThreads: config.intraOpThreads,
      allowSpinning: config.ortAllowSpinning,
      executionProvider: config.executionProvider,
      // The CUDA arena cannot be capped from here: onnxruntime-node 1.30 forwards only deviceId to
      // the CUDA provider. The budget is kept by this worker's accounting of model sizes.
      logger: log,
    });
  }

  async function load(id: string): Promise<FleetRunner> {
    // Gone from the registry (removed, its grace passed) while its load waited: a load failure.
    const model = catalog.models.get(id);
    if (model === undefined) throw new Error(`model '${id}' is no longer in the model registry`);
    // Fetched into this host's cache on the model's first need (a no-op once they are there).
    await model.ensureFiles?.();
    if (model.composite !== undefined) {
      const { composite } = model;
      const limits = deps.runnerOptions(model).inputLimits ?? { maxInputs: Infinity, maxInputChars: Infinity, maxRequestBytes: Infinity };
      const runner = new CompositeRunner({ ...model, composite }, embedders, limits, deps.clock, config.workerId, log);
      loadedFrom.set(runner, modelIdentity(model));
      return runner;
    }
    const inference = await openRuntime(model);
    try {
      const tokenizer = await createTextTokenizer(model.spec);
      const runner = new ModelRunner(model.spec, tokenizer, inference, deps.runnerOptions(model), deps.clock, log);
      loadedFrom.set(runner, modelIdentity(model));
      return runner;
    } catch (err) {
      await inference.close();
      throw err;
    }
  }

  function onEvent(e: ResidencyEvent): void {
    const labels = { model: e.model };
    switch (e.type) {
      case "loaded":
        backoff.succeeded(e.model);
        metrics.modelLoads.inc(labels);
        metrics.coldStartSeconds.set(labels, e.coldStartMs / 1000);
        log.info({ model: e.model, coldStartMs: Math.round(e.coldStartMs) }, "model loaded");
        break;
      case "evicted":
        if (e.reason === "replaced") log.info({ model: e.model }, "replaced revision unloading (its batches in flight are done)");
        if (e.reason !== "room") break;
        metrics.modelEvictions.inc(labels);
        log.info({ model: e.model, forModel: e.forModel }, "model evicted to make room");
        break;
      case "load-failed": {
        metrics.modelLoadFailures.inc(labels);
        const retryInMs = backoff.failed(e.model, e.error);
        log.error({ model: e.model, err: e.error, retryInMs }, "model failed to load");
        break;
      }
      case "thrash":
        metrics.residencyThrash.inc(labels);
        log.warn({ model: e.model }, "model reloaded soon after its eviction (thrashing): raise SHOAL_MEMORY_BUDGET or pin the model");
        break;
      default:
        break;
    }
    metrics.memoryUsedBytes.set(residency.usedBytes);
    metrics.modelsResident.set(residency.snapshot().filter((m) => m.state === "resident").length);
    deps.onChange();
  }

  const residency = new Residency<FleetRunner>({
    budgetBytes: config.memoryBudgetBytes,
    policy: config.residencyPolicy,
    sizeOf: (id) => sizes.get(id) ?? Number.POSITIVE_INFINITY,
    isPinned: (id) => catalog.models.get(id)?.pinned ?? false,
    load,
    // The fleet's LoadBackoff alone decides when a failed model is tried again (see acquire).
    failedRetryMs: 0,
    async unload(_id, runner) {
      await runner.idle();
      await runner.close();
    },
    clock: deps.clock,
    onEvent,
  });
  metrics.memoryBudgetBytes.set(config.memoryBudgetBytes);

  return {
    residency,
    runtimeLabel: config.runtimeLabel,
    device,
    async preload() {
      const named = config.models.filter((m) => m !== "none");
      const unknown = named.filter((m) => !poolModels.some((p) => p.id === m));
      if (unknown.length > 0) throw new Error(`SHOAL_MODELS names models that are not in pool '${config.pool}': ${unknown.join(", ")}`);
      let ids: string[];
      if (config.models.includes("none")) ids = [];
      else if (named.length > 0) ids = named;
      else {
        // The pool's models in catalog order while they fit (pinned ones first).
        ids = [];
        let used = 0;
        for (const m of [...poolModels].sort((a, b) => Number(b.pinned) - Number(a.pinned))) {
          const size = sizes.get(m.id);
          // Unsized: an hf: model whose files come on its first need, not at start.
          if (size === undefined || used + size > config.memoryBudgetBytes) continue;
          used += size;
          ids.push(m.id);
        }
      }
      for (const id of ids) {
        try {
          (await acquire(id)).release();
        } catch (err) {
          log.error({ model: id, err }, "start-up load failed; the model's jobs will retry it");
        }
      }
    },
    tryAcquire,
    acquire,
    loadFailure: (id) => backoff.failure(id),
    loadFailures: () => backoff.failures(),
    close: async () => {
      await residency.close();
      await sidecar?.close();
    },
  };
}
