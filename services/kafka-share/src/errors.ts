/**
 * Kafka error codes the share consumer acts on, and the library's error classes. Names come from
 * @platformatic/kafka's table so messages read like the broker's logs.
 */
import { protocolErrorsCodesById } from "@platformatic/kafka";

/** The codes whose handling differs; anything else is reported as a {@link KafkaProtocolError}. */
export const ErrorCode = {
  NONE: 0,
  UNKNOWN_TOPIC_OR_PARTITION: 3,
  LEADER_NOT_AVAILABLE: 5,
  NOT_LEADER_OR_FOLLOWER: 6,
  REQUEST_TIMED_OUT: 7,
  COORDINATOR_LOAD_IN_PROGRESS: 14,
  COORDINATOR_NOT_AVAILABLE: 15,
  NOT_COORDINATOR: 16,
  UNKNOWN_MEMBER_ID: 25,
  REBALANCE_IN_PROGRESS: 27,
  UNKNOWN_TOPIC_ID: 100,
  FENCED_MEMBER_EPOCH: 110,
  INVALID_RECORD_STATE: 121,
  SHARE_SESSION_NOT_FOUND: 122,
  INVALID_SHARE_SESSION_EPOCH: 123,
} as const;

/** The broker's name for an error code, e.g. 123 → "INVALID_SHARE_SESSION_EPOCH". */
export function errorName(code: number): string {
  return protocolErrorsCodesById[code] ?? `ERROR_${code}`;
}

/** An error code a broker returned. `code` is Kafka's numeric code, `name` its constant. */
export class KafkaProtocolError extends Error {
  override readonly name: string = "KafkaProtocolError";
  readonly errorName: string;
  constructor(
    readonly api: string,
    readonly code: number,
    detail?: string | null,
  ) {
    super(`${api}: ${errorName(code)} (${code})${detail ? `: ${detail}` : ""}`);
    this.errorName = errorName(code);
  }
}

/**
 * Acknowledging a record failed: most often its acquisition lock had expired (INVALID_RECORD_STATE),
 * so the broker may already have handed it to another member. The work was done; the record may be
 * delivered again.
 */
export class AcknowledgeError extends KafkaProtocolError {
  override readonly name = "AcknowledgeError";
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offsets: readonly bigint[],
    code: number,
    detail?: string | null,
  ) {
    super("ShareAcknowledge", code, `${topic}-${partition} offsets ${offsets.join(",")}${detail ? `: ${detail}` : ""}`);
  }
}

/** The consumer was closed; pending and later calls reject with this. */
export class ConsumerClosedError extends Error {
  override readonly name = "ConsumerClosedError";
  constructor() {
    super("share consumer is closed");
  }
}

/**
 * A failure retrying cannot mend: the connection's security was refused. The consumer stops on it
 * (emits `fatal`, rejects `fetch()`), so a wrong password fails a start instead of looping.
 */
export abstract class KafkaSecurityError extends Error {
  /** Never worth retrying with the same settings. */
  readonly retriable = false;
  constructor(
    readonly broker: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** SASL authentication refused (wrong password, unknown user, invalid token, mechanism not enabled). */
export class KafkaAuthenticationError extends KafkaSecurityError {
  override readonly name = "KafkaAuthenticationError";
  constructor(broker: string, detail: string, options?: ErrorOptions) {
    super(broker, `SASL authentication with ${broker} failed: ${detail}`, options);
  }
}

/** The broker's TLS certificate was not trusted (unknown CA, wrong host name, expired) or TLS failed. */
export class KafkaTlsError extends KafkaSecurityError {
  override readonly name = "KafkaTlsError";
  constructor(broker: string, detail: string, options?: ErrorOptions) {
    super(broker, `TLS with ${broker} failed: ${detail}`, options);
  }
}
