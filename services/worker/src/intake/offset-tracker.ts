/**
 * Tracks one partition's records from fetch to completion, so that the committed offset never
 * passes a record whose result has not been produced (at-least-once), even though records
 * complete out of order (batches mix jobs, jobs finish at different times).
 */
export class OffsetTracker {
  /** Offsets in fetch order that are not yet known to be complete at the head. */
  private readonly outstanding: number[] = [];
  private head = 0;
  private readonly done = new Set<number>();
  private nextToCommit: number | undefined;

  /** Registers a fetched record; offsets arrive in increasing order per partition. */
  begin(offset: number): void {
    this.outstanding.push(offset);
  }

  complete(offset: number): void {
    this.done.add(offset);
    while (this.head < this.outstanding.length && this.done.has(this.outstanding[this.head]!)) {
      const o = this.outstanding[this.head]!;
      this.done.delete(o);
      this.head += 1;
      this.nextToCommit = o + 1;
    }
    if (this.head > 1024 && this.head * 2 > this.outstanding.length) {
      this.outstanding.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Records begun but not yet complete. */
  get inFlight(): number {
    return this.outstanding.length - this.head;
  }

  /** The offset to commit (next record to read after a restart), if it moved since last taken. */
  takeCommittable(): number | undefined {
    const next = this.nextToCommit;
    this.nextToCommit = undefined;
    return next;
  }
}
