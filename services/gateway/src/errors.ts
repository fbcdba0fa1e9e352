import { Code, ConnectError } from "@connectrpc/connect";
import { JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { ModelLoadError, SourceRefusedError, type RegistryRefusal } from "@shoal/common";

const MAX_ECHO_CHARS = 100;

/**
 * Replaces unpaired UTF-16 surrogates (possible in JSON strings such as `"\ud800"`) with U+FFFD:
 * gRPC percent-encodes grpc-message with encodeURIComponent, which throws on them.
 */
export function wellFormed(text: string): string {
  return text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

/** A caller-supplied identifier as error messages quote it: well-formed and at most 100 characters. */
export function echo(id: string): string {
  return wellFormed(id.length > MAX_ECHO_CHARS ? `${id.slice(0, MAX_ECHO_CHARS)}…` : id);
}

/** The request names a model the catalog does not hold. */
export class ModelNotFoundError extends Error {
  override readonly name = "ModelNotFoundError";
  constructor(readonly model: string) {
    super(`model '${echo(model)}' is not served by this cluster (see ModelService.ListModels)`);
  }
}

/** The request is malformed or exceeds a named limit. */
export class InvalidRequestError extends Error {
  override readonly name = "InvalidRequestError";
}

/** The job's deadline passed before its result arrived. */
export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
  constructor(readonly timeoutMs: number) {
    super(`deadline of ${timeoutMs} ms exceeded before the result arrived`);
  }
}

/** The caller went away; the job is abandoned. */
export class CallCancelledError extends Error {
  override readonly name = "CallCancelledError";
}

/** The queue cannot take the job right now (broker unreachable, shutting down). */
export class QueueUnavailableError extends Error {
  override readonly name = "QueueUnavailableError";
  /**
   * @param maybeWritten the record had gone out and the broker did not answer: it may be written
   *   (and a worker may run it). False: it never left the gateway.
   */
  constructor(
    message: string,
    readonly maybeWritten = false,
  ) {
    super(message);
  }
}

/** Admission control refused the call; `retryAfterMs` is the hint sent back. */
export class AdmissionRejectedError extends Error {
  override readonly name = "AdmissionRejectedError";
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** The call carries no API key, or one the gateway does not know. */
export class UnauthenticatedError extends Error {
  override readonly name = "UnauthenticatedError";
}

/** The API key is valid but may not use what the call asks for (a model outside its list). */
export class PermissionDeniedError extends Error {
  override readonly name = "PermissionDeniedError";
}

/** The API key's rate limit refused the call; `retryAfterMs` is the hint sent back. */
export class RateLimitedError extends Error {
  override readonly name = "RateLimitedError";
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

/** A worker answered the job with a non-OK status. */
export class JobFailedError extends Error {
  override readonly name = "JobFailedError";
  constructor(
    readonly status: JobStatus,
    message: string,
  ) {
    super(message);
  }
}

/** A model registry change refused (ModelAdminService): what is wrong decides the code. */
export class RegistryRefusedError extends Error {
  override readonly name = "RegistryRefusedError";
  constructor(readonly refusal: RegistryRefusal) {
    super(refusal.message);
  }
}

const refusalCodes: Record<RegistryRefusal["code"], Code> = {
  invalid: Code.InvalidArgument,
  "not-found": Code.NotFound,
  exists: Code.AlreadyExists,
  precondition: Code.FailedPrecondition,
};

const sourceCodes: Record<SourceRefusedError["kind"], Code> = { ...refusalCodes, denied: Code.PermissionDenied, unavailable: Code.Unavailable };

const jobStatusCodes: Record<JobStatus, Code> = {
  [JobStatus.UNSPECIFIED]: Code.Internal,
  [JobStatus.OK]: Code.Internal, // never an error; listed for exhaustiveness
  [JobStatus.INVALID_ARGUMENT]: Code.InvalidArgument,
  [JobStatus.NOT_FOUND]: Code.NotFound,
  [JobStatus.DEADLINE_EXCEEDED]: Code.DeadlineExceeded,
  [JobStatus.RESOURCE_EXHAUSTED]: Code.ResourceExhausted,
  [JobStatus.UNAVAILABLE]: Code.Unavailable,
  [JobStatus.INTERNAL]: Code.Internal,
  [JobStatus.CANCELLED]: Code.Canceled,
};

/** The one mapping from Shoal's errors to Connect codes, applied at the edge. */
export function toConnectError(err: unknown): ConnectError {
  const mapped = mapError(err);
  const message = wellFormed(mapped.rawMessage);
  // (Shoal's errors carry no details, so a rebuilt one loses nothing.)
  return message === mapped.rawMessage ? mapped : new ConnectError(message, mapped.code, mapped.metadata, undefined, mapped.cause);
}

function mapError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof ModelNotFoundError) return new ConnectError(err.message, Code.NotFound);
  if (err instanceof InvalidRequestError) return new ConnectError(err.message, Code.InvalidArgument);
  if (err instanceof DeadlineError) return new ConnectError(err.message, Code.DeadlineExceeded);
  if (err instanceof CallCancelledError) return new ConnectError(err.message, Code.Canceled);
  if (err instanceof QueueUnavailableError) return new ConnectError(err.message, Code.Unavailable);
  if (err instanceof UnauthenticatedError) {
    return new ConnectError(err.message, Code.Unauthenticated, { "www-authenticate": 'Bearer realm="shoal"' });
  }
  if (err instanceof PermissionDeniedError) return new ConnectError(err.message, Code.PermissionDenied);
  if (err instanceof AdmissionRejectedError || err instanceof RateLimitedError) {
    // The hint travels as response metadata (a header for Connect, a trailer for gRPC).
    return new ConnectError(`${err.message}; retry after ${err.retryAfterMs} ms`, Code.ResourceExhausted, {
      "retry-after-ms": String(err.retryAfterMs),
      "retry-after": String(Math.max(1, Math.ceil(err.retryAfterMs / 1000))),
    });
  }
  if (err instanceof RegistryRefusedError) return new ConnectError(err.message, refusalCodes[err.refusal.code]);
  if (err instanceof SourceRefusedError) return new ConnectError(err.message, sourceCodes[err.kind]);
  // A model folder refused by AddModel: the message names the file and field at fault.
  if (err instanceof ModelLoadError) return new ConnectError(err.message, Code.InvalidArgument);
  if (err instanceof JobFailedError) return new ConnectError(err.message, jobStatusCodes[err.status] ?? Code.Internal);
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}
