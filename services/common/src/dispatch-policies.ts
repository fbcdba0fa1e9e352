/**
 * Dispatch policies (issue #16), one implementation for the discrete-event simulation
 * (services/sim) and the gateway's routed dispatch (SHOAL_DISPATCH). `shared` is Shoal's: one
 * queue, any idle device pulls its next batch from it. Every other policy is a router that pushes
 * each job to one device's private queue when it arrives, deciding from what it knows: nothing
 * (hash, round robin) or a status board of device load that is only as fresh as its last refresh.
 */

/** What a router knows of a job: a number to hash (partitioning) and its estimated tokens. */
export interface RoutedJob {
  /** Hashed by the partitioning router: a trace job's id, or a hash of a key. */
  readonly id: number;
  /** Σ tokens (pending-token metrics and own-send counts). */
  readonly totalTokens: number;
  /** When the router placed it, on the clock of `DeviceLoad.asOfMs` (a router that keeps its own sends needs it). */
  readonly arrivalMs?: number;
}

/** A device's load as the simulation knows it now (live, exact). */
export interface DeviceLoad {
  /** Jobs waiting in its private queue. */
  readonly queuedJobs: number;
  /** Σ tokens of those jobs. */
  readonly queuedTokens: number;
  /** Jobs of the batch it is running (0 when idle). */
  readonly runningJobs: number;
  /** Σ tokens of the batch it is running. */
  readonly runningTokens: number;
  /** When this load was measured (a status's time); unset: now (an exact view). */
  readonly asOfMs?: number;
}

/** A router: picks the device of each arriving job. */
export interface Router {
  /** Status board period, ms; `refresh` is called every period from time 0. None: never. */
  readonly refreshMs?: number;
  /** Takes a snapshot of the devices' load (the status push). */
  refresh?(devices: readonly DeviceLoad[]): void;
  /** Index of the device the job goes to. */
  route(job: RoutedJob, devices: readonly DeviceLoad[]): number;
}

/** How jobs reach devices. */
export type DispatchPolicy =
  | {
      readonly kind: "shared";
      readonly name: string;
      /**
       * Set: an idle device takes the oldest waiting jobs *of any model* up to this many tokens (the
       * first always), as a fetch from one mixed topic hands a worker the next records whatever
       * their model, and runs them one model after another. Unset: it takes the oldest job's model
       * and that model's waiting jobs only (a queue per model).
       */
      readonly mixedTakeTokens?: number;
      /**
       * A queue per model: the model a device that just finished a batch takes next. `oldest`
       * (default): the oldest waiting job's, the central queue's order. `rotation`: the next model
       * with jobs after the one it ran last, in its own round (devices start at different models),
       * as a busy share-intake worker goes round the model topics (pullByModel); a device that was
       * idle takes the job that came, as a waiting fetch does. `heads`: the model whose oldest job
       * not yet acknowledged (waiting, or in a batch running on any device) arrived first, what a
       * worker learns from the broker's queue heads (SHOAL_SHARE_HEADS_MS): a share partition's
       * head is its oldest record not acknowledged, acquired ones included.
       */
      readonly order?: "oldest" | "rotation" | "heads";
      /**
       * A queue per model: a device takes up to this many batches of the model at once and runs
       * them back to back (default 1), as a share-intake worker whose idle take
       * (SHOAL_IDLE_TAKE_TOKENS) is several batches' worth holds the jobs it fetched.
       */
      readonly takeBatches?: number;
    }
  | { readonly kind: "routed"; readonly name: string; readonly createRouter: (devices: number, rand: () => number) => Router };

/** (a) Shoal: one shared queue; an idle device assembles its batch from it at pull time. */
export function sharedQueue(opts: { mixedTakeTokens?: number; order?: "oldest" | "rotation" | "heads"; takeBatches?: number } = {}): DispatchPolicy {
  const order = opts.order ?? "oldest";
  const takeBatches = opts.takeBatches ?? 1;
  if (!(Number.isSafeInteger(takeBatches) && takeBatches >= 1)) throw new RangeError(`takeBatches must be an integer >= 1 (got ${takeBatches})`);
  if (opts.mixedTakeTokens !== undefined) {
    if (order !== "oldest" || takeBatches !== 1) throw new RangeError(`a ${order} order or a take of batches is over a queue per model: no mixedTakeTokens`);
    if (!(opts.mixedTakeTokens >= 1)) throw new RangeError(`mixedTakeTokens must be >= 1 (got ${opts.mixedTakeTokens})`);
    return { kind: "shared", name: `shared queue, mixed fetch of ${opts.mixedTakeTokens} tokens`, mixedTakeTokens: opts.mixedTakeTokens };
  }
  const orderName = { oldest: "", rotation: ", busy devices go round the models", heads: ", busy devices take the oldest unacknowledged head's model" }[order];
  const takeName = takeBatches > 1 ? `, ${takeBatches} batches a take` : "";
  return {
    kind: "shared",
    name: `shared queue${orderName}${takeName}`,
    ...(order === "oldest" ? {} : { order }),
    ...(takeBatches > 1 ? { takeBatches } : {}),
  };
}

/** 32-bit mix of an integer (murmur3 finaliser): the partitioner's hash of a job key. */
export function mix32(x: number): number {
  let h = x >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** (b) Static partition, as a consumer group: the job's key hashed to one device's queue. */
export function partitioned(): DispatchPolicy {
  return { kind: "routed", name: "partition (hash)", createRouter: (n) => ({ route: (job) => mix32(job.id) % n }) };
}

/** (c) Round robin over the devices. */
export function roundRobin(): DispatchPolicy {
  return {
    kind: "routed",
    name: "round robin",
    createRouter: (n) => {
      let next = 0;
      return { route: () => next++ % n };
    },
  };
}

/** What a board-driven router measures a device's load by. */
export type LoadMetric = "pending-tokens" | "queue-depth";

function loadOf(d: DeviceLoad, metric: LoadMetric): number {
  return metric === "pending-tokens" ? d.queuedTokens + d.runningTokens : d.queuedJobs + d.runningJobs;
}

function sendCost(job: RoutedJob, metric: LoadMetric): number {
  return metric === "pending-tokens" ? job.totalTokens : 1;
}

/** Options of {@link leastLoaded}. */
export interface LeastLoadedOptions {
  /** Status board period, ms. */
  readonly refreshMs: number;
  /** Add the router's own sends since the last refresh to the board (a router-side estimate). */
  readonly countOwnSends: boolean;
  /**
   * With `countOwnSends`: an own send stays on the board until a load measured after it replaces
   * it (`asOfMs`), instead of being forgotten at the next refresh. Statuses are older than the
   * board read (a status interval, and the jobs still on their way to their worker): a board
   * refreshed before every job would otherwise forget every job it sent since the last status.
   */
  readonly keepOwnSends?: boolean;
  /** Among equally loaded devices: the first, or one at random. */
  readonly ties: "first" | "random";
  readonly metric?: LoadMetric;
  readonly name?: string;
}

/** A status board: loads as of the last refresh, plus own sends when counted (kept until a load measured after them, with `keepOwnSends`). */
function createBoard(
  n: number,
  metric: LoadMetric,
  countOwnSends: boolean,
  keepOwnSends = false,
): { board: number[]; refresh: (d: readonly DeviceLoad[]) => void; sent: (i: number, job: RoutedJob) => void } {
  const board = new Array<number>(n).fill(0);
  /** Own sends no load has shown yet: when, where, what they cost. */
  let kept: Array<{ readonly at: number; readonly device: number; readonly cost: number }> = [];
  return {
    board,
    refresh: (devices) => {
      devices.forEach((d, i) => {
        board[i] = loadOf(d, metric);
      });
      if (kept.length === 0) return;
      // A send before its device's load was measured is in that load (or unknowable: no time); one
      // at the same instant may not be, and stays.
      kept = kept.filter((s) => {
        const asOf = devices[s.device]?.asOfMs;
        if (asOf === undefined || s.at < asOf) return false;
        board[s.device]! += s.cost;
        return true;
      });
    },
    sent: (i, job) => {
      if (!countOwnSends) return;
      const cost = sendCost(job, metric);
      board[i]! += cost;
      if (keepOwnSends && job.arrivalMs !== undefined) kept.push({ at: job.arrivalMs, device: i, cost });
    },
  };
}

/** (d) Least loaded on a status board refreshed every `refreshMs`. */
export function leastLoaded(opts: LeastLoadedOptions): DispatchPolicy {
  const metric = opts.metric ?? "pending-tokens";
  const own = opts.countOwnSends ? (opts.keepOwnSends ? " +own kept" : " +own") : "";
  const name = opts.name ?? `least-loaded R=${opts.refreshMs}ms${own} ${opts.ties === "random" ? "rand" : "first"}`;
  return {
    kind: "routed",
    name,
    createRouter: (n, rand) => {
      const b = createBoard(n, metric, opts.countOwnSends, opts.keepOwnSends);
      return {
        refreshMs: opts.refreshMs,
        refresh: b.refresh,
        route(job) {
          const min = Math.min(...b.board);
          const candidates: number[] = [];
          b.board.forEach((v, i) => {
            if (v === min) candidates.push(i);
          });
          const pick = opts.ties === "random" ? candidates[Math.floor(rand() * candidates.length)]! : candidates[0]!;
          b.sent(pick, job);
          return pick;
        },
      };
    },
  };
}

/** (e) Power of two choices on pending tokens: two distinct devices at random, the less loaded on the board (own sends counted). */
export function powerOfTwo(opts: { readonly refreshMs: number; readonly keepOwnSends?: boolean }): DispatchPolicy {
  return {
    kind: "routed",
    name: `power of two R=${opts.refreshMs}ms${opts.keepOwnSends ? " +own kept" : ""}`,
    createRouter: (n, rand) => {
      const b = createBoard(n, "pending-tokens", true, opts.keepOwnSends);
      return {
        refreshMs: opts.refreshMs,
        refresh: b.refresh,
        route(job) {
          const first = Math.floor(rand() * n);
          const second = n === 1 ? first : (first + 1 + Math.floor(rand() * (n - 1))) % n;
          const pick = b.board[second]! < b.board[first]! ? second : first;
          b.sent(pick, job);
          return pick;
        },
      };
    },
  };
}

/**
 * (f) The SIE-early "direct" router: each device pushes its queue depth every 200 ms; the router
 * sends to the minimum, ties to the first device (so it fills the first devices first), without
 * accounting for what it sent since.
 */
export function directRouter(opts: { readonly refreshMs?: number } = {}): DispatchPolicy {
  const refreshMs = opts.refreshMs ?? 200;
  return leastLoaded({ refreshMs, countOwnSends: false, ties: "first", metric: "queue-depth", name: `direct (depth push ${refreshMs}ms, fill-first)` });
}
