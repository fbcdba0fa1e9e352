/** The policies the dispatch benchmark compares (issue #16): Shoal's shared queue and the routed arms. */
import { WORKER_BATCHING } from "./des.ts";
import { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue, type DispatchPolicy } from "./policies.ts";

/** Shared queue first (the ratios divide by the others), then the routers. */
export function benchmarkArms(): DispatchPolicy[] {
  return [
    sharedQueue(),
    // The same shared queue read as one mixed topic (no pull by model): the next jobs of any model.
    sharedQueue({ mixedTakeTokens: WORKER_BATCHING.maxBatchTokens }),
    partitioned(),
    roundRobin(),
    leastLoaded({ refreshMs: 200, countOwnSends: false, ties: "first" }),
    leastLoaded({ refreshMs: 200, countOwnSends: true, ties: "random" }),
    leastLoaded({ refreshMs: 10, countOwnSends: true, ties: "random" }),
    powerOfTwo({ refreshMs: 200 }),
    directRouter(),
  ];
}
