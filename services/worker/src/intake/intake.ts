/**
 * The dispatch seam: where a worker's jobs come from. The job lifecycle (../jobs) talks only to
 * this interface; a Kafka consumer group is one implementation (group-intake.ts), a Kafka share
 * group another, and routed or simulated dispatch modes plug in the same way.
 *
 * ## The delivery guarantee an intake must keep
 * At-least-once. Every record handed to {@link IntakeHandler.deliver} is settled exactly once by
 * the lifecycle, and the intake must treat a record that was never settled (the worker crashed,
 * the session or lock expired, the intake stopped first) as not done: it is delivered again,
 * here or to another worker. A record is settled `done` only after its outcome is durable on the
 * broker (the result on the reply topic, the next attempt on the retry topic, or the record on
 * the dead-letter topic), so accepted work is never lost. Redelivery may hand the same job to the
 * same worker twice; the lifecycle answers it once.
 *
 * An intake asks for no more records than {@link IntakeHandler.room} says the worker can take
 * now, so no worker hoards jobs that an idle one could run.
 */

import type { LaneName } from "@shoal/common";

/** Kafka record headers, as the clients give them. */
export type RecordHeaders = Readonly<Record<string, Buffer | string | (Buffer | string)[] | undefined>>;

/**
 * How a delivered record ends:
 * - `done`: handled for good (answered, or written to the retry or dead-letter topic): never
 *   deliver it again;
 * - `release`: given back unfinished (draining, could not be answered): deliver it again, at
 *   once where the intake can (a share group), else after the next rebalance (a consumer group);
 * - `reject`: it can never be processed (not a job at all) and was kept for an operator where
 *   possible: never deliver it again;
 * - `decline`: given back because this worker cannot run it for a while (its model failed to load
 *   here and waits out a backoff): deliver it to another worker, as `release`, and do not take it
 *   straight back (on a share group each take costs the job a delivery; see `settle`'s `restMs`).
 */
export type Settlement = "done" | "release" | "reject" | "decline";

/** One record taken from a jobs topic, to be settled exactly once. */
export interface Delivery {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly value: Buffer | null;
  readonly headers: RecordHeaders | undefined;
  /** Times the broker has handed this record out, this one included (1 when the intake cannot tell). */
  readonly deliveryCount: number;
  /**
   * Idempotent; only the first call counts. With `decline`, `restMs` is how long this worker cannot
   * run the job: the intake asks the job's topic for nothing for up to that long.
   */
  settle(outcome: Settlement, restMs?: number): void;
}

/** What an intake hands its records to: the job lifecycle. */
export interface IntakeHandler {
  /** Takes one record; never throws for a bad record (it settles it instead). */
  deliver(delivery: Delivery): void;
  /**
   * How many more records the worker can take now (≥ 0). With `lane`, for a topic of that lane:
   * interactive room does not count batch-lane jobs waiting (they never delay interactive ones);
   * batch-lane room counts every job waiting.
   */
  room(lane?: LaneName): number;
  /**
   * Whether jobs of `model` taken here are not computed yet (waiting or running): more of that
   * model's jobs would join a batch this worker forms anyway. A job computed and still being
   * answered does not count. Absent: every job not yet settled counts.
   */
  holds?(model: string): boolean;
}

export interface JobIntake {
  /** What kind of dispatch this is, for logs, metrics and status (`group`, `share`, ...). */
  readonly kind: string;
  /** Starts taking records; resolves once the intake can deliver (e.g. joined its group). */
  start(handler: IntakeHandler): Promise<void>;
  /** Stops taking new records; records already delivered keep settling. */
  pause(): void;
  /**
   * Settles what it can (commits, acknowledgements), gives back what was never settled, and
   * leaves. Idempotent.
   */
  stop(): Promise<void>;
  /** Records delivered and not yet settled. */
  readonly inFlight: number;
  /** Whether it is a working member right now (readiness). */
  readonly ready: boolean;
}
