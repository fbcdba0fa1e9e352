import { SpanKind, type Attributes, type Context, type Span } from "@opentelemetry/api";
import { Attr } from "./attributes.ts";
import { shoalTracer } from "./tracing.ts";

/** A consumed Kafka record, as a process span names it. */
export interface ConsumedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

/**
 * Starts the PRODUCER span of one record sent to `topic` (`send <topic>`, with the messaging
 * semantic-convention attributes) under `parent` (the active context when omitted).
 */
export function startSendSpan(topic: string, attributes: Attributes = {}, parent?: Context): Span {
  return shoalTracer().startSpan(
    `send ${topic}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        [Attr.MESSAGING_SYSTEM]: "kafka",
        [Attr.MESSAGING_DESTINATION]: topic,
        [Attr.MESSAGING_OPERATION_TYPE]: "send",
        [Attr.MESSAGING_OPERATION_NAME]: "send",
        ...attributes,
      },
    },
    parent,
  );
}

/**
 * Starts the CONSUMER span of processing one record (`process <topic>`, with the messaging
 * semantic-convention attributes) under `parent`, usually the context its headers carry.
 */
export function startProcessSpan(record: ConsumedRecord, attributes: Attributes, parent: Context): Span {
  return shoalTracer().startSpan(
    `process ${record.topic}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        [Attr.MESSAGING_SYSTEM]: "kafka",
        [Attr.MESSAGING_DESTINATION]: record.topic,
        [Attr.MESSAGING_OPERATION_TYPE]: "process",
        [Attr.MESSAGING_OPERATION_NAME]: "process",
        [Attr.MESSAGING_PARTITION]: String(record.partition),
        [Attr.MESSAGING_KAFKA_OFFSET]: Number(record.offset),
        ...attributes,
      },
    },
    parent,
  );
}
