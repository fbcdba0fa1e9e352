/**
 * Cost profiles of simulated accelerators (issue #16): one table, `profiles.json`, read by the
 * simulated runtime, the discrete-event simulation and written by the calibration command.
 * A call of B sequences padded to L tokens costs `a + b·B·L + c·B·L²` ms: a fixed per-call cost,
 * work linear in tokens (the feed-forward layers) and attention's quadratic term.
 */
import table from "./profiles.json" with { type: "json" };

/** Where a profile's figures come from. */
export type ProfileSource = "measured" | "published";

/** Quality of a measured profile's fit (written by the calibration command). */
export interface ProfileFit {
  readonly points: number;
  readonly r2: number;
  readonly maxRelativeError: number;
  readonly measuredAt: string;
  readonly host: string;
  readonly command: string;
}

/** One simulated accelerator class. */
export interface SimProfile {
  readonly id: string;
  readonly description: string;
  readonly source: ProfileSource;
  /** Per-call cost, ms. */
  readonly aMs: number;
  /** Cost per padded token, ms. */
  readonly bMsPerToken: number;
  /** Cost per padded token per token of sequence length (attention), ms. */
  readonly cMsPerToken2: number;
  /** Cost of making a model resident (session creation, weights to the device), ms. */
  readonly loadMs: number;
  /** Device memory a resident model takes, bytes. */
  readonly memoryBytes: number;
  readonly fit?: ProfileFit;
}

/** The profile fields as stored in `profiles.json` (keyed by id). */
export type StoredProfile = Omit<SimProfile, "id">;

function check(id: string, p: StoredProfile): SimProfile {
  const problems: string[] = [];
  for (const key of ["aMs", "bMsPerToken", "cMsPerToken2", "loadMs", "memoryBytes"] as const) {
    const v = p[key];
    if (!(typeof v === "number" && Number.isFinite(v) && v >= 0)) problems.push(`${key} must be a finite number >= 0 (got ${String(v)})`);
  }
  if (p.source !== "measured" && p.source !== "published") problems.push(`source must be 'measured' or 'published'`);
  if (problems.length > 0) throw new Error(`simulated profile '${id}': ${problems.join("; ")}`);
  return Object.freeze({ id, ...p });
}

const PROFILES: ReadonlyMap<string, SimProfile> = new Map(Object.entries(table as Record<string, StoredProfile>).map(([id, p]) => [id, check(id, p)]));

/** Ids of the known profiles, in table order. */
export const simProfileIds: readonly string[] = [...PROFILES.keys()];

/**
 * The profile named `id`.
 * @throws RangeError naming the known profiles when there is none such
 */
export function simProfile(id: string): SimProfile {
  const p = PROFILES.get(id);
  if (p === undefined) throw new RangeError(`unknown simulated profile '${id}' (known: ${simProfileIds.join(", ")})`);
  return p;
}

/** Cost coefficients alone, as the DES and the fit use them. */
export type CallCost = Pick<SimProfile, "aMs" | "bMsPerToken" | "cMsPerToken2">;

/** Undilated ms of one call of `batch` sequences padded to `seqLen` tokens (0 for an empty call). */
export function callCostMs(p: CallCost, batch: number, seqLen: number): number {
  if (batch <= 0 || seqLen <= 0) return 0;
  const tokens = batch * seqLen;
  return p.aMs + p.bMsPerToken * tokens + p.cMsPerToken2 * tokens * seqLen;
}
