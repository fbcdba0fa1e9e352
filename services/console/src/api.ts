import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ClusterService, type GetClusterResponse } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { InferenceService, type ClassifyResponse, type EmbedResponse, type RerankResponse } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelAdminService, type AddModelRequest } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { bearerAuth } from "./api-key.ts";

/** Where the gateway put the time of one call (its `shoal-*` response headers), in ms. */
export interface ServerTiming {
  readonly queueMs?: number;
  readonly tokenizeMs?: number;
  readonly inferenceMs?: number;
  readonly totalMs?: number;
  readonly worker?: string;
}

/** A call's answer with what the page measured around it. */
export interface Timed<T> {
  readonly value: T;
  /** Round trip as the page saw it (fetch start to decoded answer). */
  readonly roundTripMs: number;
  readonly server: ServerTiming;
}

function num(h: Headers, name: string): number | undefined {
  const v = h.get(name);
  return v === null || v === "" || !Number.isFinite(Number(v)) ? undefined : Number(v);
}

function serverTiming(h: Headers): ServerTiming {
  return {
    queueMs: num(h, "shoal-queue-ms"),
    tokenizeMs: num(h, "shoal-tokenize-ms"),
    inferenceMs: num(h, "shoal-inference-ms"),
    totalMs: num(h, "shoal-total-ms"),
    worker: h.get("shoal-worker") ?? undefined,
  };
}

/** The console's view of one gateway, over Connect-Web (JSON, readable in devtools). */
export class ShoalApi {
  private readonly models: Client<typeof ModelService>;
  private readonly inference: Client<typeof InferenceService>;
  private readonly cluster: Client<typeof ClusterService>;
  private readonly admin: Client<typeof ModelAdminService>;

  /**
   * @param options.apiKey read on every call: its `Authorization: Bearer` header (none while undefined)
   * @param options.fetch the fetch to call the gateway with (tests); the page's own by default
   */
  constructor(
    readonly baseUrl: string,
    options: { readonly apiKey?: () => string | undefined; readonly fetch?: typeof globalThis.fetch } = {},
  ) {
    const transport = createConnectTransport({
      baseUrl,
      interceptors: [bearerAuth(options.apiKey ?? (() => undefined))],
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.models = createClient(ModelService, transport);
    this.inference = createClient(InferenceService, transport);
    this.cluster = createClient(ClusterService, transport);
    this.admin = createClient(ModelAdminService, transport);
  }

  private async timed<T>(call: (onHeader: (h: Headers) => void) => Promise<T>): Promise<Timed<T>> {
    let header = new Headers();
    const started = performance.now();
    const value = await call((h) => (header = h));
    return { value, roundTripMs: performance.now() - started, server: serverTiming(header) };
  }

  listModels(timeoutMs = 4_000): Promise<Timed<Model[]>> {
    return this.timed(async (onHeader) => (await this.models.listModels({}, { timeoutMs, onHeader })).models);
  }

  embed(model: string, inputs: string[], normalize: boolean, timeoutMs = 30_000): Promise<Timed<EmbedResponse>> {
    return this.timed((onHeader) => this.inference.embed({ model, inputs, options: { normalize } }, { timeoutMs, onHeader }));
  }

  /** Scores every document against the query (all of them, texts copied back), best first. */
  rerank(model: string, query: string, documents: string[], timeoutMs = 30_000): Promise<Timed<RerankResponse>> {
    return this.timed((onHeader) => this.inference.rerank({ model, query, documents, returnDocuments: true, truncate: true }, { timeoutMs, onHeader }));
  }

  /** Every label's score for each text. */
  classify(model: string, inputs: string[], timeoutMs = 30_000): Promise<Timed<ClassifyResponse>> {
    return this.timed((onHeader) => this.inference.classify({ model, inputs, truncate: true }, { timeoutMs, onHeader }));
  }

  /**
   * ModelAdminService.AddModel: serves `source` (a folder or an `hf:` id) under `id`. Slow while
   * the gateway downloads from the Hub, hence the long default timeout. Answers the model as listed.
   */
  addModel(req: Pick<AddModelRequest, "source" | "id" | "pool" | "pinned">, timeoutMs = 600_000): Promise<Timed<Model | undefined>> {
    return this.timed(async (onHeader) => (await this.admin.addModel(req, { timeoutMs, onHeader })).model);
  }

  /** ModelAdminService.RemoveModel: calls already accepted finish, new ones get NotFound. */
  async removeModel(id: string, timeoutMs = 30_000): Promise<void> {
    await this.admin.removeModel({ id }, { timeoutMs });
  }

  /** Workers, their resident models and lane lag, as the gateway sees them. */
  getCluster(timeoutMs = 1_500): Promise<Timed<GetClusterResponse>> {
    return this.timed((onHeader) => this.cluster.getCluster({}, { timeoutMs, onHeader }));
  }
}

/** The gateway this page talks to: `?gateway=<url>`, else the page's own origin. */
export function gatewayUrl(location: Location): string {
  const override = new URLSearchParams(location.search).get("gateway");
  return (override ?? location.origin).replace(/\/+$/, "");
}
