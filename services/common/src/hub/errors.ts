/**
 * Typed errors of the Hugging Face Hub client. The gateway maps them once at its edge:
 * not found (repo, revision, file) → NotFound; gated → PermissionDenied; offline miss →
 * FailedPrecondition; unavailable and corrupt downloads → Unavailable.
 */

/** Where an error happened: the repository, the revision asked for, and the file when there is one. */
export interface HubErrorContext {
  readonly repo: string;
  readonly revision: string;
  readonly file?: string;
}

function where(ctx: HubErrorContext): string {
  return `hf:${ctx.repo}@${ctx.revision}${ctx.file === undefined ? "" : ` (${ctx.file})`}`;
}

/** Base class of every Hub client error; carries the repository, revision and file. */
export abstract class HubError extends Error {
  readonly repo: string;
  readonly revision: string;
  readonly file: string | undefined;
  constructor(ctx: HubErrorContext, message: string, options?: ErrorOptions) {
    super(`${where(ctx)}: ${message}`, options);
    this.repo = ctx.repo;
    this.revision = ctx.revision;
    this.file = ctx.file;
  }
}

/** The repository does not exist on the endpoint (or is private and no valid token was sent). */
export class HubRepoNotFoundError extends HubError {
  override readonly name = "HubRepoNotFoundError";
  constructor(ctx: HubErrorContext, detail = "", options?: ErrorOptions) {
    super(ctx, `repository not found${detail === "" ? "" : `: ${detail}`} (if it is private, set HF_TOKEN)`, options);
  }
}

/** The repository exists but the revision (branch, tag or commit) does not. */
export class HubRevisionNotFoundError extends HubError {
  override readonly name = "HubRevisionNotFoundError";
  constructor(ctx: HubErrorContext, options?: ErrorOptions) {
    super(ctx, `revision ${JSON.stringify(ctx.revision)} not found`, options);
  }
}

/** A file the caller requires is not in the repository at that revision. */
export class HubEntryNotFoundError extends HubError {
  override readonly name = "HubEntryNotFoundError";
  constructor(ctx: HubErrorContext & { file: string }, options?: ErrorOptions) {
    super(ctx, "file not found in the repository at this revision", options);
  }
}

/** 401/403: the repository is gated or private and the token is missing, invalid or not granted access. */
export class HubGatedError extends HubError {
  override readonly name = "HubGatedError";
  readonly status: number;
  constructor(ctx: HubErrorContext, status: number, hadToken: boolean, options?: ErrorOptions) {
    super(
      ctx,
      hadToken
        ? `access refused (HTTP ${status}): the token in HF_TOKEN has no access to this gated or private repository`
        : `access refused (HTTP ${status}): gated or private repository; set HF_TOKEN (or HF_TOKEN_PATH) to a token with access`,
      options,
    );
    this.status = status;
  }
}

/** A download was cut off beyond retrying, or its content did not match the ETag; nothing was kept. */
export class HubDownloadError extends HubError {
  override readonly name = "HubDownloadError";
}

/** The endpoint could not be reached or answered 5xx, and the cache could not serve the request. */
export class HubUnavailableError extends HubError {
  override readonly name = "HubUnavailableError";
}

/** Offline (`HF_HUB_OFFLINE=1`) and the cache lacks the revision's snapshot or one of its files. */
export class HubOfflineMissError extends HubError {
  override readonly name = "HubOfflineMissError";
}

/** A model source string (`hf:org/name[@revision]`) is malformed. */
export class ModelSourceError extends Error {
  override readonly name = "ModelSourceError";
  constructor(
    readonly source: string,
    reason: string,
  ) {
    super(`invalid model source ${JSON.stringify(source)}: ${reason}`);
  }
}
