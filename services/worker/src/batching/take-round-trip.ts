import type { IntakeHandler } from "../intake/intake.ts";

/**
 * How long a take from the queue takes: from the moment the worker has room (it asks) to the
 * moment a job reaches it. `SHOAL_TAKE_AHEAD_MS=auto` sets the take-ahead's lead from it, so a busy
 * worker asks for its next jobs that long before its work in hand runs out, whatever the network
 * (or the simulated delay, `SHOAL_SIM_FETCH_DELAY_MS`) between it and the broker.
 *
 * A sample is the time from the first ask after an arrival to the next arrival. When the queue is
 * empty that is the wait for the next request, not a round trip, so the estimate is a low quantile
 * of the recent samples: a round trip is never shorter than itself, and under a backlog (where the
 * take-ahead matters) most samples are round trips.
 */
export class TakeRoundTrip {
  private askedAt: number | undefined;
  private readonly samples: number[] = [];
  private next = 0;

  /**
   * @param window samples kept (the most recent)
   * @param quantile of the kept samples taken for the round trip (0.25: the lower quartile)
   * @param minSamples samples needed before an estimate is given
   */
  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly window = 32,
    private readonly quantile = 0.25,
    private readonly minSamples = 4,
  ) {}

  /** The worker has room and asks for jobs; only the first ask since the last arrival counts. */
  asked(): void {
    if (this.askedAt === undefined) this.askedAt = this.now();
  }

  /** A job reached the worker. */
  arrived(): void {
    if (this.askedAt === undefined) return;
    const sample = this.now() - this.askedAt;
    this.askedAt = undefined;
    if (this.samples.length < this.window) this.samples.push(sample);
    else this.samples[this.next] = sample;
    this.next = (this.next + 1) % this.window;
  }

  /** The take-ahead's lead: the round trip and a tenth more (jobs in hand as the device frees, not just after). */
  leadMs(): number | undefined {
    const ms = this.ms();
    return ms === undefined ? undefined : ms * 1.1;
  }

  /** The estimated round trip in ms; undefined until `minSamples` takes were seen. */
  ms(): number | undefined {
    if (this.samples.length < this.minSamples) return undefined;
    const sorted = [...this.samples].sort((a, b) => a - b);
    return sorted[Math.floor(this.quantile * (sorted.length - 1))];
  }
}

/**
 * The handler the intake sees, telling `takes` when the worker has room: the intake asks the queue
 * then. Wrap the outermost handler (a simulated delay's included), so that jobs already on their
 * way are not taken for an answer to an ask that was never sent.
 */
export function asking(handler: IntakeHandler, takes: TakeRoundTrip): IntakeHandler {
  return {
    deliver: (delivery) => handler.deliver(delivery),
    room(lane) {
      const n = handler.room(lane);
      if (n > 0) takes.asked();
      return n;
    },
    ...(handler.holds ? { holds: (model: string) => handler.holds!(model) } : {}),
  };
}
