/**
 * A simulated accelerator (issue #16): one device that runs one call at a time, first come first
 * served, each call taking the profile's cost × the time dilation on a timer. Nothing is computed
 * while a call "runs", so one small machine can host many such devices; the price is timer
 * jitter, which the device measures (how late each timer fired) so a benchmark can refuse a run
 * whose event-loop lag was not small against its service times.
 */
import { callCostMs, type SimProfile } from "./profile.ts";

/** Timer overshoot observed by a device. */
export interface DeviceLag {
  /** Calls (and loads) timed. */
  readonly samples: number;
  readonly meanLagMs: number;
  readonly maxLagMs: number;
  /** Largest lag / planned duration over the samples (0 with none): compare to a tolerance. */
  readonly maxLagFraction: number;
  /** Σ lag / Σ planned duration. */
  readonly totalLagFraction: number;
}

/**
 * Why a benchmark run on simulated devices should be refused, or undefined when it may stand:
 * timers that overshot by more than `maxFraction` of the planned service time in total (e.g.
 * 0.05) mean the event loop, not the profile, shaped the latencies.
 */
export function lagVerdict(lag: DeviceLag, maxFraction: number): string | undefined {
  if (lag.totalLagFraction <= maxFraction) return undefined;
  return (
    `simulated device timers overshot by ${(lag.totalLagFraction * 100).toFixed(1)}% of the planned service time ` +
    `(max ${lag.maxLagMs.toFixed(1)} ms, mean ${lag.meanLagMs.toFixed(2)} ms over ${lag.samples} timers), more than ${(maxFraction * 100).toFixed(1)}%: ` +
    "raise SHOAL_SIM_DILATION or run fewer devices per core"
  );
}

/** What one device has done, for metrics and benchmarks. */
export interface DeviceStats {
  readonly calls: number;
  readonly paddedTokens: number;
  /** Wall ms the device spent computing or loading (dilated, lag included). */
  readonly busyMs: number;
  readonly queued: number;
}

/** One simulated accelerator shared by every model of a worker. */
export interface SimulatedDevice {
  readonly profile: SimProfile;
  /** Every cost is multiplied by this (10: ten times slower than the profile). */
  readonly dilation: number;
  /** `simulated:<profile>`, how the runtime is labelled wherever it shows. */
  readonly label: string;
  /**
   * Occupies the device for one call per shape, in order (one `session.run` each), after the calls
   * queued before it.
   * @returns wall ms the calls took on the device (dilated)
   */
  compute(shapes: readonly { readonly batch: number; readonly seqLen: number }[]): Promise<number>;
  /** Waits the profile's load cost (dilated). Loads do not occupy the device: weights stream in beside running calls. */
  load(): Promise<number>;
  lag(): DeviceLag;
  stats(): DeviceStats;
}

/** Options of {@link createSimulatedDevice}. */
export interface SimulatedDeviceOptions {
  readonly profile: SimProfile;
  /** >= 1 in practice: below 1 the timers' own granularity dominates short calls. */
  readonly dilation: number;
  /** Called as each run (one `compute`) leaves the device: when it started (unix ms) and the wall ms it took. */
  readonly onRun?: (startedUnixMs: number, tookMs: number) => void;
}

interface Pending {
  readonly plannedMs: number;
  readonly resolve: (ms: number) => void;
}

/** Creates an idle device with the given profile. */
export function createSimulatedDevice(opts: SimulatedDeviceOptions): SimulatedDevice {
  const { profile, dilation } = opts;
  if (!(Number.isFinite(dilation) && dilation > 0)) throw new RangeError(`dilation must be a finite number > 0 (got ${dilation})`);
  const queue: Pending[] = [];
  let running = false;
  let calls = 0;
  let paddedTokens = 0;
  let busyMs = 0;
  let samples = 0;
  let lagSum = 0;
  let plannedSum = 0;
  let maxLag = 0;
  let maxLagFraction = 0;

  /** Waits `ms` on a timer and records by how much the timer overshot. */
  function timed(ms: number): Promise<number> {
    const started = performance.now();
    return new Promise((resolve) => {
      setTimeout(() => {
        // libuv starts a timer from its loop clock, cached at the top of the loop turn, so on a
        // busy machine one can fire before performance.now() says `ms` have passed. The device
        // was busy `ms` at least: an early timer is the clock, not a faster device.
        const took = Math.max(performance.now() - started, ms);
        const lag = Math.max(0, took - ms);
        samples += 1;
        lagSum += lag;
        plannedSum += ms;
        maxLag = Math.max(maxLag, lag);
        if (ms > 0) maxLagFraction = Math.max(maxLagFraction, lag / ms);
        resolve(took);
      }, ms);
    });
  }

  function next(): void {
    if (running) return;
    const job = queue.shift();
    if (job === undefined) return;
    running = true;
    const startedUnixMs = Date.now();
    void timed(job.plannedMs).then((took) => {
      busyMs += took;
      opts.onRun?.(startedUnixMs, took);
      running = false;
      job.resolve(took);
      next();
    });
  }

  return {
    profile,
    dilation,
    label: `simulated:${profile.id}`,
    compute(shapes) {
      let plannedMs = 0;
      for (const s of shapes) {
        plannedMs += callCostMs(profile, s.batch, s.seqLen) * dilation;
        paddedTokens += s.batch * s.seqLen;
      }
      calls += shapes.length;
      return new Promise((resolve) => {
        queue.push({ plannedMs, resolve });
        next();
      });
    },
    load: () => timed(profile.loadMs * dilation),
    lag: () => ({
      samples,
      meanLagMs: samples === 0 ? 0 : lagSum / samples,
      maxLagMs: maxLag,
      maxLagFraction,
      totalLagFraction: plannedSum === 0 ? 0 : lagSum / plannedSum,
    }),
    stats: () => ({ calls, paddedTokens, busyMs, queued: queue.length }),
  };
}
