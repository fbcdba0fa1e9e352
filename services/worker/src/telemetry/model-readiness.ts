import type { LoadFailure } from "../residency/load-backoff.ts";

/** Longest part of a load error quoted in /readyz. */
const ERROR_CHARS = 160;

/**
 * What /readyz says of the pool's models on this worker. Not ready when every model of the pool
 * failed its last load here (corrupted files, a bad volume): the worker can serve nothing, so a
 * rollout of it stops (the worker Deployment surges one replica and waits for it to be Ready) and
 * the operator sees why. Jobs still reach it through the share group; it gives them to other
 * workers (jobs/load-give-back.ts) and keeps retrying the loads on its backoff. Otherwise ready,
 * naming the models that fail to load. A model not tried yet (loaded on its first job) counts as
 * servable.
 */
export function modelReadiness(
  poolModels: readonly string[],
  resident: number,
  failures: readonly LoadFailure[],
): { readonly ready: boolean; readonly reason: string } {
  const failing = failures.filter((f) => poolModels.includes(f.model));
  const named = failing.map((f) => `${f.model} (${f.failures} failed load(s), next try in ${Math.ceil(f.retryInMs / 1000)} s)`).join(", ");
  if (poolModels.length > 0 && failing.length === poolModels.length) {
    const first = failing[0]!.error.message;
    const quoted = first.length > ERROR_CHARS ? `${first.slice(0, ERROR_CHARS)}…` : first;
    return { ready: false, reason: `cannot serve any model of the pool: ${named}: ${quoted}` };
  }
  return { ready: true, reason: `${resident} model(s) resident${failing.length > 0 ? `, failing to load: ${named}` : ""}` };
}
