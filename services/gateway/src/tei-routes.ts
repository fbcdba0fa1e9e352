import { create } from "@bufbuild/protobuf";
import { Code, type ConnectError, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import type { CatalogModel, Logger } from "@shoal/common";
import { InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { EmbedRequestSchema, InferenceService, RerankRequestSchema, TokenizeRequestSchema, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { INPUT_TYPE_NAMES } from "./embed-options.ts";
import { float32LeToNumbers, hintHeaders, invokeRoute, readJsonRequest, RouteRequestError, sendJson } from "./http-call.ts";
import type { Req, Res } from "./http-types.ts";
import { objectBody, optionalBool, optionalInt, optionalString, requiredString, stringList } from "./route-fields.ts";

/**
 * Text Embeddings Inference (TEI) compatible routes: `POST /embed`, `POST /rerank`, `POST /tokenize`, `GET /info`, `GET /health`. TEI
 * serves one model per server, so these routes serve one embedding model and one rerank model,
 * chosen by SHOAL_TEI_EMBED_MODEL / SHOAL_TEI_RERANK_MODEL (default: the catalog's first pinned
 * model of the task, else its first). TEI's `POST /` (its model's task) is not served: the root
 * stays with the Connect fallback, whose clients expect its answers there.
 */
export const TEI_PATHS: ReadonlySet<string> = new Set(["/embed", "/rerank", "/tokenize", "/info", "/health"]);

export interface TeiDeps {
  readonly embed: ServiceImpl<typeof InferenceService>["embed"];
  readonly rerank: ServiceImpl<typeof InferenceService>["rerank"];
  readonly tokenize: ServiceImpl<typeof InferenceService>["tokenize"];
  readonly interceptors: readonly Interceptor[];
  /** The model `/embed`, `/tokenize` and `/info` serve; undefined: the catalog has no embedding model. */
  /** The model the TEI routes embed with now (read per call: the registry may change it). */
  readonly embedModel: () => CatalogModel | undefined;
  /** The model the TEI routes rerank with now. */
  readonly rerankModel: () => CatalogModel | undefined;
  readonly maxRequestBytes: number;
  readonly maxInputsPerRequest: number;
  /** Whether the gateway can serve (the readiness probe's answer). */
  readonly isReady: () => boolean;
  readonly version: string;
  readonly logger: Logger;
}

/** TEI's `error_type` values. */
export type TeiErrorType = "Unhealthy" | "Backend" | "Overloaded" | "Validation" | "Tokenizer" | "Empty" | "Unauthorized";

/** `truncation_direction` (TEI: Right, Left; any case) with `truncate`. */
function truncationOf(b: Record<string, unknown>): Truncation {
  if (!(optionalBool(b, "truncate") ?? false)) return Truncation.NONE;
  const dir = (optionalString(b, "truncation_direction") ?? "Right").toLowerCase();
  if (dir === "right") return Truncation.END;
  if (dir === "left") return Truncation.START;
  throw new RouteRequestError("truncation_direction: expected Right or Left", "invalid", "truncation_direction");
}

/** TEI's `prompt_name` as an input type: the input type names, and sentence-transformers' `passage`. */
function inputTypeOf(b: Record<string, unknown>): InputType {
  const name = optionalString(b, "prompt_name");
  if (name === undefined) return InputType.UNSPECIFIED;
  const t = name === "passage" ? InputType.DOCUMENT : INPUT_TYPE_NAMES.get(name);
  if (t === undefined)
    throw new RouteRequestError(`prompt_name: expected one of passage, ${[...INPUT_TYPE_NAMES.keys()].join(", ")}`, "invalid", "prompt_name");
  return t;
}

/** A TEI `/embed` body in Shoal's terms. */
export interface TeiEmbed {
  readonly inputs: string[];
  readonly normalize: boolean;
  readonly truncation: Truncation;
  readonly inputType: InputType;
  readonly dimensions: number | undefined;
}

export function parseTeiEmbed(body: unknown): TeiEmbed {
  const b = objectBody(body);
  return {
    inputs: stringList(b, "inputs", true),
    normalize: optionalBool(b, "normalize") ?? true,
    truncation: truncationOf(b),
    inputType: inputTypeOf(b),
    dimensions: optionalInt(b, "dimensions"),
  };
}

/** A TEI `/rerank` body in Shoal's terms. */
export interface TeiRerank {
  readonly query: string;
  readonly texts: string[];
  readonly truncate: boolean;
  readonly rawScores: boolean;
  readonly returnText: boolean;
}

export function parseTeiRerank(body: unknown): TeiRerank {
  const b = objectBody(body);
  const truncation = truncationOf(b);
  // Shoal's Rerank cuts pairs from the end (longest_first); it has no Left.
  if (truncation === Truncation.START)
    throw new RouteRequestError("truncation_direction: only Right is supported for rerank", "invalid", "truncation_direction");
  return {
    query: requiredString(b, "query"),
    texts: stringList(b, "texts"),
    truncate: truncation === Truncation.END,
    rawScores: optionalBool(b, "raw_scores") ?? false,
    returnText: optionalBool(b, "return_text") ?? false,
  };
}

/** Shoal's scores are sigmoid(logit) in float32; `raw_scores` gets the logit back, saturating at about ±16.6. */
export function logitOf(score: number): number {
  const eps = 2 ** -24;
  const s = Math.min(1 - eps, Math.max(eps, score));
  return Math.log(s) - Math.log1p(-s);
}

/** A TEI simple token: byte offsets into the UTF-8 input (Rust string slices), none for special tokens. */
export interface TeiToken {
  readonly id: number;
  readonly text: string;
  readonly special: boolean;
  readonly start: number | null;
  readonly stop: number | null;
}

/** Shoal's code-point offsets as TEI's tokens: `text` is the input's slice, offsets in UTF-8 bytes. */
export function teiTokens(
  input: string,
  ids: readonly number[],
  tokens: readonly string[],
  starts: readonly number[],
  ends: readonly number[],
  special: readonly boolean[],
  keepSpecial: boolean,
): TeiToken[] {
  const points = Array.from(input);
  const byteAt: number[] = [0];
  for (const p of points) byteAt.push((byteAt.at(-1) ?? 0) + Buffer.byteLength(p));
  const out: TeiToken[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (special[i] === true) {
      if (keepSpecial) out.push({ id: ids[i] ?? 0, text: tokens[i] ?? "", special: true, start: null, stop: null });
      continue;
    }
    const s = starts[i] ?? 0;
    const e = ends[i] ?? 0;
    out.push({ id: ids[i] ?? 0, text: points.slice(s, e).join(""), special: false, start: byteAt[s] ?? 0, stop: byteAt[e] ?? 0 });
  }
  return out;
}

const refusalStatus = { method: 405, media_type: 415, too_large: 413, malformed: 422, invalid: 422 } as const;

/** TEI's status and error type for a refused call. */
export function teiErrorFrom(err: ConnectError): { status: number; type: TeiErrorType } {
  if (RouteRequestError.is(err)) return { status: refusalStatus[err.kind], type: "Validation" };
  switch (err.code) {
    case Code.InvalidArgument:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
      return /: (empty text|at least one)/.test(err.rawMessage) ? { status: 400, type: "Empty" } : { status: 422, type: "Validation" };
    case Code.Unauthenticated:
      return { status: 401, type: "Unauthorized" };
    case Code.PermissionDenied:
      return { status: 403, type: "Unauthorized" };
    case Code.ResourceExhausted:
      return { status: 429, type: "Overloaded" };
    case Code.Unavailable:
      return { status: 503, type: "Unhealthy" };
    case Code.Canceled:
      return { status: 499, type: "Backend" };
    default:
      return { status: 424, type: "Backend" };
  }
}

function noModel(task: string): RouteRequestError {
  return new RouteRequestError(`this gateway's catalog has no ${task} model for the TEI routes`, "invalid");
}

/** The handler of the TEI paths (the front routes only those here). */
export function createTeiRoutes(deps: TeiDeps): (req: Req, res: Res) => void {
  const log = deps.logger.child({ component: "tei" });
  const { interceptors } = deps;
  const statusOf = (err: ConnectError): number => teiErrorFrom(err).status;

  async function embed(req: Req, res: Res, route: string): Promise<void> {
    const { out, headers } = await invokeRoute(req, res, {
      method: InferenceService.method.embed,
      protocol: "tei",
      route,
      metricsMethod: "TEI.Embed",
      statusOf,
      interceptors,
      async impl(message, ctx) {
        const p = parseTeiEmbed(await readJsonRequest(req, deps.maxRequestBytes));
        const embedModel = deps.embedModel();
        if (embedModel === undefined) throw noModel("embedding");
        if (p.inputs.length > deps.maxInputsPerRequest) {
          throw new RouteRequestError(`batch size ${p.inputs.length} > maximum allowed batch size ${deps.maxInputsPerRequest}`, "too_large");
        }
        const options = {
          encoding: VectorEncoding.FLOAT32_LE,
          normalize: p.normalize,
          truncation: p.truncation,
          inputType: p.inputType,
          dimensions: p.dimensions,
        };
        Object.assign(message, create(EmbedRequestSchema, { model: embedModel.id, inputs: p.inputs, options }));
        return deps.embed(message, ctx);
      },
    });
    sendJson(
      req,
      res,
      200,
      out.embeddings.map((e) => float32LeToNumbers(e.float32Le)),
      headers,
    );
  }

  async function rerank(req: Req, res: Res): Promise<void> {
    let parsed: TeiRerank | undefined;
    const { out, headers } = await invokeRoute(req, res, {
      method: InferenceService.method.rerank,
      protocol: "tei",
      route: "/rerank",
      metricsMethod: "TEI.Rerank",
      statusOf,
      interceptors,
      async impl(message, ctx) {
        const p = parseTeiRerank(await readJsonRequest(req, deps.maxRequestBytes));
        parsed = p;
        const rerankModel = deps.rerankModel();
        if (rerankModel === undefined) throw noModel("rerank");
        Object.assign(message, create(RerankRequestSchema, { model: rerankModel.id, query: p.query, documents: p.texts, truncate: p.truncate }));
        return deps.rerank(message, ctx);
      },
    });
    const p = parsed as TeiRerank;
    const body = out.results.map((r) => ({
      index: r.index,
      score: p.rawScores ? logitOf(r.score) : r.score,
      ...(p.returnText ? { text: p.texts[r.index] } : {}),
    }));
    sendJson(req, res, 200, body, headers);
  }

  async function tokenize(req: Req, res: Res): Promise<void> {
    let parsed: { inputs: string[]; special: boolean } | undefined;
    const { out, headers } = await invokeRoute(req, res, {
      method: InferenceService.method.tokenize,
      protocol: "tei",
      route: "/tokenize",
      metricsMethod: "TEI.Tokenize",
      statusOf,
      interceptors,
      async impl(message, ctx) {
        const b = objectBody(await readJsonRequest(req, deps.maxRequestBytes));
        const p = { inputs: stringList(b, "inputs", true), special: optionalBool(b, "add_special_tokens") ?? true };
        parsed = p;
        const model = deps.embedModel() ?? deps.rerankModel();
        if (model === undefined) throw noModel("embedding or rerank");
        Object.assign(message, create(TokenizeRequestSchema, { model: model.id, inputs: p.inputs, inputType: inputTypeOf(b), truncation: Truncation.NONE }));
        return deps.tokenize(message, ctx);
      },
    });
    const p = parsed as { inputs: string[]; special: boolean };
    const body = out.tokenized.map((t) => teiTokens(p.inputs[t.index] ?? "", t.ids, t.tokens, t.starts, t.ends, t.special, p.special));
    sendJson(req, res, 200, body, headers);
  }

  function info(req: Req, res: Res): void {
    const m = deps.embedModel() ?? deps.rerankModel();
    const modelType =
      m === undefined
        ? {}
        : m.spec.task === "embed"
          ? { embedding: { pooling: m.spec.pooling === "lasttoken" ? "last_token" : m.spec.pooling } } // TEI spells it last_token
          : { reranker: { id2label: { "0": "LABEL_0" }, label2id: { LABEL_0: 0 } } };
    sendJson(req, res, 200, {
      model_id: m?.id ?? null,
      model_sha: null,
      model_dtype: "float32",
      model_type: modelType,
      max_concurrent_requests: 512,
      max_input_length: m?.spec.maxSequenceLength ?? 0,
      max_batch_tokens: 16384,
      max_batch_requests: null,
      max_client_batch_size: deps.maxInputsPerRequest,
      auto_truncate: false,
      tokenization_workers: 1,
      version: deps.version,
      sha: null,
      docker_label: null,
      // Not TEI's: the rerank model these routes serve.
      shoal_rerank_model_id: deps.rerankModel()?.id ?? null,
    });
  }

  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (path === "/health" || path === "/info") {
      if (req.method !== "GET" && req.method !== "HEAD") {
        sendJson(req, res, 405, { error: "use GET", error_type: "Validation" }, { allow: "GET" });
      } else if (path === "/info") info(req, res);
      else if (deps.isReady()) sendJson(req, res, 200, {});
      else sendJson(req, res, 503, { error: "not ready", error_type: "Unhealthy" });
      return;
    }
    const run = path === "/rerank" ? rerank(req, res) : path === "/tokenize" ? tokenize(req, res) : embed(req, res, path);
    run.catch((err: unknown) => {
      const e = err as ConnectError;
      if (typeof e?.code !== "number") {
        log.error({ err }, "TEI request failed");
        sendJson(req, res, 500, { error: "internal error", error_type: "Backend" });
        return;
      }
      const { status, type } = teiErrorFrom(e);
      // Shoal's validation names EmbedRequest's options; TEI's fields have the bare names.
      sendJson(req, res, status, { error: e.rawMessage.replace(/^options\./, ""), error_type: type }, hintHeaders(e));
    });
  };
}
