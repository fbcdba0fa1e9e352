import { create } from "@bufbuild/protobuf";
import type { Kafka } from "kafkajs";
import { encodeGatewayRegistration, GATEWAYS_TOPIC, SIGNATURE_HEADER, statusSignedBytes, type Logger, type RecordSigner } from "@shoal/common";
import { GatewayRegistrationSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";

export interface ReplyRegistrationOptions {
  readonly instanceId: string;
  readonly replyTopic: string;
  readonly intervalMs: number;
  /** With cluster keys: each registration and the tombstone are signed over the instance id and value. */
  readonly signer?: RecordSigner;
}

/**
 * Registers this gateway's reply topic on `shoal.gateways` (issue #19): at start (awaited, before
 * the gateway serves), every interval, and a tombstone on stop. Workers that enforce the registry
 * (SHOAL_REPLY_REGISTRY=1) produce results only to reply topics registered there.
 */
export interface ReplyRegistration {
  start(): Promise<void>;
  stop(): Promise<void>;
}

const SEND_TIMEOUT_MS = 2_000;

export function createReplyRegistration(kafka: Kafka, logger: Logger, opts: ReplyRegistrationOptions): ReplyRegistration {
  const log = logger.child({ component: "reply-registration" });
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 1, initialRetryTime: 200 } });
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  function send(value: Buffer | null): Promise<void> {
    const sig = opts.signer?.sign("gateway", statusSignedBytes(opts.instanceId, value));
    const message = { key: opts.instanceId, value, ...(sig === undefined ? {} : { headers: { [SIGNATURE_HEADER]: sig } }) };
    return producer.send({ topic: GATEWAYS_TOPIC, acks: -1, timeout: SEND_TIMEOUT_MS, messages: [message] }).then(() => undefined);
  }

  function registration(): Buffer {
    const r = create(GatewayRegistrationSchema, {
      instanceId: opts.instanceId,
      replyTopic: opts.replyTopic,
      updatedUnixMs: BigInt(Date.now()),
      intervalMs: opts.intervalMs,
    });
    return Buffer.from(encodeGatewayRegistration(r));
  }

  return {
    async start() {
      await producer.connect();
      // Awaited: a worker must be able to see the registration before the first job names the topic.
      await send(registration());
      running = true;
      timer = setInterval(() => {
        if (!running) return;
        send(registration()).catch((err: unknown) =>
          log.warn({ err }, "reply topic registration not refreshed (broker unreachable?); the next interval retries"),
        );
      }, opts.intervalMs);
      timer.unref();
    },
    async stop() {
      if (!running) return;
      running = false;
      clearInterval(timer);
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
