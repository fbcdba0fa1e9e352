import type { EnvReader } from "@shoal/common";

/** Who decides where a job runs (issue #16). `shared`: the workers, pulling from the pool's topics. */
export const DISPATCH_MODES = ["shared", "partition", "round-robin", "least-loaded", "p2c", "sie-direct"] as const;
export type DispatchMode = (typeof DISPATCH_MODES)[number];

/** Routed dispatch: the gateway picks a worker and writes the job to that worker's topic. */
export interface RoutedDispatchConfig {
  readonly mode: Exclude<DispatchMode, "shared">;
  /** How often the router's board is refreshed from the status topic; 0: before every job. */
  readonly refreshMs: number;
  /** least-loaded: add this gateway's own sends since the last refresh to the board. */
  readonly countOwnSends: boolean;
  /** least-loaded and p2c: keep own sends on the board until a worker status measured after them (SHOAL_DISPATCH_KEEP_OWN). */
  readonly keepOwnSends: boolean;
  /** least-loaded: among equal loads, the first worker (by id) or one at random. */
  readonly ties: "first" | "random";
  /** least-loaded: pending tokens or queue depth (jobs in hand). */
  readonly metric: "pending-tokens" | "queue-depth";
}

export type DispatchConfig = { readonly mode: "shared" } | RoutedDispatchConfig;

/**
 * `SHOAL_DISPATCH` and its options. Options that the chosen mode ignores are refused rather than
 * silently dropped, so a benchmark arm is what its environment says.
 */
export function readDispatchConfig(r: EnvReader): DispatchConfig {
  const mode = r.oneOf("SHOAL_DISPATCH", DISPATCH_MODES, "shared");
  const given = (name: string): boolean => r.optionalString(name) !== undefined;
  const only = (name: string, modes: readonly DispatchMode[]): void => {
    if (given(name) && !modes.includes(mode)) r.problem(`${name}: only applies with SHOAL_DISPATCH=${modes.join(" or ")} (SHOAL_DISPATCH=${mode})`);
  };
  only("SHOAL_DISPATCH_REFRESH_MS", ["least-loaded", "p2c", "sie-direct"]);
  only("SHOAL_DISPATCH_COUNT_OWN", ["least-loaded"]);
  only("SHOAL_DISPATCH_TIES", ["least-loaded"]);
  only("SHOAL_DISPATCH_KEEP_OWN", ["least-loaded", "p2c"]);
  only("SHOAL_DISPATCH_METRIC", ["least-loaded"]);
  if (mode === "shared") return { mode };
  return {
    mode,
    refreshMs: r.int("SHOAL_DISPATCH_REFRESH_MS", 200, { min: 0, max: 3_600_000 }),
    // p2c always counts its own sends, SIE's early direct router never did.
    countOwnSends: mode === "p2c" ? true : mode === "sie-direct" ? false : r.bool("SHOAL_DISPATCH_COUNT_OWN", true),
    keepOwnSends: mode === "least-loaded" || mode === "p2c" ? r.bool("SHOAL_DISPATCH_KEEP_OWN", false) : false,
    ties: mode === "least-loaded" ? r.oneOf("SHOAL_DISPATCH_TIES", ["first", "random"] as const, "first") : "first",
    metric:
      mode === "sie-direct"
        ? "queue-depth"
        : mode === "least-loaded"
          ? r.oneOf("SHOAL_DISPATCH_METRIC", ["pending-tokens", "queue-depth"] as const, "pending-tokens")
          : "pending-tokens",
  };
}
