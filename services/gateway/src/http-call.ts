import { create, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { callerKey, connectionOf } from "./auth.ts";
import { toConnectError } from "./errors.ts";
import { type HttpRoute, httpRoute, httpRouteKey } from "./http-route.ts";
import { type Req, type Res, writeHead } from "./http-types.ts";

/**
 * Plain-HTTP routes that speak another API's dialect (OpenAI, Cohere, TEI) over Shoal's
 * InferenceService: each call enters the Connect routes' interceptor chain (API key, SERVER span,
 * request metrics, error mapping) and runs the service's own method, so validation, admission,
 * deadlines and the queue are exactly the RPC's. A route only translates its request and answer.
 */

/** Why a route refused a request before the RPC: the HTTP status its dialect answers with. */
export type RefusalKind = "method" | "media_type" | "too_large" | "malformed" | "invalid";

/**
 * A request a route refuses before the RPC (method, media type, size, JSON, its own fields): a
 * ConnectError with the code a Connect call would get, so the interceptors count and trace it
 * like any refused call; `kind` and `param` let the dialect answer in its own words.
 */
export class RouteRequestError extends ConnectError {
  constructor(
    message: string,
    readonly kind: RefusalKind,
    readonly param: string | null = null,
    metadata?: Record<string, string>,
  ) {
    super(message, kind === "too_large" ? Code.ResourceExhausted : Code.InvalidArgument, metadata);
  }

  /** Whether `err` is one (not `instanceof`: ConnectError's Symbol.hasInstance accepts any ConnectError-shaped value). */
  static is(err: ConnectError): err is RouteRequestError {
    return Object.prototype.isPrototypeOf.call(RouteRequestError.prototype, err);
  }
}

/** Reads the whole body, refusing it past `limit` bytes (a Connect call over SHOAL_MAX_REQUEST_BYTES is ResourceExhausted too). */
export async function readBody(req: Req, limit: number): Promise<Buffer> {
  const tooLarge = (): RouteRequestError => new RouteRequestError(`request body exceeds the limit of ${limit} bytes`, "too_large");
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Checks method (`POST`) and media type (JSON, uncompressed), then reads and parses the body. */
export async function readJsonRequest(req: Req, limit: number): Promise<unknown> {
  if (req.method !== "POST") throw new RouteRequestError("use POST", "method", null, { allow: "POST" });
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") throw new RouteRequestError("content-type must be application/json", "media_type");
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") throw new RouteRequestError(`content-encoding ${encoding} is not supported`, "media_type");
  const raw = await readBody(req, limit);
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch {
    throw new RouteRequestError("request body is not valid JSON", "malformed");
  }
}

/** Sends a JSON answer; an oversized HTTP/1.1 upload is cut (connection: close) rather than drained. */
export function sendJson(req: Req, res: Res, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const json = JSON.stringify(body);
  const head: Record<string, string> = { "content-type": "application/json", "content-length": String(Buffer.byteLength(json)), ...headers };
  const cut = status === 413 && req.httpVersionMajor === 1 && !req.readableEnded;
  if (cut) head["connection"] = "close";
  writeHead(res, status, head);
  res.end(json);
  if (req.readableEnded) return;
  if (cut) res.once("finish", () => req.socket.destroy());
  else req.resume();
}

/** Request headers as fetch Headers, without HTTP/2 pseudo-headers. */
export function webHeaders(req: Req): Headers {
  const h = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(":") || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) h.append(name, v);
  }
  return h;
}

/** Backpressure and auth hints of a mapped error, as response headers (SDKs honour retry-after). */
export function hintHeaders(err: ConnectError): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of ["retry-after", "retry-after-ms", "www-authenticate", "allow"]) {
    const v = err.metadata.get(name);
    if (v !== null) headers[name] = v;
  }
  return headers;
}

/** One route call: which RPC, how it is named, and what the route does inside the chain. */
export interface RouteCall<I extends DescMessage, O extends DescMessage> {
  readonly method: DescMethodUnary<I, O>;
  /** The handler context's protocol name: the dialect (`openai`, `cohere`, `tei`). */
  readonly protocol: string;
  /** The route template (`/v2/embed`: the span `POST /v2/embed`, `http.route`). */
  readonly route: string;
  /** `method` label of the request metrics (`Cohere.Embed`). */
  readonly metricsMethod: string;
  /** The HTTP status the route answers an error with (undefined: success, 200). */
  readonly statusOf: (err: ConnectError) => number;
  readonly interceptors: readonly Interceptor[];
  /**
   * Runs inside the chain: reads and translates the body into `message` (the request the
   * interceptors see), then calls the service's method. Refusals throw {@link RouteRequestError}.
   */
  readonly impl: (message: MessageShape<I>, ctx: HandlerContext) => Promise<MessageInitShape<O>>;
}

/** What a successful call gives the route: the RPC's answer and the headers the chain set. */
export interface RouteResult<O extends DescMessage> {
  readonly out: MessageShape<O>;
  readonly headers: Record<string, string>;
}

/**
 * Runs `call.impl` as Connect's handler would run a decoded request: the same interceptors, a
 * handler context aborted when the client leaves. Every failure comes back as a ConnectError
 * (already mapped by the chain's mapErrors; mapped again for a chain without it).
 */
export async function invokeRoute<I extends DescMessage, O extends DescMessage>(req: Req, res: Res, call: RouteCall<I, O>): Promise<RouteResult<O>> {
  const aborted = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) aborted.abort(new ConnectError("client went away", Code.Canceled));
  });
  const route: HttpRoute = httpRoute(req, call.route, call.metricsMethod, (err) =>
    aborted.signal.aborted ? undefined : err === undefined ? 200 : call.statusOf(err),
  );
  const ctx = createHandlerContext({
    service: InferenceService,
    method: call.method,
    protocolName: call.protocol,
    requestMethod: req.method ?? "POST",
    url: req.url ?? "/",
    requestSignal: aborted.signal,
    requestHeader: webHeaders(req),
    contextValues: createContextValues().set(httpRouteKey, route).set(callerKey, connectionOf(req.socket)),
  });
  try {
    const out = create(
      call.method.output,
      await invokeUnaryImplementation({ kind: "unary", method: call.method, impl: call.impl }, ctx, create(call.method.input), [...call.interceptors]),
    );
    const headers: Record<string, string> = {};
    ctx.responseHeader.forEach((v, k) => {
      headers[k] = v;
    });
    return { out, headers };
  } catch (err) {
    throw toConnectError(err);
  } finally {
    ctx.abort();
  }
}

/** Little-endian float32 bytes as JS numbers (exactly the float32 values). */
export function float32LeToNumbers(bytes: Uint8Array): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<number>(bytes.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}
