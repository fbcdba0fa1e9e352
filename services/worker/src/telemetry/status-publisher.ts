import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { Kafka, Producer } from "kafkajs";
import { encodeStatus, SIGNATURE_HEADER, STATUS_TOPIC, statusSignedBytes, type Logger, type RecordSigner } from "@shoal/common";
import { WorkerStatusSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";

export type WorkerStatusInit = Omit<MessageInitShape<typeof WorkerStatusSchema>, "$typeName" | "updatedUnixMs" | "intervalMs">;

export interface StatusPublisherOptions {
  readonly workerId: string;
  readonly intervalMs: number;
  /** The worker's status right now. */
  readonly snapshot: () => WorkerStatusInit;
  /** With cluster keys: every status and tombstone is signed over the worker id and value. */
  readonly signer?: RecordSigner;
}

/** Publishes the worker's status to the compacted status topic: periodically and soon after changes. */
export interface StatusPublisher {
  start(): Promise<void>;
  /** Something changed (a model loaded or left): publish within ~100 ms. */
  changed(): void;
  /** Publishes a tombstone (the worker is gone) and disconnects. */
  stop(): Promise<void>;
}

/** How long a status write may take before it is skipped (the next interval retries). */
const SEND_TIMEOUT_MS = 2_000;

export function createStatusPublisher(kafka: Kafka, logger: Logger, opts: StatusPublisherOptions): StatusPublisher {
  const log = logger.child({ component: "status-publisher" });
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 1, initialRetryTime: 200 } });
  let timer: NodeJS.Timeout | undefined;
  let soon: NodeJS.Timeout | undefined;
  let sending: Promise<void> = Promise.resolve();
  let running = false;

  function send(value: Buffer | null): Promise<void> {
    const sig = opts.signer?.sign("status", statusSignedBytes(opts.workerId, value));
    const message = { key: opts.workerId, value, ...(sig === undefined ? {} : { headers: { [SIGNATURE_HEADER]: sig } }) };
    const write = producer.send({ topic: STATUS_TOPIC, acks: 1, timeout: SEND_TIMEOUT_MS, messages: [message] }).then(
      () => undefined,
      (err: unknown) => log.debug({ err }, "status not published (broker unreachable?); the next interval retries"),
    );
    sending = sending.then(() => write);
    return sending;
  }

  function publish(): void {
    if (!running) return;
    const status = create(WorkerStatusSchema, { ...opts.snapshot(), updatedUnixMs: BigInt(Date.now()), intervalMs: opts.intervalMs });
    void send(Buffer.from(encodeStatus(status)));
  }

  return {
    async start() {
      await producer.connect();
      running = true;
      publish();
      timer = setInterval(publish, opts.intervalMs);
      timer.unref();
    },
    changed() {
      if (!running || soon !== undefined) return;
      soon = setTimeout(() => {
        soon = undefined;
        publish();
      }, 100);
    },
    async stop() {
      if (!running) return;
      running = false;
      clearInterval(timer);
      clearTimeout(soon);
      await send(null);
      await producer.disconnect().catch(() => undefined);
    },
  };
}
