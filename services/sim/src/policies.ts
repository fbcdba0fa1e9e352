/** The dispatch policies live in @shoal/common, shared with the gateway's routed dispatch (issue #16). */
export { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue } from "@shoal/common";
export type { DeviceLoad, DispatchPolicy, LeastLoadedOptions, LoadMetric, Router, RoutedJob } from "@shoal/common";
