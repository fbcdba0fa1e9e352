/**
 * Which idle models to unload to make room. Pure functions over candidate snapshots, so the
 * order is testable without a manager around it.
 */

/**
 * - `lru`: the least recently used idle model goes first.
 * - `pinned-by-traffic`: the idle model with the lowest decayed request count goes first (ties:
 *   least recently used); models at or above the hot threshold go only when the others together
 *   cannot free the room.
 */
export type ResidencyPolicy = "lru" | "pinned-by-traffic";

export const RESIDENCY_POLICIES: readonly ResidencyPolicy[] = ["lru", "pinned-by-traffic"];

export function isResidencyPolicy(value: string): value is ResidencyPolicy {
  return (RESIDENCY_POLICIES as readonly string[]).includes(value);
}

/** An evictable model: resident, no lease outstanding, not catalog-pinned. */
export interface VictimCandidate {
  readonly model: string;
  readonly bytes: number;
  /** Recency: larger is more recent (a use sequence number or a timestamp). */
  readonly lastUse: number;
  /** Decayed request count now. */
  readonly traffic: number;
  /** Traffic at or above the hot threshold. */
  readonly hot: boolean;
}

/** Candidates in eviction order, first to go first. */
export function victimOrder(policy: ResidencyPolicy, candidates: readonly VictimCandidate[]): VictimCandidate[] {
  const byRecency = (a: VictimCandidate, b: VictimCandidate): number => a.lastUse - b.lastUse;
  const sorted = [...candidates];
  if (policy === "lru") return sorted.sort(byRecency);
  return sorted.sort((a, b) => Number(a.hot) - Number(b.hot) || a.traffic - b.traffic || byRecency(a, b));
}

/**
 * The victims that free at least `neededBytes`, or undefined when all candidates together cannot
 * (then nothing should be evicted: the load waits for a lease to be released instead).
 *
 * Takes candidates in {@link victimOrder} until enough is freed, then gives back, most valuable
 * first, any victim the others cover without it (a big model late in the order can make small
 * earlier ones unnecessary).
 */
export function chooseVictims(policy: ResidencyPolicy, candidates: readonly VictimCandidate[], neededBytes: number): VictimCandidate[] | undefined {
  if (neededBytes <= 0) return [];
  const taken: VictimCandidate[] = [];
  let freed = 0;
  for (const c of victimOrder(policy, candidates)) {
    if (freed >= neededBytes) break;
    taken.push(c);
    freed += c.bytes;
  }
  if (freed < neededBytes) return undefined;
  for (let i = taken.length - 1; i >= 0; i--) {
    const c = taken[i]!;
    if (freed - c.bytes >= neededBytes) {
      taken.splice(i, 1);
      freed -= c.bytes;
    }
  }
  return taken;
}
