import { availableParallelism, hostname } from "node:os";
import {
  EnvReader,
  INTAKE_KINDS,
  parseByteSize,
  readClusterKeys,
  readKafkaSettings,
  readRegistryTopic,
  ROUTED_WORKER_ID,
  type IntakeKind,
  type KafkaSettings,
} from "@shoal/common";
import { DEFAULT_BATCH_MAX_TOKENS } from "./batching/batcher.ts";
import { memoryLimitBytes } from "./memory-limit.ts";
import { simProfileIds } from "./runtime/simulated/profile.ts";

/**
 * What runs the models: ONNX Runtime, or a simulated accelerator of a named profile whose every
 * cost is multiplied by `dilation` (issue #16: benchmarks of dispatch on hardware we lack).
 */
export type RuntimeChoice =
  | { readonly kind: "onnx" }
  | {
      readonly kind: "simulated";
      readonly profile: string;
      readonly dilation: number;
      /** `SHOAL_SIM_LOG_CALLS`: log every device run (start, duration) for benchmarks that rebuild busy time. */
      readonly logCalls?: boolean;
      /** `SHOAL_SIM_LOAD_MS`: the model-load cost in profile ms instead of the profile's own (a benchmark's start-up time). */
      readonly loadMs?: number;
      /** `SHOAL_SIM_FETCH_DELAY_MS`: each job record reaches the worker this long after the intake took it (a simulated network: the job lifecycle holds and counts it at once and runs it then, `arrivalDelayMs`). */
      readonly fetchDelayMs?: number;
    };

/** The worker's whole configuration, validated once at start. */
export interface WorkerConfig {
  readonly workerId: string;
  readonly pool: string;
  readonly catalogPath: string;
  /**
   * SHOAL_REGISTRY_TOPIC: the model registry's compacted topic (default `shoal.registry`). Change it
   * only to run several Shoal clusters on one Kafka cluster, each with a registry of its own.
   */
  readonly registryTopic: string;
  /**
   * Models of the pool this worker loads at start (others load on their first job); empty = the
   * pool's models in catalog order while they fit the budget; ["none"] = none.
   */
  readonly models: readonly string[];
  /** Bytes resident models may take (estimates; on CUDA hosts also each session's arena limit). */
  readonly memoryBudgetBytes: number;
  /** Which idle model leaves when a load needs room. */
  readonly residencyPolicy: "lru" | "pinned-by-traffic";
  /** Input limits the worker enforces itself (as the gateway does): texts per job, characters per text, bytes of text per job. */
  readonly maxInputs: number;
  readonly maxInputChars: number;
  readonly maxRequestBytes: number;
  /** Runs a job gets before it goes to the dead-letter topic (1 = no retry). */
  readonly maxAttempts: number;
  /** How often the worker publishes its status (models, memory, in-flight, pending tokens) to the status topic (routed dispatch boards: down to 20 ms). */
  readonly statusIntervalMs: number;
  /** SHOAL_CLUSTER_KEYS / _FILE: keys that sign and check job, result and cancel records (none: off). */
  readonly clusterKeys: readonly Buffer[];
  /** SHOAL_REPLY_REGISTRY (default on; 0 opts out): results go only to reply topics a live gateway registered on shoal.gateways. */
  readonly replyRegistry: boolean;
  /**
   * SHOAL_DIRECT_REPLY (default on; needs the registry): hand each result straight to the gateway
   * holding the call when its registration gives an address, the reply topic as the fallback.
   */
  readonly directReply: boolean;
  /**
   * SHOAL_DIRECT_REPLY_STREAM (default on): direct results as frames of one long-lived stream per
   * gateway, each acknowledged; 0: one POST per result (what gateways without streams get anyway).
   */
  readonly directReplyStream: boolean;
  /** SHOAL_MAX_GATEWAYS: most gateway registrations kept. */
  readonly maxGateways: number;
  readonly kafka: KafkaSettings;
  readonly executionProvider: "cpu" | "cuda";
  /** How the worker starts its runtime sidecar, for catalog models with `runtime: sidecar:<name>`. */
  readonly sidecar: SidecarConfig;
  /** `SHOAL_RUNTIME` (`onnx` or `simulated:<profile>`) with `SHOAL_SIM_DILATION`. */
  readonly runtime: RuntimeChoice;
  /**
   * How the runtime shows in the cluster status, metrics and logs: the execution provider for
   * ONNX Runtime (`cpu`, `cuda`), `simulated:<profile>` for a simulated accelerator.
   */
  readonly runtimeLabel: string;
  /** Inference threads per model (each runs one batch at a time). */
  readonly inferenceThreads: number;
  /**
   * Interactive batches of a model that may form while one of its batch-lane batches is in
   * progress; they take the runtime first at the batch lane's next call boundary.
   */
  readonly interactiveThreads: number;
  /** Inference threads the batch lane leaves to interactive work while there is some. */
  readonly interactiveReserve: number;
  /** ONNX Runtime intra-op threads per inference thread. */
  readonly intraOpThreads: number;
  /** Let idle ONNX Runtime threads spin: faster on a dedicated host, starves neighbours on a shared one. */
  readonly ortAllowSpinning: boolean;
  /** Default batching policy; a catalog entry may override it per model. */
  readonly batchPolicy: "token-budget" | "fixed-window";
  /** Percent of each batch's token budget the batch lane is guaranteed when both lanes wait. */
  readonly batchLaneSharePercent: number;
  /** A batch-lane job that waited this long is served like an interactive one. */
  readonly batchLaneAgingMs: number;
  readonly batchMaxTokens: number;
  readonly batchMaxItems: number;
  readonly batchMaxWaitMs: number;
  /**
   * Most padded tokens per model call of the batch lane: between two calls an interactive run
   * takes the runtime first, so this bounds how long interactive work waits behind the batch lane.
   */
  readonly batchLaneCallTokens: number;
  readonly perCallOverheadTokens: number;
  /**
   * `SHOAL_BATCH_CLOSE_ON_GRANT` (default on): a model's batch closes when the worker's compute
   * gate grants it a run, so jobs that arrive while another model's batch runs join it. Off: it
   * closes by the batching rules alone and then waits for the gate (the behaviour before; kept
   * for the dispatch bench's ablation).
   */
  readonly batchCloseOnGrant: boolean;
  /** Records pulled but not answered; past this the worker stops fetching. */
  readonly maxInFlightJobs: number;
  /** `SHOAL_MAX_INFLIGHT_BYTES`: record bytes held at once before fetching pauses. */
  readonly maxInFlightBytes: number;
  /**
   * `SHOAL_ROUTED_INTAKE=1`: also read this worker's own topics (`shoal.jobs.<pool>.w.<id>.<lane>`),
   * where a gateway with routed dispatch (SHOAL_DISPATCH) sends jobs it picked this worker for.
   */
  readonly routedIntake: boolean;
  /** How this worker takes jobs; undefined: the pool's choice in the catalog (`share` by default). */
  readonly intake: IntakeKind | undefined;
  /** Share intake: how long a taken job stays locked to this worker before the broker gives it to another. */
  readonly shareLockMs: number;
  /** Share intake: deliveries of one job before it is given up (dead-lettered). */
  readonly shareDeliveryLimit: number;
  /**
   * Share intake: how long a waiting fetch of an interactive topic waits at the broker. New jobs
   * end it at once; a released job is seen by an idle worker only when it ends.
   */
  readonly shareIdleWaitMs: number;
  /** SHOAL_SHARE_IDLE_JITTER: per-model pools' idle waiting fetches wait 0.5–1.5× shareIdleWaitMs (default on). */
  readonly shareIdleJitter: boolean;
  /**
   * SHOAL_SHARE_HEADS_MS: per-model share pools: a busy worker takes next the model whose oldest job
   * was written first, from a view of the model queues' heads at most this old (0: its own rotation).
   */
  readonly shareHeadsMs: number;
  /**
   * SHOAL_SHARE_ACK_LINGER_MS: how long a finished job's acknowledgement may wait to go to the
   * broker with others (0: with the next fetch). The broker writes share state once per
   * acknowledging request, so at light load each job costs a write of its own without it.
   */
  readonly shareAckLingerMs: number;
  /**
   * SHOAL_SHARE_WAKE: after giving a job back for an idle worker, write a wake-up marker to its
   * partition so a waiting fetch takes it at once (default off: at the default idle wait its effect
   * was within the noise; with a long SHOAL_SHARE_IDLE_WAIT_MS it keeps give-backs fast; see WAKE_HEADER).
   */
  readonly shareWake: boolean;
  /**
   * SHOAL_SHARE_GIVE_BACK_REST_MS: after giving a job back for an idle worker, a busy worker asks
   * that model's topic for nothing this long (0: off), so its own next fetch does not take it back.
   */
  readonly shareGiveBackRestMs: number;
  /** SHOAL_SHARE_GIVE_BACKS: deliveries a job may spend being given back for an idle worker (default 1). */
  readonly shareGiveBacks: number;
  /**
   * Share intake: estimated tokens of the jobs in hand (computing or waiting) under which a busy
   * worker asks the queue for more, so it never hoards jobs an idle worker could run; a worker
   * holding nothing takes a batch's worth (threads × batch tokens).
   */
  readonly prefetchTokens: number;
  /** Share intake: estimated tokens a worker holding nothing takes at once (a batch's worth per thread). */
  readonly idleTakeTokens: number;
  /**
   * SHOAL_TAKE_AHEAD_MS: share intake: a busy worker takes the idle take this long before its work
   * in hand is predicted to be done (0: off, it asks once it is done; "auto": its measured take round trip).
   */
  readonly takeAheadMs: number | "auto";
  /**
   * SHOAL_SHARE_KEEP_WITHIN_TRIP (with SHOAL_TAKE_AHEAD_MS=auto; default on): a job the share intake
   * would give back for an idle worker is kept when this worker's work in hand is predicted done
   * within its measured take round trip (a give-back costs another worker at least that).
   */
  readonly shareKeepWithinTrip: boolean;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  /** On SIGTERM: how long in-flight batches may take before the worker exits anyway. */
  readonly drainGraceMs: number;
  /** `/metrics`, `/healthz`, `/readyz` listen here (0: any free port, logged at start). */
  readonly httpHost: string;
  readonly httpPort: number;
}

/** Reads `SHOAL_*` and `KAFKA_*` variables; throws ConfigError listing every problem. */
export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const r = new EnvReader(env);
  const workerId = r.string("SHOAL_WORKER_ID", `${hostname()}-${process.pid}`);
  const catalogPath = r.optionalString("SHOAL_CATALOG");
  if (catalogPath === undefined) r.problem("SHOAL_CATALOG: required (path to the model catalog YAML)");
  const sessionTimeoutMs = r.int("SHOAL_SESSION_TIMEOUT_MS", 6_000, { min: 1_000 });
  const heartbeatIntervalMs = r.int("SHOAL_HEARTBEAT_INTERVAL_MS", 1_000, { min: 100 });
  if (heartbeatIntervalMs * 3 > sessionTimeoutMs) r.problem("SHOAL_HEARTBEAT_INTERVAL_MS must be at most a third of SHOAL_SESSION_TIMEOUT_MS");
  const budgetText = r.optionalString("SHOAL_MEMORY_BUDGET");
  // Half of what this process may use: the cgroup's limit in a container, else the host's memory.
  const memoryBudgetBytes = budgetText === undefined ? Math.floor(memoryLimitBytes() / 2) : parseByteSize(budgetText);
  if (memoryBudgetBytes === null) r.problem(`SHOAL_MEMORY_BUDGET: expected a size such as 4GiB or a byte count (got '${budgetText}')`);
  // Two sessions per model by default (one can serve interactive work while the batch lane has
  // the other), splitting the cores between them: on 2 cores that is also the most tokens/s.
  const cores = availableParallelism();
  const inferenceThreads = r.int("SHOAL_INFERENCE_THREADS", cores >= 2 ? 2 : 1, { min: 1, max: 64 });
  const interactiveReserve = r.int("SHOAL_INTERACTIVE_RESERVE", inferenceThreads >= 2 ? 1 : 0, { min: 0, max: 63 });
  if (interactiveReserve >= inferenceThreads) {
    r.problem(
      `SHOAL_INTERACTIVE_RESERVE must be less than SHOAL_INFERENCE_THREADS (${inferenceThreads}): the batch lane needs a thread (got ${interactiveReserve})`,
    );
  }
  const batchMaxTokens = r.int("SHOAL_BATCH_MAX_TOKENS", DEFAULT_BATCH_MAX_TOKENS, { min: 16 });
  const perCallOverheadTokens = r.int("SHOAL_PER_CALL_OVERHEAD_TOKENS", 64, { min: 0 });
  const runtime = readRuntime(r);
  const routedIntake = r.bool("SHOAL_ROUTED_INTAKE", false);
  if (routedIntake && !ROUTED_WORKER_ID.test(workerId)) {
    r.problem(`SHOAL_WORKER_ID=${workerId}: with SHOAL_ROUTED_INTAKE=1 it names a topic: use 1-150 letters, digits, '.', '_', '-'`);
  }
  const executionProvider = r.oneOf("SHOAL_EXECUTION_PROVIDER", ["cpu", "cuda"] as const, "cpu");
  return r.done({
    workerId,
    pool: r.string("SHOAL_POOL", "default"),
    catalogPath: catalogPath ?? "",
    registryTopic: readRegistryTopic(r),
    models: r.list("SHOAL_MODELS", []),
    memoryBudgetBytes: memoryBudgetBytes ?? 0,
    residencyPolicy: r.oneOf("SHOAL_RESIDENCY_POLICY", ["lru", "pinned-by-traffic"] as const, "pinned-by-traffic"),
    statusIntervalMs: r.int("SHOAL_STATUS_INTERVAL_MS", 2_000, { min: 20, max: 60_000 }),
    replyRegistry: r.bool("SHOAL_REPLY_REGISTRY", true),
    directReply: r.bool("SHOAL_DIRECT_REPLY", true),
    directReplyStream: r.bool("SHOAL_DIRECT_REPLY_STREAM", true),
    maxGateways: r.int("SHOAL_MAX_GATEWAYS", 256, { min: 1 }),
    maxAttempts: r.int("SHOAL_MAX_ATTEMPTS", 3, { min: 1, max: 20 }),
    clusterKeys: readClusterKeys(r),
    kafka: readKafkaSettings(r, `shoal-worker-${workerId}`),
    executionProvider,
    sidecar: {
      python: r.string("SHOAL_SIDECAR_PYTHON", "python3"),
      device: r.oneOf("SHOAL_SIDECAR_DEVICE", ["auto", "cpu", "cuda"] as const, "auto"),
      dtype: r.oneOf("SHOAL_SIDECAR_DTYPE", ["auto", "fp32", "fp16", "bf16"] as const, "auto"),
      threads: r.int("SHOAL_SIDECAR_THREADS", 0, { min: 0, max: 256 }),
    },
    runtime,
    runtimeLabel: runtime.kind === "simulated" ? `simulated:${runtime.profile}` : executionProvider,
    inferenceThreads,
    interactiveThreads: r.int("SHOAL_INTERACTIVE_THREADS", 1, { min: 0, max: 16 }),
    interactiveReserve,
    intraOpThreads: r.int("SHOAL_INTRA_OP_THREADS", Math.max(1, Math.floor(cores / inferenceThreads)), { min: 1, max: 256 }),
    ortAllowSpinning: r.bool("SHOAL_ORT_ALLOW_SPINNING", false),
    batchPolicy: r.oneOf("SHOAL_BATCH_POLICY", ["token-budget", "fixed-window"] as const, "token-budget"),
    batchLaneSharePercent: r.int("SHOAL_BATCH_LANE_SHARE_PERCENT", 25, { min: 0, max: 100 }),
    batchLaneAgingMs: r.int("SHOAL_BATCH_LANE_AGING_MS", 2_000, { min: 0 }),
    batchMaxTokens,
    batchMaxItems: r.int("SHOAL_BATCH_MAX_ITEMS", 128, { min: 1 }),
    batchMaxWaitMs: r.int("SHOAL_BATCH_MAX_WAIT_MS", 0, { min: 0 }),
    batchLaneCallTokens: r.int("SHOAL_BATCH_LANE_CALL_TOKENS", 512, { min: 16 }),
    perCallOverheadTokens,
    batchCloseOnGrant: r.bool("SHOAL_BATCH_CLOSE_ON_GRANT", true),
    maxInputs: r.int("SHOAL_MAX_INPUTS", 256, { min: 1 }),
    maxInputChars: r.int("SHOAL_MAX_INPUT_CHARS", 32_768, { min: 1 }),
    maxRequestBytes: r.int("SHOAL_MAX_REQUEST_BYTES", 8 * 1024 * 1024, { min: 1024 }),
    maxInFlightJobs: r.int("SHOAL_MAX_INFLIGHT_JOBS", 1_024, { min: 1 }),
    maxInFlightBytes: r.int("SHOAL_MAX_INFLIGHT_BYTES", 256 * 1024 * 1024, { min: 1024 * 1024 }),
    routedIntake,
    intake: r.optionalString("SHOAL_INTAKE") === undefined ? undefined : r.oneOf("SHOAL_INTAKE", INTAKE_KINDS, "share"),
    shareLockMs: r.int("SHOAL_SHARE_LOCK_MS", 10_000, { min: 1_000, max: 3_600_000 }),
    shareDeliveryLimit: r.int("SHOAL_SHARE_DELIVERY_LIMIT", 5, { min: 2, max: 10 }),
    shareIdleWaitMs: r.int("SHOAL_SHARE_IDLE_WAIT_MS", 100, { min: 10, max: 2_000 }),
    shareIdleJitter: r.bool("SHOAL_SHARE_IDLE_JITTER", true),
    shareHeadsMs: r.int("SHOAL_SHARE_HEADS_MS", 0, { min: 0, max: 60_000 }),
    shareAckLingerMs: r.int("SHOAL_SHARE_ACK_LINGER_MS", DEFAULT_ACK_LINGER_MS, { min: 0, max: 5_000 }),
    shareWake: r.bool("SHOAL_SHARE_WAKE", false),
    shareGiveBackRestMs: r.int("SHOAL_SHARE_GIVE_BACK_REST_MS", 0, { min: 0, max: 10_000 }),
    shareGiveBacks: r.int("SHOAL_SHARE_GIVE_BACKS", 1, { min: 1, max: 8 }),
    // Work in hand under which a busy worker takes more: the other threads' batches plus a short
    // look-ahead (bench:intake: 2048 let a worker running a long batch take jobs an idle one could
    // have started at once).
    prefetchTokens: r.int("SHOAL_PREFETCH_TOKENS", (inferenceThreads - 1) * batchMaxTokens + DEFAULT_PREFETCH_LOOKAHEAD_TOKENS, { min: 1 }),
    idleTakeTokens: r.int("SHOAL_IDLE_TAKE_TOKENS", defaultIdleTakeTokens(inferenceThreads, batchMaxTokens, perCallOverheadTokens), { min: 1 }),
    // "auto": the lead follows the worker's measured take round trip.
    takeAheadMs: r.optionalString("SHOAL_TAKE_AHEAD_MS") === "auto" ? "auto" : r.int("SHOAL_TAKE_AHEAD_MS", 0, { min: 0, max: 10_000 }),
    shareKeepWithinTrip: r.bool("SHOAL_SHARE_KEEP_WITHIN_TRIP", true),
    sessionTimeoutMs,
    heartbeatIntervalMs,
    drainGraceMs: r.int("SHOAL_DRAIN_GRACE_MS", 20_000, { min: 0 }),
    httpHost: r.string("SHOAL_HTTP_HOST", "127.0.0.1"),
    httpPort: r.int("SHOAL_HTTP_PORT", 9464, { min: 0, max: 65535 }),
  });
}

/** `SHOAL_SIDECAR_*`: the runtime sidecar's interpreter, device, dtype and CPU threads. */
export interface SidecarConfig {
  /** Interpreter with torch and transformers (default `python3`). */
  readonly python: string;
  /** `auto` (CUDA when PyTorch sees a GPU), `cpu` or `cuda`. */
  readonly device: "auto" | "cpu" | "cuda";
  /** `auto`: float16 on CUDA, float32 on CPU. */
  readonly dtype: "auto" | "fp32" | "fp16" | "bf16";
  /** PyTorch CPU threads; 0 lets PyTorch pick. */
  readonly threads: number;
}

/** Default look-ahead of a busy share-intake worker with one thread: a few short jobs, never a long batch. */
export const DEFAULT_PREFETCH_LOOKAHEAD_TOKENS = 256;

/** Batches' worth an idle worker takes per thread where a call costs more than a full batch's tokens. */
export const ACCELERATOR_IDLE_TAKE_BATCHES = 4;

/**
 * What an idle share-group worker takes at once (SHOAL_IDLE_TAKE_TOKENS' default): a batch's worth
 * per inference thread; where a call's fixed cost exceeds a full batch's tokens (an accelerator:
 * `gpu-h200-minilm` is ~25,000 token-equivalents a call) four batches' worth. A busy worker there
 * takes nothing until its batches are done (see SHOAL_PREFETCH_TOKENS), so every take costs the
 * device a Kafka round trip idle; a take sized by the mean job under-fills batches of a
 * heavy-tailed mix, and in a burst the round trips and the short batches cost the shared queue a
 * tenth of its throughput (bench:dispatch, README "Bursts").
 */
export function defaultIdleTakeTokens(inferenceThreads: number, batchMaxTokens: number, perCallOverheadTokens: number): number {
  const batches = perCallOverheadTokens >= batchMaxTokens ? ACCELERATOR_IDLE_TAKE_BATCHES : 1;
  return inferenceThreads * batchMaxTokens * batches;
}

/** `SHOAL_RUNTIME`, `SHOAL_SIM_DILATION` (a positive number), `SHOAL_SIM_LOG_CALLS`, `SHOAL_SIM_LOAD_MS` and `SHOAL_SIM_FETCH_DELAY_MS` (only with a simulated runtime). */
function readRuntime(r: EnvReader): RuntimeChoice {
  const raw = r.string("SHOAL_RUNTIME", "onnx");
  const dilationText = r.optionalString("SHOAL_SIM_DILATION");
  const dilation = dilationText === undefined ? 1 : Number(dilationText);
  if (!(Number.isFinite(dilation) && dilation > 0)) r.problem(`SHOAL_SIM_DILATION=${dilationText}: expected a number > 0`);
  const loadText = r.optionalString("SHOAL_SIM_LOAD_MS");
  const loadMs = loadText === undefined ? undefined : Number(loadText);
  if (loadMs !== undefined && !(Number.isFinite(loadMs) && loadMs >= 0)) r.problem(`SHOAL_SIM_LOAD_MS=${loadText}: expected a number >= 0`);
  const delayText = r.optionalString("SHOAL_SIM_FETCH_DELAY_MS");
  const fetchDelayMs = delayText === undefined ? undefined : Number(delayText);
  if (fetchDelayMs !== undefined && !(Number.isInteger(fetchDelayMs) && fetchDelayMs >= 0 && fetchDelayMs <= 10_000)) {
    r.problem(`SHOAL_SIM_FETCH_DELAY_MS=${delayText}: expected an integer from 0 to 10000`);
  }
  if (raw === "onnx") {
    if (dilationText !== undefined) r.problem("SHOAL_SIM_DILATION: only applies with SHOAL_RUNTIME=simulated:<profile>");
    if (loadText !== undefined) r.problem("SHOAL_SIM_LOAD_MS: only applies with SHOAL_RUNTIME=simulated:<profile>");
    if (delayText !== undefined) r.problem("SHOAL_SIM_FETCH_DELAY_MS: only applies with SHOAL_RUNTIME=simulated:<profile>");
    return { kind: "onnx" };
  }
  const profile = raw.startsWith("simulated:") ? raw.slice("simulated:".length) : undefined;
  if (profile === undefined || !simProfileIds.includes(profile)) {
    r.problem(`SHOAL_RUNTIME=${raw}: expected onnx or simulated:<profile> with a profile of ${simProfileIds.join(", ")}`);
    return { kind: "onnx" };
  }
  const logCalls = r.bool("SHOAL_SIM_LOG_CALLS", false);
  return {
    kind: "simulated",
    profile,
    dilation,
    ...(logCalls ? { logCalls } : {}),
    ...(loadMs !== undefined ? { loadMs } : {}),
    ...(fetchDelayMs ? { fetchDelayMs } : {}),
  };
}

/**
 * How long a finished job's acknowledgement may wait for others (SHOAL_SHARE_ACK_LINGER_MS): the
 * interactive topic's idle wait, so a lone job's ack still goes within two of the member's fetches.
 * `npm run bench:ack-linger`: a fifth of the share-state writes at 50 jobs/s, half the broker's CPU.
 */
export const DEFAULT_ACK_LINGER_MS = 100;
