import { create } from "@bufbuild/protobuf";
import type { Kafka } from "kafkajs";
import {
  createBatchingProducer,
  encodeGatewayRegistration,
  GATEWAYS_TOPIC,
  SIGNATURE_HEADER,
  statusSignedBytes,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
import { GatewayRegistrationSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";

export interface ReplyRegistrationOptions {
  readonly instanceId: string;
  readonly replyTopic: string;
  readonly intervalMs: number;
  /** With cluster keys: each registration and the tombstone are signed over the instance id and value. */
  readonly signer?: RecordSigner;
  /** host:port of this gateway's direct-reply listener, once it listens (none: the reply topic only). */
  readonly directReplyAddress?: () => string | undefined;
}

/**
 * Registers this gateway's reply topic on `shoal.gateways` (issue #19): at start (awaited, before
 * the gateway serves), every interval, and a tombstone on stop. Workers that enforce the registry
 * (by default; SHOAL_REPLY_REGISTRY=0 opts out) produce results only to reply topics registered there.
 */
export interface ReplyRegistration {
  start(): Promise<void>;
  stop(): Promise<void>;
}

const SEND_TIMEOUT_MS = 2_000;
/** How soon a failed refresh is tried again. */
const RETRY_MS = 1_000;

export function createReplyRegistration(kafka: Kafka, logger: Logger, opts: ReplyRegistrationOptions): ReplyRegistration {
  const log = logger.child({ component: "reply-registration" });
  // A partition leader gone silent (its host cut off) would hold each refresh until kafkajs's
  // request timeout, with the same stale leader on every retry: past SEND_TIMEOUT_MS a new producer,
  // with fresh metadata, takes over (three missed intervals, and workers stop answering this gateway).
  const producer = createBatchingProducer(kafka, logger, {
    name: "reply-registration-producer",
    retry: { retries: 1, initialRetryTime: 200 },
    stuckAfterMs: SEND_TIMEOUT_MS,
  });
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  function send(value: Buffer | null): Promise<void> {
    const sig = opts.signer?.sign("gateway", statusSignedBytes(opts.instanceId, value));
    const message = { key: opts.instanceId, value, ...(sig === undefined ? {} : { headers: { [SIGNATURE_HEADER]: sig } }) };
    return producer.send(GATEWAYS_TOPIC, message).then(() => undefined);
  }

  function registration(): Buffer {
    const r = create(GatewayRegistrationSchema, {
      instanceId: opts.instanceId,
      replyTopic: opts.replyTopic,
      updatedUnixMs: BigInt(Date.now()),
      intervalMs: opts.intervalMs,
      directReplyAddress: opts.directReplyAddress?.() ?? "",
    });
    return Buffer.from(encodeGatewayRegistration(r));
  }

  return {
    async start() {
      await producer.connect();
      // Awaited: a worker must be able to see the registration before the first job names the topic.
      await send(registration());
      running = true;
      // Every interval; after a failed refresh, again within a second (not a whole interval later:
      // three missed intervals and workers that can prove it stop answering this gateway).
      const refresh = (): void => {
        if (!running) return;
        send(registration()).then(
          () => schedule(opts.intervalMs),
          (err: unknown) => {
            log.warn({ err }, "reply topic registration not refreshed (broker unreachable?); retrying");
            schedule(Math.min(RETRY_MS, opts.intervalMs));
          },
        );
      };
      const schedule = (ms: number): void => {
        if (!running) return;
        timer = setTimeout(refresh, ms);
        timer.unref();
      };
      schedule(opts.intervalMs);
    },
    async stop() {
      if (!running) return;
      running = false;
      clearTimeout(timer);
      // Bounded: with the broker gone a stop must not wait on it (the registration lapses by itself).
      let giveUp: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((r) => {
        giveUp = setTimeout(r, SEND_TIMEOUT_MS + 1_000);
      });
      await Promise.race([send(null).catch((err: unknown) => log.warn({ err }, "reply topic registration not withdrawn; it lapses by itself")), gaveUp]);
      clearTimeout(giveUp);
      await producer.disconnect().catch(() => undefined);
    },
  };
}
