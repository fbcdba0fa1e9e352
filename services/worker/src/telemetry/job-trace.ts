import { context, SpanStatusCode, trace, type Context, type Link, type Span, type SpanContext } from "@opentelemetry/api";
import { Attr, contextFromHeaders, shoalTracer, SpanName, startProcessSpan, startSendSpan, traceHeaders } from "@shoal/common";
import type { IHeaders } from "kafkajs";

/** Where a job record came from. */
export interface RecordOrigin {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly headers: IHeaders | undefined;
}

/**
 * The spans of one job on a worker, all in the request's trace: the job span (parented on the
 * gateway's publish span through the record's `traceparent`), and under it queue wait,
 * tokenization, inference (linked to the shared batch span) and the reply's publish.
 * Times are `performance.now()` values.
 */
export class JobTrace {
  readonly span: Span;
  readonly ctx: Context;
  private queueSpan: Span | undefined;
  private startListener: (() => void) | undefined;

  constructor(origin: RecordOrigin, jobId: string, model: string, groupId: string, workerId: string) {
    const parent = contextFromHeaders(origin.headers);
    this.span = startProcessSpan(
      origin,
      {
        [Attr.MESSAGING_CONSUMER_GROUP]: groupId,
        [Attr.MESSAGING_MESSAGE_ID]: jobId,
        [Attr.JOB_ID]: jobId,
        [Attr.MODEL]: model,
        [Attr.WORKER_ID]: workerId,
      },
      parent,
    );
    this.ctx = trace.setSpan(parent, this.span);
  }

  get spanContext(): SpanContext {
    return this.span.spanContext();
  }

  tokenized(startMs: number, endMs: number, tokens: number): void {
    shoalTracer()
      .startSpan(SpanName.TOKENIZE, { startTime: startMs, attributes: { [Attr.TOKENS]: tokens } }, this.ctx)
      .end(endMs);
    this.queueSpan = shoalTracer().startSpan(SpanName.QUEUE_WAIT, { startTime: endMs }, this.ctx);
  }

  /** The job's first batch started: its queue wait is over. */
  batchStarted(atMs: number): void {
    this.queueSpan?.end(atMs);
    this.queueSpan = undefined;
    const listener = this.startListener;
    this.startListener = undefined;
    listener?.();
  }

  /** Calls `listener` once, when the job's first batch starts (the job stops waiting). */
  onStarted(listener: () => void): void {
    this.startListener = listener;
  }

  /** One run of the shared batch that computed some of this job's texts. */
  inference(batch: SpanContext, startMs: number, endMs: number, attributes: Record<string, number | string>): void {
    shoalTracer()
      .startSpan(SpanName.INFERENCE, { startTime: startMs, links: [{ context: batch }], attributes }, this.ctx)
      .end(endMs);
  }

  /** Starts the reply's publish span; returns it with the record headers that carry it. */
  replyPublish(topic: string): { span: Span; headers: Record<string, string> } {
    const span = startSendSpan(topic, {}, this.ctx);
    return { span, headers: traceHeaders(trace.setSpan(this.ctx, span)) };
  }

  end(status: string, failed: boolean): void {
    this.queueSpan?.end();
    this.span.setAttribute(Attr.JOB_STATUS, status);
    if (failed) this.span.setStatus({ code: SpanStatusCode.ERROR, message: status });
    this.span.end();
  }
}

/**
 * The span of one batch, shared by its jobs: parented on the first job (so a lone request's trace
 * holds it) and linked to every other job span (a link to the parent itself would be redundant,
 * and Jaeger folds the two into one reference); each job's inference span links back to it.
 */
export function startBatchSpan(jobs: readonly JobTrace[], startMs: number, attributes: Record<string, number | string>): Span {
  const links: Link[] = jobs.slice(1).map((j) => ({ context: j.spanContext }));
  return shoalTracer().startSpan(SpanName.BATCH, { startTime: startMs, links, attributes }, jobs[0]?.ctx ?? context.active());
}
