/** The policies the dispatch benchmark compares (issue #16): Shoal's shared queue and the routed arms. */
import { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue, type DispatchPolicy } from "./policies.ts";

/** Shared queue first (the ratios divide by the others), then the routers. */
export function benchmarkArms(): DispatchPolicy[] {
  return [
    sharedQueue(),
    partitioned(),
    roundRobin(),
    leastLoaded({ refreshMs: 200, countOwnSends: false, ties: "first" }),
    leastLoaded({ refreshMs: 200, countOwnSends: true, ties: "random" }),
    leastLoaded({ refreshMs: 10, countOwnSends: true, ties: "random" }),
    powerOfTwo({ refreshMs: 200 }),
    directRouter(),
  ];
}
