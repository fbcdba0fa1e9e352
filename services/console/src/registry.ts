import { Code, ConnectError } from "@connectrpc/connect";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";

// The registry's view for people, apart from the DOM (unit-tested under node).

/** Characters of a revision shown in the table (as git and the Hub abbreviate a commit sha). */
const SHORT_REVISION = 7;

/** A revision as the table shows it: a commit sha cut to 7 characters, anything shorter as it is, "—" for none. */
export function shortRevision(revision: string): string {
  if (revision === "") return "—";
  return /^[0-9a-f]{8,}$/i.test(revision) ? revision.slice(0, SHORT_REVISION) : revision;
}

/** A refused admin call as the page shows it: the Connect code's name and the gateway's message. */
export interface Refusal {
  /** "NotFound", "PermissionDenied", "InvalidArgument", … */
  readonly code: string;
  readonly message: string;
  /** What to do about it, when the page knows (a missing or unprivileged API key). */
  readonly hint: string | undefined;
}

/** Any error from an admin call, in the form the panel shows it. */
export function refusalOf(err: unknown): Refusal {
  const e = ConnectError.from(err);
  const hint =
    e.code === Code.Unauthenticated || e.code === Code.PermissionDenied
      ? "Changing the registry needs an API key with the admin scope: enter one in the API key field at the top."
      : undefined;
  return { code: Code[e.code] ?? String(e.code), message: e.rawMessage || String(err), hint };
}

/** The pool most of the listed models are in (the first listed wins a tie); "" when none is listed. */
export function defaultPool(models: readonly Pick<Model, "pool">[]): string {
  const counts = new Map<string, number>();
  for (const m of models) if (m.pool !== "") counts.set(m.pool, (counts.get(m.pool) ?? 0) + 1);
  let best = "";
  let most = 0;
  for (const [pool, n] of counts) {
    if (n > most) [best, most] = [pool, n];
  }
  return best;
}

/** What the form asks AddModel for, from its fields: trimmed, with a problem when it cannot be sent. */
export function addRequestOf(fields: { source: string; id: string; pool: string; pinned: boolean }): {
  readonly request: { source: string; id: string; pool: string; pinned: boolean };
  readonly problem: string | undefined;
} {
  const request = { source: fields.source.trim(), id: fields.id.trim(), pool: fields.pool.trim(), pinned: fields.pinned };
  const problem = request.source === "" ? "enter a source: an absolute folder path or hf:<org>/<name>[@<revision>]" : undefined;
  return { request, problem };
}
