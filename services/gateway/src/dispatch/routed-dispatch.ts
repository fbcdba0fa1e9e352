import type { Message } from "kafkajs";
import {
  directRouter,
  jobsTopic,
  leastLoaded,
  partitioned,
  powerOfTwo,
  roundRobin,
  routedTopic,
  type DeviceLoad,
  type DispatchPolicy,
  type Logger,
  type Router,
  type ServedLane,
} from "@shoal/common";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import type { RoutedDispatchConfig } from "./dispatch-config.ts";

/** A job the gateway is about to write. */
export interface JobToPlace {
  readonly jobId: string;
  readonly pool: string;
  readonly lane: ServedLane;
  readonly model: string;
  readonly tokens: number;
  /** The pool's topic for this job when no worker is picked (default: the lane's jobs topic). */
  readonly sharedTopic?: string;
}

/** Where a job went: a worker's routed topic, or the pool's shared topic (no routed worker live). */
export interface Placement {
  readonly topic: string;
  /** The worker picked; undefined when the job went to the shared topic. */
  readonly workerId: string | undefined;
}

export interface RoutedDispatchDeps {
  readonly config: RoutedDispatchConfig;
  /** Live workers as this gateway's status reader sees them (fresh statuses only). */
  readonly workers: () => readonly WorkerStatus[];
  /** Writes a job record again (rescue of a job whose worker went away). */
  readonly resend: (topic: string, message: Message) => Promise<void>;
  readonly logger: Logger;
  /** Told each placement and each rescue (metrics). */
  readonly onPlaced?: (pool: string, placement: Placement) => void;
  readonly onRescued?: (workerId: string) => void;
  /** How often jobs on workers that went away are looked for (default 250 ms). */
  readonly rescueCheckMs?: number;
  /** Random source of the random policies (default Math.random). */
  readonly random?: () => number;
}

/** The gateway's routed dispatch (SHOAL_DISPATCH other than `shared`). */
export interface RoutedDispatch {
  /** Picks the job's topic. */
  place(job: JobToPlace): Placement;
  /** The job's record was written to a worker's topic: watch it until its call ends. */
  sent(jobId: string, placement: Placement, message: Message, sharedTopic: string): void;
  /** The job's call ended (answered, failed, timed out, caller gone). */
  ended(jobId: string): void;
  start(): void;
  stop(): void;
}

/** The shared routers (one implementation with the simulation in services/sim). */
function policyOf(c: RoutedDispatchConfig): DispatchPolicy {
  switch (c.mode) {
    case "partition":
      return partitioned();
    case "round-robin":
      return roundRobin();
    case "least-loaded":
      return leastLoaded({ refreshMs: c.refreshMs, countOwnSends: c.countOwnSends, keepOwnSends: c.keepOwnSends, ties: c.ties, metric: c.metric });
    case "p2c":
      return powerOfTwo({ refreshMs: c.refreshMs, keepOwnSends: c.keepOwnSends });
    case "sie-direct":
      return directRouter({ refreshMs: c.refreshMs });
  }
}

/** FNV-1a of a string: the partition router's key (the model id, so each model has its worker). */
function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** A status as the routers' board reads it: jobs in hand and their tokens not yet computed. */
function loadOf(s: WorkerStatus): DeviceLoad {
  return { queuedJobs: s.inFlightJobs, queuedTokens: Number(s.pendingTokens), runningJobs: 0, runningTokens: 0, asOfMs: Number(s.updatedUnixMs) };
}

/** One pool's router over the pool's routed workers, rebuilt when they change. */
interface PoolRouter {
  readonly ids: readonly string[];
  readonly key: string;
  readonly router: Router;
}

interface Watched {
  readonly workerId: string;
  readonly message: Message;
  readonly sharedTopic: string;
}

/**
 * Routed dispatch: a router of the configured policy per pool picks one of the pool's live
 * workers that read a routed topic (status `routed_intake`, not draining), from this gateway's
 * own view of the status topic, refreshed every `refreshMs` (0: before every job). No such
 * worker: the job goes to the pool's shared topic, which every worker still reads. A job whose
 * worker goes away (status stale, tombstoned or draining) before its call ends is written again
 * to the shared topic, so it is not lost; the worker's copy, if it ever runs, is a duplicate the
 * gateway drops.
 */
export function createRoutedDispatch(deps: RoutedDispatchDeps): RoutedDispatch {
  const log = deps.logger.child({ component: "routed-dispatch" });
  const policy = policyOf(deps.config);
  if (policy.kind !== "routed") throw new Error(`dispatch mode ${deps.config.mode} is not a router`);
  const createRouter = policy.createRouter;
  const random = deps.random ?? Math.random;
  const routers = new Map<string, PoolRouter>();
  const watched = new Map<string, Watched>();
  const everyJob = deps.config.refreshMs === 0;
  let refreshTimer: NodeJS.Timeout | undefined;
  let rescueTimer: NodeJS.Timeout | undefined;

  const routable = (s: WorkerStatus, pool: string): boolean => s.pool === pool && s.routedIntake && !s.draining;

  /** The pool's router for its routed workers now; a new one (fresh board) when they changed. */
  function routerFor(pool: string, live: readonly WorkerStatus[]): PoolRouter | undefined {
    const mine = live.filter((s) => routable(s, pool));
    const ids = mine.map((s) => s.workerId);
    const key = ids.join("\u0000");
    const known = routers.get(pool);
    if (known?.key === key) return ids.length === 0 ? undefined : known;
    if (ids.length === 0) {
      routers.delete(pool);
      return undefined;
    }
    const fresh = { ids, key, router: createRouter(ids.length, random) };
    fresh.router.refresh?.(mine.map(loadOf));
    routers.set(pool, fresh);
    log.info({ pool, workers: ids }, "routed workers changed");
    return fresh;
  }

  function refreshAll(): void {
    const live = deps.workers();
    for (const [pool, r] of routers) {
      const now = routerFor(pool, live);
      // A router that was just rebuilt read the board already.
      if (now === r) r.router.refresh?.(live.filter((s) => routable(s, pool)).map(loadOf));
    }
  }

  function rescue(): void {
    if (watched.size === 0) return;
    const live = new Set(
      deps
        .workers()
        .filter((s) => s.routedIntake && !s.draining)
        .map((s) => s.workerId),
    );
    for (const [jobId, w] of watched) {
      if (live.has(w.workerId)) continue;
      watched.delete(jobId);
      deps.onRescued?.(w.workerId);
      log.warn({ jobId, workerId: w.workerId, topic: w.sharedTopic }, "routed worker went away; job written again to the shared topic");
      deps.resend(w.sharedTopic, w.message).catch((err: unknown) => log.error({ err, jobId }, "could not write the rescued job"));
    }
  }

  return {
    place(job) {
      const live = deps.workers();
      const pr = routerFor(job.pool, live);
      const shared = job.sharedTopic ?? jobsTopic(job.pool, job.lane);
      if (pr === undefined) {
        deps.onPlaced?.(job.pool, { topic: shared, workerId: undefined });
        return { topic: shared, workerId: undefined };
      }
      if (everyJob) pr.router.refresh?.(live.filter((s) => routable(s, job.pool)).map(loadOf));
      // The board is the router's own (refreshed from statuses); the live loads argument is unused by board routers.
      const index = pr.router.route({ id: hashKey(job.model), totalTokens: job.tokens, arrivalMs: Date.now() }, []);
      const workerId = pr.ids[index]!;
      const placement = { topic: routedTopic(job.pool, workerId, job.lane), workerId };
      deps.onPlaced?.(job.pool, placement);
      return placement;
    },
    sent(jobId, placement, message, sharedTopic) {
      if (placement.workerId !== undefined) watched.set(jobId, { workerId: placement.workerId, message, sharedTopic });
    },
    ended(jobId) {
      watched.delete(jobId);
    },
    start() {
      if (!everyJob) {
        refreshTimer = setInterval(refreshAll, deps.config.refreshMs);
        refreshTimer.unref();
      }
      rescueTimer = setInterval(rescue, deps.rescueCheckMs ?? 250);
      rescueTimer.unref();
      log.info({ ...deps.config, policy: policy.name }, "routed dispatch");
    },
    stop() {
      clearInterval(refreshTimer);
      clearInterval(rescueTimer);
    },
  };
}
