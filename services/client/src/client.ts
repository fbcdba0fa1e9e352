import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InferenceService, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { embedCorpus, type CorpusOptions, type CorpusResult } from "./corpus.ts";
import { DEFAULT_RETRY_POLICY, withRetries, type RetryInfo, type RetryPolicy } from "./retry.ts";
import { decodeFloat32Le } from "./vectors.ts";

/** Wire protocol to the gateway; all three are served on the gateway's one port. */
export type Protocol = "connect" | "grpc" | "grpc-web";

export interface ShoalClientOptions {
  /** The gateway, e.g. `http://127.0.0.1:8080`. */
  readonly baseUrl: string;
  /** Default `connect` (binary). `grpc` uses HTTP/2 (h2c on `http://`). */
  readonly protocol?: Protocol;
  /** Sent as `authorization: Bearer <apiKey>`. */
  readonly apiKey?: string;
  /** Budget of a call that names none, across all its attempts and waits. Default 30 s. */
  readonly defaultTimeoutMs?: number;
  /** HTTP version for `connect` and `grpc-web` (default 1.1); `grpc` always uses 2. */
  readonly httpVersion?: "1.1" | "2";
  readonly retry?: Partial<RetryPolicy>;
  /** Told about each retry before the client waits (for logs and metrics). */
  readonly onRetry?: (info: RetryInfo) => void;
  /** Use this transport instead (e.g. `@connectrpc/connect-web`'s in a browser); `baseUrl`, `protocol` and `httpVersion` are then unused. */
  readonly transport?: Transport;
}

/** Per-call options. */
export interface CallOptions {
  /** Budget of this call across all attempts and waits; default `defaultTimeoutMs`. */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

export interface EmbedOptions extends CallOptions {
  /** L2-normalise; unset: the model's default. */
  readonly normalize?: boolean;
  /** Cut over-long inputs instead of failing with InvalidArgument. */
  readonly truncate?: boolean;
  readonly lane?: Lane;
}

export interface EmbedResult {
  readonly model: string;
  readonly dimensions: number;
  /** One vector per text, in input order. */
  readonly vectors: Float32Array[];
  /** Tokens per text after truncation. */
  readonly tokens: number[];
  /** Whether each text was truncated. */
  readonly truncated: boolean[];
  readonly usage: { readonly promptTokens: number; readonly totalTokens: number };
  /** Where the gateway says the time went (queue, tokenize, inference, total), in ms. */
  readonly timing: { readonly queueMs: number; readonly tokenizeMs: number; readonly inferenceMs: number; readonly totalMs: number } | undefined;
}

export interface ShoalClient {
  /** Embeds `texts` (one request; see `embedCorpus` for large inputs). */
  embed(model: string, texts: readonly string[], opts?: EmbedOptions): Promise<EmbedResult>;
  /** The models the cluster serves. */
  listModels(opts?: CallOptions): Promise<Model[]>;
  /** Embeds a corpus of any size in batches, `concurrency` at a time, keeping input order. */
  embedCorpus(model: string, texts: readonly string[], opts?: CorpusOptions): Promise<CorpusResult>;
  /** The raw Connect clients, for calls this wrapper does not cover (no retries added). */
  readonly inference: Client<typeof InferenceService>;
  readonly models: Client<typeof ModelService>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

function createTransport(opts: ShoalClientOptions, interceptors: Interceptor[]): Transport {
  const { baseUrl } = opts;
  switch (opts.protocol ?? "connect") {
    case "grpc":
      return createGrpcTransport({ baseUrl, interceptors });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: opts.httpVersion ?? "1.1", useBinaryFormat: true, interceptors });
    case "connect":
      return createConnectTransport({ baseUrl, httpVersion: opts.httpVersion ?? "1.1", useBinaryFormat: true, interceptors });
  }
}

/**
 * A typed client for a Shoal gateway. Calls retry on Unavailable and ResourceExhausted with
 * exponential backoff and jitter, honouring the server's `retry-after-ms` / `retry-after`, within
 * a bounded number of attempts and the call's deadline.
 */
export function createShoalClient(opts: ShoalClientOptions): ShoalClient {
  const interceptors: Interceptor[] = [];
  if (opts.apiKey !== undefined) {
    const bearer = `Bearer ${opts.apiKey}`;
    interceptors.push((next) => (req) => {
      req.header.set("authorization", bearer);
      return next(req);
    });
  }
  const transport = opts.transport ?? createTransport(opts, interceptors);
  const inference = createClient(InferenceService, transport);
  const models = createClient(ModelService, transport);
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.retry };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) throw new RangeError("retry.maxAttempts: expected an integer >= 1");
  const defaultTimeoutMs = opts.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;

  function retrying<T>(call: CallOptions | undefined, attempt: (timeoutMs: number) => Promise<T>): Promise<T> {
    const deadline = Date.now() + (call?.timeoutMs ?? defaultTimeoutMs);
    return withRetries({ policy, deadline, signal: call?.signal, onRetry: opts.onRetry }, attempt);
  }

  const client: ShoalClient = {
    inference,
    models,
    async embed(model, texts, o = {}) {
      const res = await retrying(o, (timeoutMs) =>
        inference.embed(
          {
            model,
            inputs: [...texts],
            options: { normalize: o.normalize, truncate: o.truncate ?? false, encoding: VectorEncoding.FLOAT32_LE },
            lane: o.lane,
          },
          { timeoutMs, signal: o.signal },
        ),
      );
      const vectors = res.embeddings.map((e) => (e.float32Le.byteLength > 0 ? decodeFloat32Le(e.float32Le) : Float32Array.from(e.values)));
      return {
        model: res.model,
        dimensions: vectors[0]?.length ?? 0,
        vectors,
        tokens: res.embeddings.map((e) => e.tokens),
        truncated: res.embeddings.map((e) => e.truncated),
        usage: { promptTokens: res.usage?.promptTokens ?? 0, totalTokens: res.usage?.totalTokens ?? 0 },
        timing: res.timing && { queueMs: res.timing.queueMs, tokenizeMs: res.timing.tokenizeMs, inferenceMs: res.timing.inferenceMs, totalMs: res.timing.totalMs },
      };
    },
    async listModels(o) {
      const res = await retrying(o, (timeoutMs) => models.listModels({}, { timeoutMs, signal: o?.signal }));
      return res.models;
    },
    embedCorpus(model, texts, o) {
      return embedCorpus((batch, batchOpts) => client.embed(model, batch, batchOpts), texts, o);
    },
  };
  return client;
}
