export {
  createShoalClient,
  type CallOptions,
  type EmbedOptions,
  type EmbedResult,
  type Protocol,
  type ShoalClient,
  type ShoalClientOptions,
} from "./client.ts";
export { embedCorpus, type CorpusOptions, type CorpusProgress, type CorpusResult } from "./corpus.ts";
export { DEFAULT_RETRY_POLICY, isRetriable, retryAfterMs, type RetryInfo, type RetryPolicy } from "./retry.ts";
export { decodeFloat32Le } from "./vectors.ts";
export { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
export type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
