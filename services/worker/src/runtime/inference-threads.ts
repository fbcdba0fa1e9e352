/**
 * The inference worker threads of one model. The worker's batching code hands it
 * pre-grouped token ids; each `run` is one message to one thread (all groups together), whose
 * buffers are transferred, not copied. Pooled vectors come back un-normalised.
 */
import { Worker } from "node:worker_threads";
import { InferenceError, ModelLoadError } from "./errors.ts";
import type { FromThread, ThreadInit, ToThread } from "./inference-protocol.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";
import type { ExecutionProviderChoice } from "./onnx-session.ts";
import { packGroup, type PackedGroup } from "./packed-group.ts";

/** The logging surface the threads need (a pino logger fits). */
export interface ThreadsLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/** Options of {@link createInferenceThreads}. */
export interface InferenceThreadsOptions {
  readonly spec: ModelSpec;
  /** Worker threads, each with its own session (default 1). Keep threads × intraOpThreads ≈ cores. */
  readonly threads?: number;
  /** ONNX Runtime intra-op threads per session; 0 lets ONNX Runtime pick. */
  readonly intraOpThreads: number;
  /** Let idle ONNX Runtime threads spin (default false; see SessionSettings.allowSpinning). */
  readonly allowSpinning?: boolean;
  /** Default 'cpu'. 'cuda' falls back to CPU, with one warning, when CUDA cannot be used. */
  readonly executionProvider?: ExecutionProviderChoice;
  /** Defaults to warnings on stderr and no info lines. */
  readonly logger?: ThreadsLogger;
  /** How long {@link InferenceThreads.close} lets threads finish their run and release, in ms (default 10 000). */
  readonly closeTimeoutMs?: number;
  /** @internal Thread entry module; tests substitute one that crashes on cue. */
  readonly threadEntry?: URL;
}

/** Sequences that run together as one `session.run()`, padded to the longest. */
export interface RunGroup {
  /** Token ids per sequence, special tokens included. */
  readonly ids: readonly ArrayLike<number>[];
  /**
   * Token types per sequence, parallel to `ids` (same count, same lengths): for pairs, the
   * `typeIds` of text-tokenizer's `EncodedPair`. Omitted, every type is 0. Ignored by models
   * without a token-type input (their pairs rely on the separators).
   */
  readonly typeIds?: readonly ArrayLike<number>[];
}

/** Result of {@link InferenceThreads.run}. */
export interface RunResult {
  /** n × dimensions pooled vectors, not normalised, in input order (groups, then sequences). */
  readonly vectors: Float32Array;
  /** Time inside `session.run()` for all groups, measured in the thread. */
  readonly inferenceMs: number;
  /** Token positions computed, padding included: Σ groups (sequences × longest). */
  readonly paddedTokens: number;
}

/** What the threads run on. */
export interface InferenceThreadsInfo {
  readonly modelId: string;
  /** Provider the sessions actually use; `simulated` for a simulated accelerator (issue #16). */
  readonly provider: ExecutionProviderChoice | "simulated";
  /** `onnx`, or `simulated:<profile>` (runtime/simulated): how the runtime is labelled wherever it shows. */
  readonly runtime: string;
  /** Provider asked for (differs from `provider` after a CUDA → CPU fallback). */
  readonly requestedProvider: ExecutionProviderChoice;
  readonly threads: number;
  readonly intraOpThreads: number;
}

/** Inference threads for one model. */
export interface InferenceThreads {
  readonly dimensions: number;
  readonly info: InferenceThreadsInfo;
  /**
   * Runs the groups on an idle thread (queued while all are busy).
   * @throws InferenceError (`invalid-input`, `run-failed`, `bad-output`, `thread-crashed`, `closed`)
   */
  run(groups: readonly RunGroup[]): Promise<RunResult>;
  /**
   * Rejects queued runs, lets runs already executing finish, releases the sessions and ends the
   * threads (terminated after `closeTimeoutMs`). Idempotent: later calls return the same promise.
   */
  close(): Promise<void>;
}

const THREAD_ENTRY = new URL("./inference-thread-entry.mjs", import.meta.url);

const stderrLogger: ThreadsLogger = {
  info() {},
  warn(obj, msg) {
    process.stderr.write(`WARN ${msg ?? ""} ${JSON.stringify(obj)}\n`);
  },
};

interface Job {
  readonly id: number;
  readonly groups: readonly PackedGroup[];
  readonly paddedTokens: number;
  readonly resolve: (r: RunResult) => void;
  readonly reject: (e: Error) => void;
}

interface Slot {
  readonly worker: Worker;
  job: Job | undefined;
  /** Set once the thread has exited or crashed; its handlers then ignore further events. */
  gone: boolean;
}

/** Starts one thread and resolves once its session is open. */
function startThread(entry: URL, init: ThreadInit): Promise<{ worker: Worker; ready: Extract<FromThread, { type: "ready" }> }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(entry, { workerData: init });
    const fail = (err: Error): void => {
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
      // A late 'error' from a thread being discarded must not become an uncaught exception here.
      worker.on("error", () => {});
      void worker.terminate();
      reject(err);
    };
    const onMessage = (msg: FromThread): void => {
      if (msg.type === "ready") {
        worker.off("message", onMessage);
        worker.off("error", onError);
        worker.off("exit", onExit);
        resolve({ worker, ready: msg });
      } else if (msg.type === "load-failed") {
        fail(new ModelLoadError(msg.path, msg.problems));
      }
    };
    const onError = (err: Error): void => {
      fail(new InferenceError("thread-crashed", `inference thread failed while starting: ${err.message}`, { cause: err }));
    };
    const onExit = (code: number): void => {
      fail(new InferenceError("thread-crashed", `inference thread exited with code ${code} while starting`));
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
  });
}

/** State and event handling behind {@link InferenceThreads}; one instance per model. */
class ThreadGroup implements InferenceThreads {
  readonly dimensions: number;
  /** Set by createInferenceThreads once the threads have reported the provider they run on. */
  info!: InferenceThreadsInfo;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  /** Replacement threads being started. */
  private starting = 0;
  private nextId = 1;
  private fallbackLogged = false;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly spec: ModelSpec,
    private readonly init: ThreadInit,
    private readonly entry: URL,
    private readonly logger: ThreadsLogger,
    private readonly closeTimeoutMs: number,
  ) {
    this.dimensions = spec.dimensions;
  }

  /** Starts one thread and adopts it as soon as it is ready (no window without listeners). */
  async addThread(): Promise<Extract<FromThread, { type: "ready" }>> {
    const { worker, ready } = await startThread(this.entry, this.init);
    this.adopt(worker);
    this.noteFallback(ready.fallbackReason);
    return ready;
  }

  run(groups: readonly RunGroup[]): Promise<RunResult> {
    if (this.closing !== undefined) return Promise.reject(new InferenceError("closed", "inference threads are closed"));
    let packed: PackedGroup[];
    try {
      // A model without a token-type input ignores types: don't pack or send them.
      const typed = this.spec.inputNames.tokenTypeIds !== undefined;
      packed = groups.map((g) => packGroup(g.ids, typed ? g.typeIds : undefined));
    } catch (err) {
      return Promise.reject(new InferenceError("invalid-input", (err as Error).message, { cause: err }));
    }
    if (packed.length === 0) return Promise.resolve({ vectors: new Float32Array(0), inferenceMs: 0, paddedTokens: 0 });
    if (this.slots.length === 0 && this.starting === 0) {
      return Promise.reject(new InferenceError("closed", "no inference thread is left to run this"));
    }
    const paddedTokens = packed.reduce((sum, g) => sum + g.batch * g.seqLen, 0);
    return new Promise<RunResult>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, groups: packed, paddedTokens, resolve, reject });
      this.dispatch();
    });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.rejectQueued(new InferenceError("closed", "inference threads closed before the run started"));
      await Promise.all([...this.slots].map((slot) => this.closeSlot(slot)));
    })();
    return this.closing;
  }

  private noteFallback(reason: string | undefined): void {
    if (reason === undefined || this.fallbackLogged) return;
    this.fallbackLogged = true;
    this.logger.warn(
      { model: this.spec.id, requested: this.init.settings.executionProvider, reason },
      "CUDA execution provider unavailable, running inference on CPU",
    );
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.job !== undefined || slot.gone) continue;
      const job = this.queue.shift()!;
      slot.job = job;
      const transfer: ArrayBuffer[] = [];
      for (const g of job.groups) {
        transfer.push(g.inputIds.buffer as ArrayBuffer, g.attentionMask.buffer as ArrayBuffer);
        if (g.tokenTypeIds !== undefined) transfer.push(g.tokenTypeIds.buffer as ArrayBuffer);
      }
      const msg: ToThread = { type: "run", id: job.id, groups: job.groups };
      slot.worker.postMessage(msg, transfer);
    }
  }

  private rejectQueued(err: InferenceError): void {
    for (const job of this.queue.splice(0)) job.reject(err);
  }

  private adopt(worker: Worker): void {
    const slot: Slot = { worker, job: undefined, gone: false };
    this.slots.push(slot);
    worker.on("message", (msg: FromThread) => {
      if (slot.gone) return;
      const job = slot.job;
      if (msg.type === "result" && job?.id === msg.id) {
        slot.job = undefined;
        job.resolve({ vectors: msg.vectors, inferenceMs: msg.inferenceMs, paddedTokens: job.paddedTokens });
      } else if (msg.type === "error" && job?.id === msg.id) {
        slot.job = undefined;
        job.reject(new InferenceError(msg.reason, msg.message));
      }
      this.dispatch();
    });
    worker.on("error", (err) => this.lost(slot, `crashed (${err.message})`, err));
    worker.on("exit", (code) => this.lost(slot, `exited with code ${code}`));
  }

  /** A thread died: fail its run, and unless closing, start a replacement. */
  private lost(slot: Slot, why: string, cause?: unknown): void {
    if (slot.gone) return;
    slot.gone = true;
    this.slots.splice(this.slots.indexOf(slot), 1);
    const job = slot.job;
    slot.job = undefined;
    if (this.closing !== undefined) {
      job?.reject(new InferenceError("closed", "inference threads closed during the run"));
      return;
    }
    job?.reject(new InferenceError("thread-crashed", `inference thread ${why} during the run`, { cause }));
    this.logger.warn({ model: this.spec.id, why, err: cause }, "inference thread lost, starting a replacement");
    this.starting++;
    startThread(this.entry, this.init).then(
      ({ worker, ready }) => {
        this.starting--;
        if (this.closing !== undefined) {
          void worker.terminate();
          return;
        }
        this.adopt(worker);
        this.noteFallback(ready.fallbackReason);
        this.dispatch();
      },
      (err: unknown) => {
        this.starting--;
        this.logger.warn({ model: this.spec.id, err }, "replacement inference thread failed to start");
        if (this.slots.length === 0 && this.starting === 0) {
          this.rejectQueued(new InferenceError("closed", "no inference thread is left to run this"));
        }
      },
    );
  }

  /** Asks a thread to finish its run and release its session; terminates it after the deadline. */
  private async closeSlot(slot: Slot): Promise<void> {
    if (slot.gone) return;
    const exited = new Promise<void>((resolve) => slot.worker.once("exit", () => resolve()));
    slot.worker.postMessage({ type: "close" } satisfies ToThread);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.closeTimeoutMs);
    });
    const outcome = await Promise.race([exited, deadline]);
    clearTimeout(timer);
    if (outcome === "timeout") {
      this.logger.warn({ model: this.spec.id, closeTimeoutMs: this.closeTimeoutMs }, "inference thread did not close in time, terminating it");
      await slot.worker.terminate();
    }
  }
}

/**
 * Starts `threads` inference threads, each opening its own session of the spec's model.
 * @throws ModelLoadError when the model cannot be loaded (missing or corrupt model.onnx, a graph
 *   that does not match the manifest); no thread is left running
 */
export async function createInferenceThreads(opts: InferenceThreadsOptions): Promise<InferenceThreads> {
  const threads = opts.threads ?? 1;
  if (!(Number.isSafeInteger(threads) && threads >= 1)) throw new RangeError(`threads must be an integer >= 1 (got ${threads})`);
  const requested = opts.executionProvider ?? "cpu";
  const { spec } = opts;
  const init: ThreadInit = {
    model: {
      modelPath: spec.modelPath,
      inputNames: { ...spec.inputNames },
      outputName: spec.outputName,
      dimensions: spec.dimensions,
      pooling: spec.pooling,
    },
    settings: { intraOpThreads: opts.intraOpThreads, executionProvider: requested, allowSpinning: opts.allowSpinning ?? false },
  };
  const logger = opts.logger ?? stderrLogger;
  const group = new ThreadGroup(spec, init, opts.threadEntry ?? THREAD_ENTRY, logger, opts.closeTimeoutMs ?? 10_000);

  const started = await Promise.allSettled(Array.from({ length: threads }, () => group.addThread()));
  const failures = started.flatMap((s) => (s.status === "rejected" ? [s.reason as Error] : []));
  if (failures.length > 0) {
    await group.close();
    throw failures.find((e) => e instanceof ModelLoadError) ?? failures[0];
  }
  const first = started[0]!.status === "fulfilled" ? started[0]!.value : undefined;
  group.info = Object.freeze({
    modelId: spec.id,
    provider: first?.provider ?? "cpu",
    runtime: "onnx",
    requestedProvider: requested,
    threads,
    intraOpThreads: opts.intraOpThreads,
  });
  logger.info({ ...group.info }, "inference threads ready");
  return group;
}
