/** A binary min-heap of timed events; equal times pop in insertion order, so runs are deterministic. */
export class EventHeap<T> {
  private readonly times: number[] = [];
  private readonly seqs: number[] = [];
  private readonly items: T[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.items.length;
  }

  push(time: number, item: T): void {
    this.times.push(time);
    this.seqs.push(this.nextSeq++);
    this.items.push(item);
    this.up(this.items.length - 1);
  }

  /** Time of the earliest event (Infinity when empty). */
  peekTime(): number {
    return this.times[0] ?? Infinity;
  }

  /** The earliest event and its time, or undefined when empty. */
  pop(): { time: number; item: T } | undefined {
    const n = this.items.length;
    if (n === 0) return undefined;
    const out = { time: this.times[0]!, item: this.items[0]! };
    const lastTime = this.times.pop()!;
    const lastSeq = this.seqs.pop()!;
    const lastItem = this.items.pop()!;
    if (n > 1) {
      this.times[0] = lastTime;
      this.seqs[0] = lastSeq;
      this.items[0] = lastItem;
      this.down(0);
    }
    return out;
  }

  private less(a: number, b: number): boolean {
    return this.times[a]! < this.times[b]! || (this.times[a] === this.times[b] && this.seqs[a]! < this.seqs[b]!);
  }

  private swap(a: number, b: number): void {
    [this.times[a], this.times[b]] = [this.times[b]!, this.times[a]!];
    [this.seqs[a], this.seqs[b]] = [this.seqs[b]!, this.seqs[a]!];
    [this.items[a], this.items[b]] = [this.items[b]!, this.items[a]!];
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number): void {
    const n = this.items.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.less(l, m)) m = l;
      if (r < n && this.less(r, m)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}
