import { JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { ModelTooLargeError } from "../residency/errors.ts";
import { InputTooLongError } from "../runtime/errors.ts";

/** The caller cancelled the job before it started; nothing was computed. */
export class JobCancelledError extends Error {
  override readonly name = "JobCancelledError";
}

/** The job's deadline passed before it started; nothing was computed. */
export class JobExpiredError extends Error {
  override readonly name = "JobExpiredError";
}

/** The job names a model this worker's pool does not serve. */
export class ModelNotServedError extends Error {
  override readonly name = "ModelNotServedError";
  constructor(model: string, pool: string) {
    super(`model '${model}' is not served by pool '${pool}'`);
  }
}

/** The job's model could not be loaded on this worker (another worker, or a retry, may). */
export class ModelUnavailableError extends Error {
  override readonly name = "ModelUnavailableError";
  constructor(model: string, workerId: string, cause: unknown) {
    super(`model '${model}' could not be loaded on worker ${workerId}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** The job's inputs cannot run as sent: over one of the worker's input limits, empty, or too long without truncate. */
export class InvalidJobInputError extends Error {
  override readonly name = "InvalidJobInputError";
}

/**
 * The one mapping from why a job ended early to the status its caller gets (the gateway maps
 * that status to a Connect code, once, at its edge).
 */
export function jobStatusOf(err: Error): JobStatus {
  if (err instanceof JobCancelledError) return JobStatus.CANCELLED;
  if (err instanceof JobExpiredError) return JobStatus.DEADLINE_EXCEEDED;
  if (err instanceof ModelNotServedError) return JobStatus.NOT_FOUND;
  if (err instanceof ModelTooLargeError) return JobStatus.RESOURCE_EXHAUSTED;
  if (err instanceof ModelUnavailableError) return JobStatus.UNAVAILABLE;
  if (err instanceof InputTooLongError || err instanceof InvalidJobInputError) return JobStatus.INVALID_ARGUMENT;
  return JobStatus.INTERNAL;
}
