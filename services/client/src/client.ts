import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import type { InputType, Lane, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InferenceService, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { embedCorpus, type CorpusOptions, type CorpusResult } from "./corpus.ts";
import { DEFAULT_RETRY_POLICY, withRetries, type RetryInfo, type RetryPolicy } from "./retry.ts";
import { decodeFloat32Le } from "@shoal/common/vectors";

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
  /** Which end of a long text to cut (NONE, START, END); overrides `truncate` when set. */
  readonly truncation?: Truncation;
  /** Role of the texts: the worker puts the model's prompt for it in front (E5 `query: `, ...). */
  readonly inputType?: InputType;
  /** Keep the first `dimensions` values, renormalised (Matryoshka-trained models only). */
  readonly dimensions?: number;
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
  readonly usage: Usage;
  /** Where the gateway says the time went (queue, tokenize, inference, total), in ms. */
  readonly timing: Timing | undefined;
}

/** Token usage of a call. */
export interface Usage {
  readonly promptTokens: number;
  readonly totalTokens: number;
}

/** Where the gateway says a call's time went, in ms. */
export interface Timing {
  readonly queueMs: number;
  readonly tokenizeMs: number;
  readonly inferenceMs: number;
  readonly totalMs: number;
}

export interface RerankOptions extends CallOptions {
  /** Return only the best `topK` documents; unset or 0: all of them. */
  readonly topK?: number;
  /** Cut over-long (query, document) pairs (the document first) instead of failing with InvalidArgument. */
  readonly truncate?: boolean;
  /** Copy each document's text into its result (`RerankHit.document`). */
  readonly returnDocuments?: boolean;
  readonly lane?: Lane;
}

/** One scored document. */
export interface RerankHit {
  /** Position of the document in the request. */
  readonly index: number;
  /** Relevance (with a sigmoid reranker, 0..1); higher is more relevant. */
  readonly score: number;
  /** The document's text, with `returnDocuments`; else undefined. */
  readonly document: string | undefined;
  /** Tokens of the (query, document) pair after truncation. */
  readonly tokens: number;
  readonly truncated: boolean;
}

export interface RerankResult {
  readonly model: string;
  /** Highest score first; ties keep document order. At most `topK`. */
  readonly results: RerankHit[];
  readonly usage: Usage;
  readonly timing: Timing | undefined;
}

export interface ClassifyOptions extends CallOptions {
  /** Return only each text's best `topK` labels; unset or 0: every label. */
  readonly topK?: number;
  /** Cut over-long inputs instead of failing with InvalidArgument. */
  readonly truncate?: boolean;
  /** Which end of a long text to cut (NONE, START, END); overrides `truncate` when set. */
  readonly truncation?: Truncation;
  /** Role of the texts: the worker puts the model's prompt for it in front (E5 `query: `, ...). */
  readonly inputType?: InputType;
  /** Keep the first `dimensions` values, renormalised (Matryoshka-trained models only). */
  readonly dimensions?: number;
  readonly lane?: Lane;
}

/** The labels of one text. */
export interface Classification {
  /** Position of the text in the request. */
  readonly index: number;
  /** Highest score first (softmax probabilities for single-label models, sigmoids for multi-label ones). */
  readonly labels: { readonly label: string; readonly score: number }[];
  readonly tokens: number;
  readonly truncated: boolean;
}

export interface ClassifyResult {
  readonly model: string;
  /** One per text, in input order. */
  readonly classifications: Classification[];
  readonly usage: Usage;
  readonly timing: Timing | undefined;
}

export interface ShoalClient {
  /** Embeds `texts` (one request; see `embedCorpus` for large inputs). */
  embed(model: string, texts: readonly string[], opts?: EmbedOptions): Promise<EmbedResult>;
  /** Scores `documents` against `query` with a rerank model; best first. */
  rerank(model: string, query: string, documents: readonly string[], opts?: RerankOptions): Promise<RerankResult>;
  /** Label scores for each of `texts` with a classification model. */
  classify(model: string, texts: readonly string[], opts?: ClassifyOptions): Promise<ClassifyResult>;
  /** The models the cluster serves. */
  listModels(opts?: CallOptions): Promise<Model[]>;
  /** Embeds a corpus of any size in batches, `concurrency` at a time, keeping input order. */
  embedCorpus(model: string, texts: readonly string[], opts?: CorpusOptions): Promise<CorpusResult>;
  /** The raw Connect clients, for calls this wrapper does not cover (no retries added). */
  readonly inference: Client<typeof InferenceService>;
  readonly models: Client<typeof ModelService>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

function usageOf(res: { usage?: { promptTokens: number; totalTokens: number } | undefined }): Usage {
  return { promptTokens: res.usage?.promptTokens ?? 0, totalTokens: res.usage?.totalTokens ?? 0 };
}

function timingOf(res: { timing?: Timing | undefined }): Timing | undefined {
  const t = res.timing;
  return t && { queueMs: t.queueMs, tokenizeMs: t.tokenizeMs, inferenceMs: t.inferenceMs, totalMs: t.totalMs };
}

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
            options: {
              normalize: o.normalize,
              truncate: o.truncate ?? false,
              truncation: o.truncation,
              inputType: o.inputType,
              dimensions: o.dimensions,
              encoding: VectorEncoding.FLOAT32_LE,
            },
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
        usage: usageOf(res),
        timing: timingOf(res),
      };
    },
    async rerank(model, query, documents, o = {}) {
      const returnDocuments = o.returnDocuments ?? false;
      const res = await retrying(o, (timeoutMs) =>
        inference.rerank(
          { model, query, documents: [...documents], topK: o.topK, truncate: o.truncate ?? false, returnDocuments, lane: o.lane },
          { timeoutMs, signal: o.signal },
        ),
      );
      return {
        model: res.model,
        results: res.results.map((r) => ({
          index: r.index,
          score: r.score,
          document: returnDocuments ? r.document : undefined,
          tokens: r.tokens,
          truncated: r.truncated,
        })),
        usage: usageOf(res),
        timing: timingOf(res),
      };
    },
    async classify(model, texts, o = {}) {
      const res = await retrying(o, (timeoutMs) =>
        inference.classify({ model, inputs: [...texts], topK: o.topK, truncate: o.truncate ?? false, lane: o.lane }, { timeoutMs, signal: o.signal }),
      );
      return {
        model: res.model,
        classifications: res.classifications.map((c) => ({
          index: c.index,
          labels: c.labels.map((l) => ({ label: l.label, score: l.score })),
          tokens: c.tokens,
          truncated: c.truncated,
        })),
        usage: usageOf(res),
        timing: timingOf(res),
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
