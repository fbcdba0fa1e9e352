/**
 * One share session: this member's conversation with one partition leader. The epoch is 0 on the
 * request that opens it, then increments with every ShareFetch / ShareAcknowledge, and -1 closes
 * it. Requests on a session must be sequential (the broker checks the epoch), so they go through a
 * one-at-a-time queue. Records acquired in a session are released when it ends, so acks queued for
 * an earlier incarnation can never succeed: `generation` tells them apart.
 */
import { AckQueue, partitionKey, type PartitionRef } from "./acks.ts";

export const INITIAL_EPOCH = 0;
export const FINAL_EPOCH = -1;

export class ShareSession {
  epoch = INITIAL_EPOCH;
  /** Bumped whenever the broker-side session is gone (reset to epoch 0). */
  generation = 0;
  /** Partitions the broker has in this session (listed in an accepted request). */
  readonly partitions = new Map<string, PartitionRef>();
  readonly acks = new AckQueue();
  /** Negotiated ShareFetch / ShareAcknowledge version for this broker (1 or 2). */
  version = 0;
  /** A ShareFetch that carries no acknowledgements is waiting at the broker (close() may cut it short). */
  bareWait = false;
  /** close() cut the waiting fetch short: its failure is expected, not a problem to report. */
  aborted = false;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(readonly nodeId: number) {}

  /** Runs `fn` after every earlier request of this session has finished. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(fn, fn);
    this.#tail = run.catch(() => {});
    return run;
  }

  /** The broker accepted a request: the next one carries the next epoch (wrapping past 2^31-1 to 1). */
  advance(listed: readonly PartitionRef[]): void {
    for (const p of listed) this.partitions.set(partitionKey(p.topicId, p.partition), p);
    this.epoch = this.epoch >= 0x7fffffff ? 1 : this.epoch + 1;
  }

  /** The broker no longer has this session (or we cannot tell): start a new one. */
  reset(): void {
    this.aborted = false;
    this.epoch = INITIAL_EPOCH;
    this.generation++;
    this.partitions.clear();
  }

  /** Partitions in the session that are no longer wanted here (ForgottenTopicsData). */
  forgotten(wanted: ReadonlySet<string>): PartitionRef[] {
    return [...this.partitions.entries()].filter(([k]) => !wanted.has(k)).map(([, p]) => p);
  }

  forget(refs: readonly PartitionRef[]): void {
    for (const p of refs) this.partitions.delete(partitionKey(p.topicId, p.partition));
  }
}
