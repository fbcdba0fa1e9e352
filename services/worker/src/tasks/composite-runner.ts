import { create } from "@bufbuild/protobuf";
import type { CatalogModel, CompositeScoring, Logger } from "@shoal/common";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { JobResultSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { Clock } from "../batching/clock.ts";
import { jobStatusOf, ModelUnavailableError } from "../jobs/job-errors.ts";
import type { Lease } from "../residency/residency.ts";
import type { JobTrace } from "../telemetry/job-trace.ts";
import { prepareComposite, type LabelVectorCache } from "./composite-inputs.ts";
import { ModelRunner } from "./model-runner.ts";
import type { InputLimits } from "./task-inputs.ts";

/** How a composite reaches its embedder's runner: the worker's residency (leases count as uses). */
export interface EmbedderAccess {
  tryAcquire(model: string): Lease<unknown> | undefined;
  acquire(model: string): Promise<Lease<unknown>>;
}

/**
 * Serves a composite model (a bi-encoder ranker or a zero-shot classifier) on this worker. It owns
 * no session: each job takes a lease on the embedder (loading it if needed, under the same memory
 * budget), hands its texts to the embedder's runner, where they batch with every other call on
 * that embedder, and releases the lease when its scores are in. So the composite's own resident
 * size is ~0 and the embedder is never counted twice; an idle composite does not keep its
 * embedder loaded. A zero-shot classifier keeps its label descriptions' vectors from its first
 * job until it is unloaded or its embedder is replaced (another revision loaded under its id).
 */
export class CompositeRunner {
  private inFlight = 0;
  private readonly idleWaiters: Array<() => void> = [];
  /** The label descriptions' vectors, and the embedder runner (one revision of it) that computed them. */
  private labelVectors: { readonly by: ModelRunner; readonly vectors: Float32Array } | undefined;
  private readonly scoring: CompositeScoring;

  constructor(
    private readonly model: CatalogModel & { readonly composite: CompositeScoring },
    private readonly embedder: EmbedderAccess,
    private readonly limits: InputLimits,
    private readonly clock: Clock,
    private readonly workerId: string,
    private readonly logger: Logger,
  ) {
    this.scoring = model.composite;
  }

  get spec(): ModelSpec {
    return this.model.spec;
  }

  /** Runs a job through the embedder; `onFinish` gets its result (scores, or why it failed) exactly once. */
  submit(envelope: JobEnvelope, trace: JobTrace, onFinish: (result: JobResult) => void, nowMs: number): void {
    this.inFlight += 1;
    let lease: Lease<unknown> | undefined;
    const finish = (result: JobResult): void => {
      lease?.release();
      lease = undefined;
      this.inFlight -= 1;
      if (this.inFlight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      onFinish(result);
    };
    const run = (l: Lease<unknown>, at: number): void => {
      lease = l;
      const runner = l.resource;
      if (!(runner instanceof ModelRunner) || runner.spec.task !== "embed") {
        return finish(this.failure(envelope, JobStatus.INTERNAL, `embedder '${this.scoring.embedder}' is not an embed model on this worker`));
      }
      const embedder = runner.spec;
      // Vectors of another revision of the embedder (replaced under its id since) are computed again.
      const cache: LabelVectorCache = {
        get: () => (this.labelVectors?.by === runner ? this.labelVectors.vectors : undefined),
        set: (v) => {
          this.labelVectors = { by: runner, vectors: v };
        },
      };
      const ctx = { id: this.model.id, scoring: this.scoring, limits: this.limits, labelVectors: cache };
      runner.submitPrepared(envelope, trace, finish, at, (_spec, tokenizer) => prepareComposite(ctx, embedder, tokenizer, envelope));
    };
    const ready = this.embedder.tryAcquire(this.scoring.embedder);
    if (ready !== undefined) return run(ready, nowMs);
    this.embedder.acquire(this.scoring.embedder).then(
      // The wait counts as queue time: the job's schedule is read from the clock once the embedder is in.
      (l) => run(l, this.clock.now()),
      (err: unknown) => {
        const cause = err instanceof Error ? err : new Error(String(err));
        const status = jobStatusOf(cause);
        const why = status === JobStatus.INTERNAL ? new ModelUnavailableError(this.scoring.embedder, this.workerId, cause) : cause;
        this.logger.warn({ model: this.model.id, embedder: this.scoring.embedder, err: cause }, "composite model's embedder could not be loaded");
        finish(this.failure(envelope, jobStatusOf(why), `model '${this.model.id}': ${why.message}`));
      },
    );
  }

  /** Resolves once every submitted job has finished. */
  async idle(): Promise<void> {
    while (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Forgets the kept label vectors (the next load computes them again). */
  async close(): Promise<void> {
    this.labelVectors = undefined;
  }

  private failure(envelope: JobEnvelope, status: JobStatus, message: string): JobResult {
    return create(JobResultSchema, { jobId: envelope.jobId, status, message, attempt: envelope.attempt });
  }
}
