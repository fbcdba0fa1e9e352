import { create, type DescMessage, type DescMethodUnary, fromBinary, type MessageInitShape, type MessageShape, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext, type Interceptor, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJson, parseTimeout } from "@connectrpc/connect/protocol-connect";
import type { Logger } from "@shoal/common";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { callerKey, connectionOf } from "./auth.ts";
import { toConnectError } from "./errors.ts";
import { readBody, sendJson, webHeaders } from "./http-call.ts";
import type { Req, Res } from "./http-types.ts";
import type { JsonDecoder } from "./json-decoder.ts";
import type { JsonMethod } from "./json-thread-protocol.ts";

/**
 * Connect JSON bodies from this size on are decoded on the JSON thread: below it, decoding costs
 * well under a millisecond and the thread hop would cost more than it saves.
 */
export const LARGE_JSON_BYTES = 256 * 1024;

const METHODS: Readonly<Record<string, JsonMethod>> = { Embed: "embed", Rerank: "rerank", Classify: "classify", Tokenize: "tokenize" };
const PATH = /^\/shoal\.v1\.InferenceService\/(Embed|Rerank|Classify|Tokenize)$/;

/**
 * The InferenceService method a request calls when it is a Connect JSON unary call whose declared
 * body is large (POST, `application/json`, uncompressed, Content-Length ≥ {@link LARGE_JSON_BYTES});
 * undefined for every other request (Connect's adapter serves them, as before).
 */
export function largeJsonMethod(req: Req, pathname: string): JsonMethod | undefined {
  if (req.method !== "POST") return undefined;
  const name = PATH.exec(pathname)?.[1];
  if (name === undefined) return undefined;
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  const encoding = req.headers["content-encoding"];
  if (type !== "application/json" || (encoding !== undefined && encoding !== "identity")) return undefined;
  return Number(req.headers["content-length"] ?? 0) >= LARGE_JSON_BYTES ? METHODS[name] : undefined;
}

/** A unary method's implementation, whichever method (Connect does not export its UnaryImpl). */
type Unary = (message: MessageShape<DescMessage>, ctx: HandlerContext) => Promise<MessageInitShape<DescMessage>>;

export interface LargeJsonDeps {
  /** The InferenceService implementation the Connect routes serve. */
  readonly service: ServiceImpl<typeof InferenceService>;
  /** The Connect routes' interceptors, outermost first: the calls run through the same chain. */
  readonly interceptors: readonly Interceptor[];
  readonly decoder: JsonDecoder;
  /** SHOAL_MAX_REQUEST_BYTES, as Connect's readMaxBytes. */
  readonly maxRequestBytes: number;
  readonly logger: Logger;
}

/**
 * Serves large Connect JSON unary calls as Connect's adapter would (issue #52) — same interceptors
 * (API key, span, metrics, error mapping), same context (caller, deadline from
 * `connect-timeout-ms`), same answer (the response as JSON; an error as Connect's error JSON with
 * its HTTP status and metadata headers) — but the body is decoded on the JSON thread. Connect's
 * adapter decoded a 7.8 MiB Embed on the event loop in one ~60 ms block, and four callers sending
 * them back to back held every other call of the gateway for seconds.
 */
export function createLargeJsonCalls(deps: LargeJsonDeps): (req: Req, res: Res, method: JsonMethod) => void {
  const log = deps.logger.child({ component: "large-json" });

  async function serve(req: Req, res: Res, name: JsonMethod): Promise<void> {
    const method = InferenceService.method[name];
    const aborted = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) aborted.abort(new ConnectError("client went away", Code.Canceled));
    });
    const header = req.headers["connect-timeout-ms"];
    // The front already clamped it to SHOAL_MAX_TIMEOUT_MS (timeout-headers.ts).
    const timeout = parseTimeout(typeof header === "string" ? header : null, Number.MAX_SAFE_INTEGER);
    const ctx = createHandlerContext({
      service: InferenceService,
      method,
      protocolName: "connect",
      requestMethod: "POST",
      url: req.url ?? "/",
      requestSignal: aborted.signal,
      requestHeader: webHeaders(req),
      contextValues: createContextValues().set(callerKey, connectionOf(req.socket)),
      ...(timeout.timeoutMs === undefined ? {} : { timeoutMs: timeout.timeoutMs }),
    });
    try {
      if (timeout.error !== undefined) throw timeout.error;
      // One method of four, typed as any unary method: the body decides which request it is.
      const rpc = method as DescMethodUnary<DescMessage, DescMessage>;
      const serviceMethod = deps.service[name] as unknown as Unary;
      const impl: Unary = async (message, c) => {
        const body = await readBody(req, deps.maxRequestBytes);
        // The interceptors read the request's model and lane when the call ends: fill the one they hold.
        Object.assign(message, fromBinary(rpc.input, await deps.decoder.decode(name, body)));
        return serviceMethod(message, c);
      };
      const out = await invokeUnaryImplementation({ kind: "unary", method: rpc, impl }, ctx, create(rpc.input), [...deps.interceptors]);
      const headers: Record<string, string> = {};
      ctx.responseHeader.forEach((v, k) => {
        headers[k] = v;
      });
      ctx.responseTrailer.forEach((v, k) => {
        headers[`trailer-${k}`] = v;
      });
      sendJson(req, res, 200, toJson(rpc.output, create(rpc.output, out)), headers);
    } catch (err) {
      const e = toConnectError(err);
      const headers: Record<string, string> = {};
      e.metadata.forEach((v, k) => {
        headers[k] = v;
      });
      sendJson(req, res, codeToHttpStatus(e.code), errorToJson(e, undefined), headers);
    } finally {
      ctx.abort();
    }
  }

  return (req, res, method) => {
    serve(req, res, method).catch((err: unknown) => {
      log.error({ err }, "large JSON call failed");
      sendJson(req, res, 500, { code: "internal", message: "internal error" });
    });
  };
}
