export { ModelTooLargeError, ResidencyClosedError } from "./errors.ts";
export { chooseVictims, isResidencyPolicy, RESIDENCY_POLICIES, victimOrder } from "./eviction-policy.ts";
export type { VictimCandidate } from "./eviction-policy.ts";
export {
  DEFAULT_BUSY_VICTIM_WAIT_MS, DEFAULT_FAILED_RETRY_MS, DEFAULT_THRASH_WINDOW_MS, DEFAULT_TRAFFIC, Residency,
} from "./residency.ts";
export type {
  AcquireOptions, Lease, ModelResidencyInfo, ResidencyEvent, ResidencyOptions, ResidencyPolicy, ResidencyState, TrafficOptions,
} from "./residency.ts";
export { DecayingCount } from "./traffic.ts";
