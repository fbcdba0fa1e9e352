import type { ConnectError } from "@connectrpc/connect";
import type { ApiKeys } from "../auth.ts";
import { toConnectError } from "../errors.ts";
import { hintHeaders, sendJson } from "../http-call.ts";
import type { Req, Res } from "../http-types.ts";
import { openAiErrorFrom } from "../openai-embeddings.ts";

/** A refusal of the files and batches routes, in OpenAI's words (status, type, param, code). */
export class BatchApiError extends Error {
  override readonly name = "BatchApiError";
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

export const notFound = (what: string, id: string): BatchApiError => new BatchApiError(404, `No such ${what}: '${id.slice(0, 100)}'`, "id", "not_found");

export const invalid = (message: string, param: string | null = null, code: string | null = "invalid_value"): BatchApiError =>
  new BatchApiError(400, message, param, code);

function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 429) return "rate_limit_error";
  return status < 500 ? "invalid_request_error" : "server_error";
}

/** Answers any error of these routes as OpenAI does: `{ error: { message, type, param, code } }` and its HTTP status. */
export function sendError(req: Req, res: Res, err: unknown): void {
  if (err instanceof BatchApiError) {
    sendJson(req, res, err.status, { error: { message: err.message, type: errorType(err.status), param: err.param, code: err.code } });
    return;
  }
  const mapped: ConnectError = toConnectError(err);
  const e = openAiErrorFrom(mapped);
  sendJson(req, res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.code } }, hintHeaders(mapped));
}

/** The tenant of the call's API key ("" with keys off); throws UnauthenticatedError or RateLimitedError. */
export function tenantOf(req: Req, keys: ApiKeys): string {
  const header = req.headers["authorization"];
  return keys.authenticate(Array.isArray(header) ? header[0] : header)?.tenant ?? "";
}

/** The query parameters of a request URL. */
export function queryOf(req: Req): URLSearchParams {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  return new URLSearchParams(q < 0 ? "" : url.slice(q + 1));
}

/** `limit` of a list call: an integer in [1, max], `fallback` when absent. */
export function limitOf(q: URLSearchParams, fallback: number, max: number): number {
  const raw = q.get("limit");
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw invalid(`limit: expected an integer from 1 to ${max}`, "limit");
  return n;
}

export const nowSeconds = (): number => Math.floor(Date.now() / 1000);
