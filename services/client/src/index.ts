export {
  createShoalClient,
  type CallOptions,
  type Classification,
  type ClassifyOptions,
  type ClassifyResult,
  type EmbedOptions,
  type EmbedResult,
  type Protocol,
  type RerankHit,
  type RerankOptions,
  type RerankResult,
  type ShoalClient,
  type ShoalClientOptions,
  type Timing,
  type Usage,
} from "./client.ts";
export { embedCorpus, type CorpusOptions, type CorpusProgress, type CorpusResult } from "./corpus.ts";
export { DEFAULT_RETRY_POLICY, isRetriable, retryAfterMs, type RetryInfo, type RetryPolicy } from "./retry.ts";
export { decodeFloat32Le } from "@shoal/common/vectors";
export { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
export type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
