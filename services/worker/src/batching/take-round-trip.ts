/**
 * How long a take from the queue takes: the share intake's fetch round trip, plus any simulated
 * network after it (`SHOAL_SIM_FETCH_DELAY_MS`, benchmarks only). `SHOAL_TAKE_AHEAD_MS=auto` sets the
 * take-ahead's lead from it, so a busy worker asks for its next jobs that long before its work in
 * hand runs out, whatever the network between it and the broker.
 *
 * A sample is one fetch that brought records, from sending it to its answer. A fetch that waited at
 * the broker for records to arrive lasts longer than a round trip, never shorter, so the estimate
 * is a low quantile of the recent samples: under a backlog (where the take-ahead matters) the
 * broker answers at once and most samples are round trips.
 */
export class TakeRoundTrip {
  private readonly samples: number[] = [];
  private next = 0;

  /**
   * @param extraMs added to every take (a simulated network after the fetch)
   * @param window samples kept (the most recent)
   * @param quantile of the kept samples taken for the fetch's round trip (0.25: the lower quartile)
   * @param minSamples samples needed before an estimate is given
   */
  constructor(
    private readonly extraMs = 0,
    private readonly window = 32,
    private readonly quantile = 0.25,
    private readonly minSamples = 4,
  ) {}

  /** A fetch brought records after `ms`. */
  fetched(ms: number): void {
    if (!(ms >= 0)) return;
    if (this.samples.length < this.window) this.samples.push(ms);
    else this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.window;
  }

  /** The take-ahead's lead: the round trip and a tenth more (jobs in hand as the device frees, not just after). */
  leadMs(): number | undefined {
    const ms = this.ms();
    return ms === undefined ? undefined : ms * 1.1;
  }

  /** Whether `ms` (e.g. until this worker is free) is known and within one take round trip. */
  covers(ms: number | undefined): boolean {
    const rtt = this.ms();
    return rtt !== undefined && ms !== undefined && ms <= rtt;
  }

  /** The estimated take round trip in ms; undefined until `minSamples` fetches brought records. */
  ms(): number | undefined {
    if (this.samples.length < this.minSamples) return undefined;
    const sorted = [...this.samples].sort((a, b) => a - b);
    return sorted[Math.floor(this.quantile * (sorted.length - 1))]! + this.extraMs;
  }
}
