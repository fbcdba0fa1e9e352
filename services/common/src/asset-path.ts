import { existsSync } from "node:fs";

/**
 * The first of `candidates` that exists, else the last: a file a service reads beside its code has
 * one place in a bundle (`npm run build:services` copies it beside the bundle) and another in the
 * source tree. Callers list the bundle's place first and the source tree's last, so an error about
 * a missing file names the source tree's.
 */
export function firstExisting(candidates: readonly [string, ...string[]]): string {
  return candidates.find((p) => existsSync(p)) ?? (candidates[candidates.length - 1] as string);
}
