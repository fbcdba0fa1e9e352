/**
 * Share-group membership (KIP-932): the ShareGroupHeartbeat loop. The member id is made here (16
 * random bytes, base64url) and kept for the consumer's life; epoch 0 joins, the broker's epoch is
 * echoed on every heartbeat, -1 leaves. The broker pushes the assignment in a heartbeat response
 * whenever it changes; the loop runs at the interval the broker gives.
 */
import { randomBytes } from "node:crypto";
import type { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError, type KafkaSecurityError } from "./errors.ts";
import { shareGroupHeartbeatApi, type ShareGroupHeartbeatResponse } from "./generated/share-group-heartbeat.ts";
import { call } from "./protocol/call.ts";

/** topic id → assigned partition indexes */
export type Assignment = ReadonlyMap<string, readonly number[]>;

export interface MembershipEvents {
  joined(memberId: string, memberEpoch: number): void;
  assignment(assignment: Assignment, memberEpoch: number): void;
  epoch(memberEpoch: number): void;
  /** A retried failure (coordinator moved, broker unreachable, fenced): for logs and metrics. */
  problem(error: Error, action: string): void;
  /** Security refused (password, certificate): the loop has stopped; retrying would not help. */
  fatal(error: KafkaSecurityError): void;
}

const RETRY_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 2_000;

export class Membership {
  readonly memberId = randomBytes(16).toString("base64url");
  #epoch = 0;
  #assignment: Assignment = new Map();
  #topics: readonly string[] = [];
  #sendTopics = true;
  #coordinator: number | undefined;
  #intervalMs = 1_000;
  #running = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  heartbeats = 0;

  constructor(
    private readonly cluster: Cluster,
    private readonly groupId: string,
    private readonly events: MembershipEvents,
  ) {}

  get memberEpoch(): number {
    return this.#epoch;
  }

  get assignment(): Assignment {
    return this.#assignment;
  }

  /** Replaces the subscription; the next heartbeat (sent at once) carries it. */
  subscribe(topics: readonly string[]): void {
    this.#topics = [...new Set(topics)].sort();
    this.#sendTopics = true;
    if (!this.#running) {
      this.#running = true;
      this.#loop = this.#run();
    }
    this.#wake?.();
  }

  /** Stops the loop; with `leave`, sends the epoch -1 heartbeat that removes the member at once. */
  async stop(leave: boolean): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#wake?.();
    await this.#loop;
    if (!leave || this.#epoch <= 0 || this.#coordinator === undefined) return;
    try {
      const conn = await this.cluster.connection(this.#coordinator, "coordinator");
      await call(conn, shareGroupHeartbeatApi, 1, { groupId: this.groupId, memberId: this.memberId, memberEpoch: -1 });
    } catch (err) {
      this.events.problem(err as Error, "leave heartbeat failed; the session timeout will remove the member");
    }
    this.#epoch = -1;
  }

  async #run(): Promise<void> {
    let backoff = RETRY_BACKOFF_MS;
    while (this.#running) {
      let delay: number;
      try {
        const res = await this.#heartbeat();
        delay = this.#handle(res);
        backoff = RETRY_BACKOFF_MS;
      } catch (err) {
        const refused = this.cluster.securityFailure(err);
        if (refused) {
          this.#running = false;
          this.events.fatal(refused);
          break;
        }
        if (this.#coordinator !== undefined) this.cluster.drop(this.#coordinator, "coordinator");
        this.#coordinator = undefined;
        this.events.problem(err as Error, "heartbeat failed; finding the coordinator again");
        delay = backoff;
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
      if (!this.#running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  async #heartbeat(): Promise<ShareGroupHeartbeatResponse> {
    this.#coordinator ??= await this.cluster.findCoordinator(this.groupId);
    const conn = await this.cluster.connection(this.#coordinator, "coordinator");
    const sendTopics = this.#sendTopics || this.#epoch === 0;
    const res = await call(conn, shareGroupHeartbeatApi, 1, {
      groupId: this.groupId,
      memberId: this.memberId,
      memberEpoch: this.#epoch,
      // null means "unchanged since the last heartbeat"; a join must always carry it.
      subscribedTopicNames: sendTopics ? [...this.#topics] : null,
    });
    this.heartbeats++;
    if (res.errorCode === ErrorCode.NONE && sendTopics) this.#sendTopics = false;
    return res;
  }

  /** Applies a response; returns the delay before the next heartbeat. */
  #handle(res: ShareGroupHeartbeatResponse): number {
    switch (res.errorCode) {
      case ErrorCode.NONE:
        break;
      case ErrorCode.NOT_COORDINATOR:
      case ErrorCode.COORDINATOR_NOT_AVAILABLE:
      case ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        this.#coordinator = undefined;
        this.events.problem(new KafkaProtocolError("ShareGroupHeartbeat", res.errorCode, res.errorMessage), "finding the coordinator again");
        return RETRY_BACKOFF_MS;
      case ErrorCode.UNKNOWN_MEMBER_ID:
      case ErrorCode.FENCED_MEMBER_EPOCH:
        // The group forgot us (session timeout, coordinator failover): rejoin under the same id.
        this.events.problem(new KafkaProtocolError("ShareGroupHeartbeat", res.errorCode, res.errorMessage), "rejoining with epoch 0");
        this.#epoch = 0;
        this.#setAssignment(new Map(), 0);
        return 0;
      default:
        this.events.problem(new KafkaProtocolError("ShareGroupHeartbeat", res.errorCode, res.errorMessage), "retrying");
        return MAX_BACKOFF_MS;
    }
    const wasJoined = this.#epoch > 0;
    if (res.memberEpoch !== this.#epoch) {
      this.#epoch = res.memberEpoch;
      this.events.epoch(this.#epoch);
    }
    if (!wasJoined && this.#epoch > 0) this.events.joined(this.memberId, this.#epoch);
    if (res.assignment) {
      this.#setAssignment(new Map(res.assignment.topicPartitions.map((tp) => [tp.topicId, [...tp.partitions].sort((a, b) => a - b)])), this.#epoch);
    }
    this.#intervalMs = res.heartbeatIntervalMs > 0 ? res.heartbeatIntervalMs : this.#intervalMs;
    return this.#intervalMs;
  }

  #setAssignment(assignment: Assignment, epoch: number): void {
    this.#assignment = assignment;
    this.events.assignment(assignment, epoch);
  }
}
