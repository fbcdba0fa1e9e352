import { ModelSourceError } from "./errors.ts";

/** The revision used when a source names none, as on the Hub. */
export const DEFAULT_REVISION = "main";

/** Where a model comes from: a Hub repository at a revision, or a local folder laid out like one. */
export type ModelSource = { readonly kind: "hf"; readonly repo: string; readonly revision: string } | { readonly kind: "folder"; readonly path: string };

const HF_PREFIX = "hf:";
// The Hub's own rule (huggingface_hub validate_repo_id): word characters, '-' and '.', no '--' or
// '..' (the cache folder uses '--' as the separator), at most 96 characters.
const REPO_PART = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const MAX_REPO_LENGTH = 96;

/**
 * Parses a catalog or admin-API model source. `hf:org/name` and `hf:org/name@revision` name a Hub
 * repository (revision defaults to `main`); anything else is a local folder path.
 * @throws ModelSourceError for a malformed `hf:` id, naming what is wrong
 */
export function parseModelSource(source: string): ModelSource {
  if (!source.startsWith(HF_PREFIX)) {
    if (source.trim() === "") throw new ModelSourceError(source, "empty");
    return { kind: "folder", path: source };
  }
  const body = source.slice(HF_PREFIX.length);
  const at = body.indexOf("@");
  const repo = at < 0 ? body : body.slice(0, at);
  const revision = at < 0 ? DEFAULT_REVISION : body.slice(at + 1);
  const repoProblem = repoIdProblem(repo);
  if (repoProblem !== undefined) throw new ModelSourceError(source, repoProblem);
  const revisionProblem = revisionProblemOf(revision);
  if (revisionProblem !== undefined) throw new ModelSourceError(source, revisionProblem);
  return { kind: "hf", repo, revision };
}

/** Formats a Hub source back into its `hf:org/name@revision` string. */
export function formatHubSource(repo: string, revision: string): string {
  return `${HF_PREFIX}${repo}@${revision}`;
}

/** Why `repo` is not a valid `org/name` repository id, or undefined when it is. */
export function repoIdProblem(repo: string): string | undefined {
  if (repo === "") return "missing repository id after 'hf:' (expected hf:<org>/<name>[@<revision>])";
  const parts = repo.split("/");
  if (parts.length !== 2) return `repository id ${JSON.stringify(repo)} must be <org>/<name>`;
  if (repo.length > MAX_REPO_LENGTH) return `repository id longer than ${MAX_REPO_LENGTH} characters`;
  for (const part of parts) {
    if (!REPO_PART.test(part)) {
      return `repository id part ${JSON.stringify(part)} may only hold letters, digits, '_', '-' and '.'`;
    }
    if (part.includes("--") || part.includes("..") || part.endsWith(".") || part.endsWith("-")) {
      return `repository id part ${JSON.stringify(part)} may not contain '--' or '..' nor end with '.' or '-'`;
    }
  }
  return undefined;
}

/** Why `revision` is not a usable branch, tag or commit name, or undefined when it is. */
export function revisionProblemOf(revision: string): string | undefined {
  if (revision === "") return "empty revision after '@'";
  if (/[\s\\@]/.test(revision) || revision.includes("..")) return `revision ${JSON.stringify(revision)} has whitespace, '\\', '@' or '..'`;
  if (revision.startsWith("/") || revision.endsWith("/")) return `revision ${JSON.stringify(revision)} starts or ends with '/'`;
  return undefined;
}
