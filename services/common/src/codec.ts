import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { JobCancelSchema, JobEnvelopeSchema, JobResultSchema, type JobCancel, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { GatewayRegistrationSchema, WorkerStatusSchema, type GatewayRegistration, type WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { replyTopic } from "./topics.ts";

/** A Kafka record that is not a valid protobuf message of the expected type. */
export class RecordDecodeError extends Error {
  override readonly name = "RecordDecodeError";
  constructor(
    readonly what: "JobEnvelope" | "JobResult" | "JobCancel" | "WorkerStatus" | "GatewayRegistration",
    reason: string,
  ) {
    super(`undecodable ${what}: ${reason}`);
  }
}

// `shoal.replies.<instance>` (topics.ts) within Kafka's legal topic names (at most 249 of [A-Za-z0-9._-]).
const REPLY_TOPIC = new RegExp(`^${replyTopic("").replaceAll(".", "\\.")}[A-Za-z0-9._-]{1,${249 - replyTopic("").length}}$`);

export function encodeEnvelope(envelope: JobEnvelope): Uint8Array {
  return toBinary(JobEnvelopeSchema, envelope);
}

/** Decodes and sanity-checks an envelope; throws RecordDecodeError for anything unusable. */
export function decodeEnvelope(bytes: Uint8Array | null): JobEnvelope {
  if (!bytes || bytes.length === 0) throw new RecordDecodeError("JobEnvelope", "empty record");
  let envelope: JobEnvelope;
  try {
    envelope = fromBinary(JobEnvelopeSchema, bytes);
  } catch (err) {
    throw new RecordDecodeError("JobEnvelope", (err as Error).message);
  }
  if (envelope.jobId === "") throw new RecordDecodeError("JobEnvelope", "missing job_id");
  if (!envelope.replyTo?.topic) throw new RecordDecodeError("JobEnvelope", "missing reply_to");
  // Results go to a gateway's reply topic and nowhere else: a corrupted or forged record must not
  // make a worker write into another topic (a jobs topic, say), nor stall its producer on an
  // illegal topic name.
  if (!REPLY_TOPIC.test(envelope.replyTo.topic) || envelope.replyTo.partition < 0) {
    throw new RecordDecodeError("JobEnvelope", "reply_to is not a reply topic partition");
  }
  return envelope;
}

export function encodeResult(result: JobResult): Uint8Array {
  return toBinary(JobResultSchema, result);
}

export function decodeResult(bytes: Uint8Array | null): JobResult {
  if (!bytes || bytes.length === 0) throw new RecordDecodeError("JobResult", "empty record");
  let result: JobResult;
  try {
    result = fromBinary(JobResultSchema, bytes);
  } catch (err) {
    throw new RecordDecodeError("JobResult", (err as Error).message);
  }
  if (result.jobId === "") throw new RecordDecodeError("JobResult", "missing job_id");
  return result;
}

export function encodeCancel(cancel: JobCancel): Uint8Array {
  return toBinary(JobCancelSchema, cancel);
}

export function decodeCancel(bytes: Uint8Array | null): JobCancel {
  if (!bytes || bytes.length === 0) throw new RecordDecodeError("JobCancel", "empty record");
  let cancel: JobCancel;
  try {
    cancel = fromBinary(JobCancelSchema, bytes);
  } catch (err) {
    throw new RecordDecodeError("JobCancel", (err as Error).message);
  }
  if (cancel.jobId === "") throw new RecordDecodeError("JobCancel", "missing job_id");
  return cancel;
}

export function encodeStatus(status: WorkerStatus): Uint8Array {
  return toBinary(WorkerStatusSchema, status);
}

export function decodeStatus(bytes: Uint8Array): WorkerStatus {
  let status: WorkerStatus;
  try {
    status = fromBinary(WorkerStatusSchema, bytes);
  } catch (err) {
    throw new RecordDecodeError("WorkerStatus", (err as Error).message);
  }
  if (status.workerId === "") throw new RecordDecodeError("WorkerStatus", "missing worker_id");
  return status;
}

export function encodeGatewayRegistration(registration: GatewayRegistration): Uint8Array {
  return toBinary(GatewayRegistrationSchema, registration);
}

/** A gateway's registration; its reply topic must be a legal `shoal.replies.*` name. */
export function decodeGatewayRegistration(bytes: Uint8Array): GatewayRegistration {
  let registration: GatewayRegistration;
  try {
    registration = fromBinary(GatewayRegistrationSchema, bytes);
  } catch (err) {
    throw new RecordDecodeError("GatewayRegistration", (err as Error).message);
  }
  if (registration.instanceId === "") throw new RecordDecodeError("GatewayRegistration", "missing instance_id");
  if (!REPLY_TOPIC.test(registration.replyTopic)) throw new RecordDecodeError("GatewayRegistration", "reply_topic is not a shoal.replies.* topic");
  return registration;
}
