import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import type { CatalogModel, Logger } from "@shoal/common";
import { type EmbedResponse, EmbedRequestSchema, InferenceService, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { InputType } from "@shoal/gen/shoal/v1/common_pb.ts";
import { checkDimensions, INPUT_TYPE_NAMES } from "./embed-options.ts";
import { InvalidRequestError, toConnectError } from "./errors.ts";
import { float32LeToNumbers, hintHeaders, invokeRoute, readJsonRequest, type RefusalKind, RouteRequestError, sendJson } from "./http-call.ts";
import type { Req, Res } from "./http-types.ts";

/** The path OpenAI SDKs call for embeddings, with `baseURL` = `<gateway>/v1`. */
export const OPENAI_EMBEDDINGS_PATH = "/v1/embeddings";

/** The `method` label of the endpoint in `shoal_gateway_requests_total` and the latency histogram. */
export const OPENAI_EMBEDDINGS_METHOD = "OpenAI.Embeddings";

export interface OpenAiEmbeddingsDeps {
  /** The InferenceService implementation's Embed: the very function the Connect routes call. */
  readonly embed: ServiceImpl<typeof InferenceService>["embed"];
  /**
   * The interceptors of the Connect routes, outermost first (tracing, metrics, error mapping, API
   * keys): the endpoint's calls run through the very same chain.
   */
  readonly interceptors: readonly Interceptor[];
  /** The catalog's models, to check `dimensions` against the model's. */
  readonly models: ReadonlyMap<string, CatalogModel>;
  /** Largest request body accepted (SHOAL_MAX_REQUEST_BYTES, as for Connect calls). */
  readonly maxRequestBytes: number;
  readonly logger: Logger;
}

/** OpenAI's error body: `{ error: { message, type, param, code } }`. */
export interface OpenAiError {
  readonly status: number;
  readonly message: string;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
}

const httpStatus: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 400,
  [Code.FailedPrecondition]: 400,
  [Code.OutOfRange]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.Aborted]: 409,
  [Code.ResourceExhausted]: 429,
  // What nginx logs when the client went away first; nobody reads it.
  [Code.Canceled]: 499,
  [Code.Unimplemented]: 501,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
};

function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  return status < 500 ? "invalid_request_error" : "server_error";
}

/** The OpenAI error for a ConnectError: HTTP status from the Connect code, OpenAI's names. */
export function openAiErrorFrom(err: ConnectError): OpenAiError {
  // Not `instanceof`: ConnectError's Symbol.hasInstance accepts any ConnectError-shaped value.
  if (Object.prototype.isPrototypeOf.call(OpenAiRequestError.prototype, err)) return (err as OpenAiRequestError).openAi;
  if (RouteRequestError.is(err)) return refusal[err.kind](err.rawMessage);
  const status = httpStatus[err.code] ?? 500;
  // Shoal's validation names `inputs[i]`; the OpenAI request calls the field `input`.
  const message = err.rawMessage.replace(/^inputs\b/, "input");
  const param = /^input\b/.test(message)
    ? "input"
    : /^model\b/.test(message) || err.code === Code.NotFound || err.code === Code.PermissionDenied
      ? "model"
      : null;
  const code =
    err.code === Code.NotFound
      ? "model_not_found"
      : err.code === Code.Unauthenticated
        ? "invalid_api_key"
        : (Code[err.code] ?? "unknown").replace(/[A-Z]/g, (c, i: number) => (i > 0 ? "_" : "") + c.toLowerCase());
  return { status, message, type: errorType(status), param, code };
}

function invalid(message: string, param: string | null, code: string | null = "invalid_value", status = 400): OpenAiError {
  return { status, message, type: "invalid_request_error", param, code };
}

/** Refusals shared with the other dialects' routes (method, media type, size, JSON), in OpenAI's words. */
const refusal: Record<RefusalKind, (message: string) => OpenAiError> = {
  method: (m) => invalid(m, null, "method_not_allowed", 405),
  media_type: (m) => invalid(m, null, "unsupported_media_type", 415),
  too_large: (m) => invalid(m, null, "request_too_large", 413),
  malformed: (m) => invalid(m, null),
  invalid: (m) => invalid(m, null),
};

/**
 * A request the endpoint refuses before Embed (wrong method, media type, body): a ConnectError
 * with the code a Connect call would get, so the interceptors count and trace it like any refused
 * call, carrying the exact OpenAI error to answer with.
 */
class OpenAiRequestError extends ConnectError {
  constructor(
    readonly openAi: OpenAiError,
    code = Code.InvalidArgument,
    metadata?: Record<string, string>,
  ) {
    super(openAi.message, code, metadata);
  }
}

export interface ParsedRequest {
  readonly model: string;
  readonly inputs: string[];
  readonly base64: boolean;
  readonly dimensions: number | undefined;
  /** Shoal's extension: the role of the texts (`query`, `document`, Cohere's names). */
  readonly inputType: InputType;
}

/** Validates an OpenAI `CreateEmbeddingRequest`; `user` and unknown fields are ignored. */
export function parseEmbeddingsRequest(body: unknown): ParsedRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new OpenAiRequestError(invalid("request body must be a JSON object", null));
  }
  const b = body as Record<string, unknown>;
  if (typeof b["model"] !== "string" || b["model"] === "") throw new OpenAiRequestError(invalid("model: required string", "model"));
  const input = b["input"];
  let inputs: string[];
  if (typeof input === "string") inputs = [input];
  else if (Array.isArray(input) && input.every((x) => typeof x === "string")) inputs = input as string[];
  else if (Array.isArray(input) && input.every((x) => typeof x === "number" || Array.isArray(x))) {
    throw new OpenAiRequestError(invalid("input: token-id arrays are not supported; send text (a string or a list of strings)", "input"));
  } else throw new OpenAiRequestError(invalid("input: expected a string or a list of strings", "input"));
  const format = b["encoding_format"] ?? "float";
  if (format !== "float" && format !== "base64") {
    throw new OpenAiRequestError(invalid(`encoding_format: expected "float" or "base64"`, "encoding_format"));
  }
  const dims = b["dimensions"] ?? undefined;
  if (dims !== undefined && (typeof dims !== "number" || !Number.isInteger(dims) || dims < 1)) {
    throw new OpenAiRequestError(invalid("dimensions: expected a positive integer", "dimensions"));
  }
  const typeName = b["input_type"];
  const inputType = typeName === undefined || typeName === null ? InputType.UNSPECIFIED : INPUT_TYPE_NAMES.get(String(typeName));
  if (inputType === undefined || (typeName !== undefined && typeName !== null && typeof typeName !== "string")) {
    throw new OpenAiRequestError(invalid(`input_type: expected one of ${[...INPUT_TYPE_NAMES.keys()].map((n) => `"${n}"`).join(", ")}`, "input_type"));
  }
  return { model: b["model"], inputs, base64: format === "base64", dimensions: dims, inputType };
}

/** The body of a successful `POST /v1/embeddings` (also each output line of a batch, batch/batch-line-call.ts). */
export function openAiEmbeddingsBody(out: EmbedResponse, base64: boolean): Record<string, unknown> {
  const data = out.embeddings.map((e) => ({
    object: "embedding",
    index: e.index,
    embedding: base64 ? Buffer.from(e.float32Le).toString("base64") : float32LeToNumbers(e.float32Le),
  }));
  const usage = { prompt_tokens: out.usage?.promptTokens ?? 0, total_tokens: out.usage?.totalTokens ?? 0 };
  return { object: "list", data, model: out.model, usage };
}

function sendError(req: Req, res: Res, e: OpenAiError, headers: Record<string, string> = {}): void {
  sendJson(req, res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.code } }, headers);
}

/** Checks the HTTP request and parses its body; throws OpenAiRequestError. */
async function readRequest(req: Req, deps: OpenAiEmbeddingsDeps): Promise<ParsedRequest> {
  const body = await readJsonRequest(req, deps.maxRequestBytes);
  const parsed = parseEmbeddingsRequest(body);
  const model = deps.models.get(parsed.model);
  if (model && parsed.dimensions !== undefined) {
    try {
      checkDimensions(parsed.dimensions, model, "dimensions");
    } catch (err) {
      if (err instanceof InvalidRequestError) throw new OpenAiRequestError(invalid(err.message, "dimensions"));
      throw err;
    }
  }
  return parsed;
}

/**
 * `POST /v1/embeddings`, OpenAI-compatible: a call of the InferenceService's Embed through the
 * interceptors of the Connect routes, so the API key check, the SERVER span, the request metrics,
 * the error mapping, validation, deadlines and the queue are exactly Embed's. What is left here is
 * the translation: OpenAI request → EmbedRequest, EmbedResponse → OpenAI response, ConnectError →
 * OpenAI error body and HTTP status.
 *
 * The chain is entered before the body is read, so an unknown caller is refused before it costs
 * a body; the EmbedRequest the interceptors see is filled once the body is parsed (they read its
 * model and lane when the call ends). Requests refused before Embed (method, media type, size,
 * JSON) fail inside the chain, counted and traced like any refused call.
 */
export function createOpenAiEmbeddings(deps: OpenAiEmbeddingsDeps): (req: Req, res: Res) => void {
  const log = deps.logger.child({ component: "openai" });

  async function serve(req: Req, res: Res): Promise<void> {
    let base64 = false;
    try {
      const { out, headers } = await invokeRoute(req, res, {
        method: InferenceService.method.embed,
        protocol: "openai",
        route: OPENAI_EMBEDDINGS_PATH,
        metricsMethod: OPENAI_EMBEDDINGS_METHOD,
        statusOf: (err) => openAiErrorFrom(err).status,
        interceptors: deps.interceptors,
        async impl(message, ctx) {
          const parsed = await readRequest(req, deps);
          base64 = parsed.base64;
          // Raw bytes are what the worker produced: no float list to build, and base64 is a copy.
          Object.assign(
            message,
            create(EmbedRequestSchema, {
              model: parsed.model,
              inputs: parsed.inputs,
              options: { encoding: VectorEncoding.FLOAT32_LE, dimensions: parsed.dimensions, inputType: parsed.inputType },
            }),
          );
          return deps.embed(message, ctx);
        },
      });
      sendJson(req, res, 200, openAiEmbeddingsBody(out, base64), headers);
    } catch (err) {
      // Backpressure hints travel as headers, which OpenAI SDKs already honour when retrying.
      const e = toConnectError(err);
      sendError(req, res, openAiErrorFrom(e), hintHeaders(e));
    }
  }

  return (req, res) => {
    serve(req, res).catch((err: unknown) => {
      log.error({ err }, "embeddings request failed");
      sendError(req, res, { status: 500, message: "internal error", type: "server_error", param: null, code: "internal" });
    });
  };
}
