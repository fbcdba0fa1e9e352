/**
 * Test support: a loader whose loads and unloads settle when the test says (or at once in `auto`
 * mode), and which checks, as the "memory" it hands out, what the manager promises: bytes held
 * from `load` until the unload settles stay within the budget, one load/unload per model at a time,
 * nothing leased is unloaded. Not a test file itself.
 */
export interface FakeResource {
  readonly model: string;
  readonly id: number;
  /** Leases the test holds on it (kept by the test, checked on unload). */
  leases: number;
  unloaded: boolean;
}

export interface PendingOp {
  readonly kind: "load" | "unload";
  readonly model: string;
  settle(): void;
  fail(err: Error): void;
}

export class FakeLoader {
  readonly pending: PendingOp[] = [];
  /** "load a", "unload b", "loaded a", "load-failed a", "unloaded b" in order. */
  readonly log: string[] = [];
  /** Broken promises found (the tests assert this stays empty). */
  readonly violations: string[] = [];
  liveBytes = 0;
  maxLiveBytes = 0;
  private readonly busy = new Map<string, number>();
  private nextId = 1;

  constructor(
    private readonly sizes: (model: string) => number,
    private readonly budgetBytes: number,
    /** Settle every load and unload on the next microtask. */
    public auto = false,
    /** Models whose loads fail (in auto mode), with this message. */
    public readonly failing = new Map<string, string>(),
  ) {}

  readonly load = (model: string): Promise<FakeResource> => {
    this.log.push(`load ${model}`);
    this.enter(model, "load");
    this.liveBytes += this.sizes(model);
    this.maxLiveBytes = Math.max(this.maxLiveBytes, this.liveBytes);
    if (this.liveBytes > this.budgetBytes) this.violations.push(`load ${model}: ${this.liveBytes} bytes live > budget ${this.budgetBytes}`);
    return new Promise<FakeResource>((resolve, reject) => {
      const op: PendingOp = {
        kind: "load",
        model,
        settle: () => {
          this.remove(op);
          this.leave(model);
          this.log.push(`loaded ${model}`);
          resolve({ model, id: this.nextId++, leases: 0, unloaded: false });
        },
        fail: (err) => {
          this.remove(op);
          this.leave(model);
          this.liveBytes -= this.sizes(model);
          this.log.push(`load-failed ${model}`);
          reject(err);
        },
      };
      this.pending.push(op);
      if (this.auto) {
        const msg = this.failing.get(model);
        queueMicrotask(() => (msg === undefined ? op.settle() : op.fail(new Error(msg))));
      }
    });
  };

  readonly unload = (model: string, r: FakeResource): Promise<void> => {
    this.log.push(`unload ${model}`);
    this.enter(model, "unload");
    if (r.model !== model) this.violations.push(`unload ${model} got the resource of ${r.model}`);
    if (r.leases > 0) this.violations.push(`unload ${model} while ${r.leases} lease(s) are held`);
    if (r.unloaded) this.violations.push(`unload ${model} twice`);
    r.unloaded = true;
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        this.remove(op);
        this.leave(model);
        this.liveBytes -= this.sizes(model);
        this.log.push(`unloaded ${model}`);
      };
      const op: PendingOp = {
        kind: "unload",
        model,
        settle: () => {
          done();
          resolve();
        },
        fail: (err) => {
          done();
          reject(err);
        },
      };
      this.pending.push(op);
      if (this.auto) queueMicrotask(() => op.settle());
    });
  };

  /** The pending op for `model` of `kind` (the only one there can be). */
  op(kind: "load" | "unload", model: string): PendingOp {
    const op = this.pending.find((p) => p.kind === kind && p.model === model);
    if (!op) throw new Error(`no pending ${kind} of ${model}; pending: ${this.pending.map((p) => `${p.kind} ${p.model}`).join(", ")}`);
    return op;
  }

  loadsOf(model: string): number {
    return this.log.filter((l) => l === `load ${model}`).length;
  }

  private enter(model: string, what: string): void {
    const n = this.busy.get(model) ?? 0;
    if (n > 0) this.violations.push(`${what} ${model} while another load/unload of it is in progress`);
    this.busy.set(model, n + 1);
  }

  private leave(model: string): void {
    this.busy.set(model, (this.busy.get(model) ?? 1) - 1);
  }

  private remove(op: PendingOp): void {
    const i = this.pending.indexOf(op);
    if (i >= 0) this.pending.splice(i, 1);
  }
}

/** Lets every pending promise callback run. */
export const flush = (): Promise<void> => new Promise((r) => setImmediate(r));
