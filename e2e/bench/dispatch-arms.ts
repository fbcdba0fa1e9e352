/**
 * The arms of `npm run bench:dispatch` (issue #16): who decides where a job runs, and the
 * discrete-event twin of each (the same router code, from @shoal/common, in services/sim).
 */
import { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue, WORKER_BATCHING, type DispatchPolicy } from "@shoal/sim";

/** One arm: how workers take jobs and, for a routed arm, the gateway's SHOAL_DISPATCH settings. */
export interface DispatchArm {
  readonly name: string;
  readonly intake: "share" | "group";
  /** Partitions of the pool's topics (a consumer group needs several to spread work). */
  readonly partitions: number;
  /** The pool's jobs topics: `per-model` for the `share-model` arm (a shared queue per model). */
  readonly jobTopics: "per-lane" | "per-model";
  /** Gateway env (SHOAL_DISPATCH*); empty for the shared arms. */
  readonly gatewayEnv: Readonly<Record<string, string>>;
  /** Worker env beyond the bench's own (routed arms: SHOAL_ROUTED_INTAKE, the status interval). */
  readonly workerEnv: Readonly<Record<string, string>>;
  /** The same policy in the simulation. */
  readonly twin: DispatchPolicy;
  /** Routed arms: how often the workers publish their load, ms (the twin's board is as stale: simulate's statusMs). */
  readonly statusMs?: number;
  readonly routed: boolean;
}

/** Arm names the bench knows; each accepts options `name@K=V+K=V` (a routed arm's go to its gateways and workers). */
export const ARM_NAMES = ["share", "share-model", "group", "round-robin", "least-loaded", "p2c", "sie-direct", "partition"] as const;

/** Default arms: every dispatch mode but `partition` (with one served model it is one worker). */
export const DEFAULT_ARMS = "share-model,share,group,round-robin,least-loaded,p2c,sie-direct";

function kv(spec: string | undefined): Record<string, string> {
  return Object.fromEntries(
    (spec ?? "")
      .split("+")
      .filter((s) => s.includes("="))
      .map((s) => [s.slice(0, s.indexOf("=")), s.slice(s.indexOf("=") + 1)]),
  );
}

/**
 * Parses `share,group,least-loaded@SHOAL_DISPATCH_REFRESH_MS=50+SHOAL_DISPATCH_TIES=random`.
 *
 * `routerTimeScale` (the run's time dilation, or 1): a routed arm's board refresh is given in the
 * emulated device's time, so the gateway refreshes its view and the workers publish their load
 * that many times less often, and the twin likewise. A dilated run stretches every device cost;
 * a router's staleness has to stretch with them, or a 50 ms board on a ×40 run would be a
 * 1.25 ms board on the device it emulates. Kafka's own latency cannot be stretched (see the README).
 * @throws Error naming the known arms for an unknown one
 */
export function parseArms(list: string, workers: number, routerTimeScale = 1, idleTakeTokens = WORKER_BATCHING.maxBatchTokens): DispatchArm[] {
  return list.split(",").map((raw) => {
    const spec = raw.trim();
    const [base, extra] = spec.split("@") as [string, string | undefined];
    const options = kv(extra);
    if (base === "share")
      return {
        name: spec,
        intake: "share",
        partitions: 1,
        jobTopics: "per-lane",
        gatewayEnv: {},
        workerEnv: options,
        // One mixed topic: an idle worker's fetch takes the next jobs of any model, up to its idle take.
        twin: sharedQueue({ mixedTakeTokens: Number(options["SHOAL_IDLE_TAKE_TOKENS"] ?? idleTakeTokens) }),
        routed: false,
      };
    // A shared queue per model: an idle worker takes one model's waiting jobs, as the DES's central queue does.
    if (base === "share-model")
      return { name: spec, intake: "share", partitions: 1, jobTopics: "per-model", gatewayEnv: {}, workerEnv: options, twin: sharedQueue(), routed: false };
    // A job's key picks its partition, the partition its worker: twice as many partitions as workers.
    if (base === "group")
      return {
        name: spec,
        intake: "group",
        partitions: 2 * workers,
        jobTopics: "per-lane",
        gatewayEnv: {},
        workerEnv: options,
        twin: partitioned(),
        routed: false,
      };
    if (!(ARM_NAMES as readonly string[]).includes(base)) throw new Error(`unknown arm '${base}' (known: ${ARM_NAMES.join(", ")}; routed ones take @K=V+K=V)`);
    const refreshMs = Number(options["SHOAL_DISPATCH_REFRESH_MS"] ?? 200) * routerTimeScale;
    const refreshed = base === "least-loaded" || base === "p2c" || base === "sie-direct";
    const gatewayEnv: Record<string, string> = { SHOAL_DISPATCH: base, ...options, ...(refreshed ? { SHOAL_DISPATCH_REFRESH_MS: String(refreshMs) } : {}) };
    const countOwn = !/^(0|false|no|off)$/i.test(gatewayEnv["SHOAL_DISPATCH_COUNT_OWN"] ?? "1");
    const keepOwnSends = /^(1|true|yes|on)$/i.test(gatewayEnv["SHOAL_DISPATCH_KEEP_OWN"] ?? "0");
    const ties = gatewayEnv["SHOAL_DISPATCH_TIES"] === "random" ? "random" : "first";
    const metric = gatewayEnv["SHOAL_DISPATCH_METRIC"] === "queue-depth" ? "queue-depth" : "pending-tokens";
    const twin =
      base === "round-robin"
        ? roundRobin()
        : base === "least-loaded"
          ? leastLoaded({ refreshMs, countOwnSends: countOwn, keepOwnSends, ties, metric })
          : base === "p2c"
            ? powerOfTwo({ refreshMs, keepOwnSends })
            : base === "sie-direct"
              ? directRouter({ refreshMs })
              : partitioned();
    // Workers push their load at least as often as the board is read (SIE's early router: every 200 ms).
    const statusMs = Math.min(200 * routerTimeScale, Math.max(20 * routerTimeScale, refreshMs === 0 ? 20 * routerTimeScale : refreshMs));
    return {
      name: spec,
      intake: "share",
      partitions: 1,
      jobTopics: "per-lane",
      gatewayEnv,
      // The options go to the workers too (the gateway's SHOAL_DISPATCH_* mean nothing there), so a worker setting can be an ablation of a routed arm.
      workerEnv: { ...options, SHOAL_ROUTED_INTAKE: "1", SHOAL_STATUS_INTERVAL_MS: String(statusMs) },
      twin,
      statusMs,
      routed: true,
    };
  });
}
