import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, type ConnectError, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import type { CatalogModel, Logger } from "@shoal/common";
import { type EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { EmbedRequestSchema, InferenceService, RerankRequestSchema, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { INPUT_TYPE_NAMES } from "./embed-options.ts";
import { hintHeaders, invokeRoute, readJsonRequest, RouteRequestError, sendJson } from "./http-call.ts";
import type { Req, Res } from "./http-types.ts";
import {
  checkTokenCap,
  defaultModel,
  EMBEDDING_TYPE_NAMES,
  objectBody,
  optionalBool,
  optionalInt,
  optionalString,
  requiredString,
  stringList,
  vectorOf,
} from "./route-fields.ts";

/**
 * Cohere-compatible routes (`/v1/embed`, `/v2/embed`, `/v1/rerank`, `/v2/rerank`): Cohere's
 * request and response bodies over the InferenceService's Embed and Rerank, through the Connect
 * routes' interceptors (API key from `Authorization: Bearer`, spans, metrics, admission).
 */
export const COHERE_PATHS: ReadonlySet<string> = new Set(["/v1/embed", "/v2/embed", "/v1/rerank", "/v2/rerank"]);

type Version = 1 | 2;

export interface CohereDeps {
  readonly embed: ServiceImpl<typeof InferenceService>["embed"];
  readonly rerank: ServiceImpl<typeof InferenceService>["rerank"];
  readonly interceptors: readonly Interceptor[];
  readonly models: ReadonlyMap<string, CatalogModel>;
  readonly maxRequestBytes: number;
  readonly logger: Logger;
}

const TRUNCATIONS: ReadonlyMap<string, Truncation> = new Map([
  ["NONE", Truncation.NONE],
  ["START", Truncation.START],
  ["END", Truncation.END],
]);

/** A Cohere embed request, in Shoal's terms. */
export interface CohereEmbed {
  /** Empty in v1 without `model`: the catalog's default embedding model. */
  readonly model: string;
  readonly texts: string[];
  readonly inputType: InputType;
  readonly types: readonly EmbeddingType[];
  /** v1 without `embedding_types`: `embeddings` is a plain float list (`embeddings_floats`). */
  readonly floatsOnly: boolean;
  readonly truncation: Truncation;
  readonly dimensions: number | undefined;
  readonly maxTokens: number | undefined;
}

/**
 * Reads a Cohere embed body. `input_type` is optional in both versions (Cohere's v2 requires it
 * for v3+ models; Shoal embeds the texts without a prompt when it is absent); `truncate` defaults
 * to END as Cohere's does; `images` and multimodal `inputs` are refused.
 */
export function parseCohereEmbed(body: unknown, version: Version): CohereEmbed {
  const b = objectBody(body);
  const model = version === 2 ? requiredString(b, "model") : (optionalString(b, "model") ?? "");
  for (const field of ["images", "inputs"]) {
    if (b[field] !== undefined && b[field] !== null) throw new RouteRequestError(`${field}: only text embeddings are served; send texts`, "invalid", field);
  }
  const texts = stringList(b, "texts");
  const typeName = optionalString(b, "input_type");
  const inputType = typeName === undefined ? InputType.UNSPECIFIED : INPUT_TYPE_NAMES.get(typeName);
  if (inputType === undefined) {
    throw new RouteRequestError(`input_type: expected one of ${[...INPUT_TYPE_NAMES.keys()].join(", ")}`, "invalid", "input_type");
  }
  const rawTypes = b["embedding_types"] ?? undefined;
  const names = rawTypes === undefined || rawTypes === null ? ["float"] : stringList(b, "embedding_types");
  if (names.length === 0) throw new RouteRequestError("embedding_types: at least one type is required", "invalid", "embedding_types");
  const types = names.map((n, i) => {
    const t = EMBEDDING_TYPE_NAMES.get(n);
    if (t === undefined)
      throw new RouteRequestError(`embedding_types[${i}]: expected one of ${[...EMBEDDING_TYPE_NAMES.keys()].join(", ")}`, "invalid", "embedding_types");
    return t;
  });
  const truncName = optionalString(b, "truncate") ?? "END";
  const truncation = TRUNCATIONS.get(truncName.toUpperCase());
  if (truncation === undefined) throw new RouteRequestError("truncate: expected NONE, START or END", "invalid", "truncate");
  const dimensions = version === 2 ? optionalInt(b, "output_dimension") : undefined;
  const maxTokens = version === 2 ? optionalInt(b, "max_tokens") : undefined;
  return { model, texts, inputType, types, floatsOnly: version === 1 && (rawTypes === undefined || rawTypes === null), truncation, dimensions, maxTokens };
}

/** A Cohere rerank request, in Shoal's terms. */
export interface CohereRerank {
  readonly model: string;
  readonly query: string;
  readonly documents: string[];
  /** What v1's `return_documents` gives back per document: the object sent, or `{ text }`. */
  readonly returned: unknown[] | undefined;
  readonly topN: number | undefined;
  readonly maxTokensPerDoc: number | undefined;
}

/** Reads a Cohere rerank body: v1 takes strings or `{ text }` objects and `return_documents`; v2 strings and `max_tokens_per_doc`. */
export function parseCohereRerank(body: unknown, version: Version): CohereRerank {
  const b = objectBody(body);
  const model = version === 2 ? requiredString(b, "model") : (optionalString(b, "model") ?? "");
  const query = requiredString(b, "query");
  const raw = b["documents"];
  if (!Array.isArray(raw)) throw new RouteRequestError("documents: expected a list", "invalid", "documents");
  const documents = raw.map((d: unknown, i) => {
    if (typeof d === "string") return d;
    const text = version === 1 && typeof d === "object" && d !== null && !Array.isArray(d) ? (d as Record<string, unknown>)["text"] : undefined;
    if (typeof text === "string") return text;
    throw new RouteRequestError(
      `documents[${i}]: expected ${version === 1 ? 'a string or an object with a "text" string' : "a string"}`,
      "invalid",
      "documents",
    );
  });
  if (version === 1 && b["rank_fields"] !== undefined) {
    const fields = stringList(b, "rank_fields");
    if (fields.length !== 1 || fields[0] !== "text") throw new RouteRequestError('rank_fields: only ["text"] is supported', "invalid", "rank_fields");
  }
  const returnDocuments = version === 1 ? (optionalBool(b, "return_documents") ?? false) : false;
  return {
    model,
    query,
    documents,
    returned: returnDocuments ? raw.map((d: unknown) => (typeof d === "string" ? { text: d } : d)) : undefined,
    topN: optionalInt(b, "top_n"),
    maxTokensPerDoc: version === 2 ? optionalInt(b, "max_tokens_per_doc") : undefined,
  };
}

const refusalStatus = { method: 405, media_type: 415, too_large: 413, malformed: 400, invalid: 422 } as const;

const codeStatus: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 400,
  [Code.FailedPrecondition]: 400,
  [Code.OutOfRange]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.ResourceExhausted]: 429,
  [Code.Canceled]: 499,
  [Code.Unimplemented]: 501,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
};

/**
 * Cohere's HTTP status for a refused call: a body of the wrong shape 422, bad JSON 400, Shoal's
 * own validation (text too long under NONE, too many texts, wrong model task) 400, unknown model
 * 404, key 401/403, admission 429, queue down 503.
 */
export function cohereStatus(err: ConnectError): number {
  if (RouteRequestError.is(err)) return refusalStatus[err.kind];
  return codeStatus[err.code] ?? 500;
}

/** Shoal's validation names EmbedRequest's fields; say Cohere's names instead. */
export function cohereMessage(message: string): string {
  return message
    .replace(/^inputs\b/, "texts")
    .replace(/^options\.dimensions\b/, "output_dimension")
    .replace(/^options\.truncation\b/, "truncate");
}

/** A pick of a default model when a v1 request names none (Cohere v1 made `model` optional). */
function modelFor(id: string, deps: CohereDeps, task: "embed" | "rerank"): string {
  if (id !== "") return id;
  return defaultModel(deps.models, task)?.id ?? "";
}

function meta(version: Version, billed: Record<string, number>): unknown {
  return { api_version: { version: String(version) }, billed_units: billed };
}

const TYPE_KEYS: ReadonlyMap<EmbeddingType, string> = new Map([...EMBEDDING_TYPE_NAMES].map(([k, v]) => [v, k]));

/** The handler of the four Cohere paths (the front routes only those here). */
export function createCohereRoutes(deps: CohereDeps): (req: Req, res: Res) => void {
  const log = deps.logger.child({ component: "cohere" });

  async function embed(req: Req, res: Res, version: Version): Promise<void> {
    let parsed: CohereEmbed | undefined;
    const { out, headers } = await invokeRoute(req, res, {
      method: InferenceService.method.embed,
      protocol: "cohere",
      route: `/v${version}/embed`,
      metricsMethod: `Cohere.EmbedV${version}`,
      statusOf: cohereStatus,
      interceptors: deps.interceptors,
      async impl(message, ctx) {
        const p = parseCohereEmbed(await readJsonRequest(req, deps.maxRequestBytes), version);
        parsed = p;
        const model = modelFor(p.model, deps, "embed");
        checkTokenCap(p.maxTokens, "max_tokens", deps.models.get(model));
        Object.assign(
          message,
          create(EmbedRequestSchema, {
            model,
            inputs: p.texts,
            options: {
              encoding: VectorEncoding.FLOAT32_LE,
              inputType: p.inputType,
              embeddingTypes: [...p.types],
              truncation: p.truncation,
              dimensions: p.dimensions,
            },
          }),
        );
        return deps.embed(message, ctx);
      },
    });
    const p = parsed as CohereEmbed;
    const byType: Record<string, number[][]> = {};
    for (const t of p.types) byType[TYPE_KEYS.get(t) ?? "float"] = out.embeddings.map((e) => vectorOf(e, t));
    const billed = { input_tokens: out.usage?.promptTokens ?? 0 };
    const body =
      version === 1
        ? p.floatsOnly
          ? { id: randomUUID(), response_type: "embeddings_floats", embeddings: byType["float"], texts: p.texts, meta: meta(1, billed) }
          : { id: randomUUID(), response_type: "embeddings_by_type", embeddings: byType, texts: p.texts, meta: meta(1, billed) }
        : { id: randomUUID(), embeddings: byType, texts: p.texts, meta: meta(2, billed) };
    sendJson(req, res, 200, body, headers);
  }

  async function rerank(req: Req, res: Res, version: Version): Promise<void> {
    let parsed: CohereRerank | undefined;
    const { out, headers } = await invokeRoute(req, res, {
      method: InferenceService.method.rerank,
      protocol: "cohere",
      route: `/v${version}/rerank`,
      metricsMethod: `Cohere.RerankV${version}`,
      statusOf: cohereStatus,
      interceptors: deps.interceptors,
      async impl(message, ctx) {
        const p = parseCohereRerank(await readJsonRequest(req, deps.maxRequestBytes), version);
        parsed = p;
        const model = modelFor(p.model, deps, "rerank");
        checkTokenCap(p.maxTokensPerDoc, "max_tokens_per_doc", deps.models.get(model));
        // Cohere cuts long documents by default; Shoal's truncate cuts the pair longest_first, from the end.
        Object.assign(message, create(RerankRequestSchema, { model, query: p.query, documents: p.documents, topK: p.topN, truncate: true }));
        return deps.rerank(message, ctx);
      },
    });
    const p = parsed as CohereRerank;
    const results = out.results.map((r) => ({
      index: r.index,
      // Shoal's score is already the sigmoid of the cross-encoder's logit: in [0, 1] as Cohere's.
      relevance_score: r.score,
      ...(p.returned ? { document: p.returned[r.index] } : {}),
    }));
    // Cohere bills one search unit per query and up to 100 documents.
    const billed = { search_units: Math.max(1, Math.ceil(p.documents.length / 100)) };
    sendJson(req, res, 200, { id: randomUUID(), results, meta: meta(version, billed) }, headers);
  }

  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    const version: Version = path.startsWith("/v1/") ? 1 : 2;
    const run = path.endsWith("/embed") ? embed : rerank;
    run(req, res, version).catch((err: unknown) => {
      const e = err as ConnectError;
      if (typeof e?.code !== "number") {
        log.error({ err }, "cohere request failed");
        sendJson(req, res, 500, { message: "internal error" });
        return;
      }
      sendJson(req, res, cohereStatus(e), { message: cohereMessage(e.rawMessage) }, hintHeaders(e));
    });
  };
}
