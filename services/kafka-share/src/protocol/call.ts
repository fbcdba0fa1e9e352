/**
 * Sends one request of a generated API over a @platformatic/kafka Connection. The connection does
 * framing, correlation ids, timeouts and TLS/SASL; the generated ApiSpec does the body. Responses
 * are returned as decoded, error codes and all: acting on them is the caller's business (the
 * library's own APIs do not throw on a non-zero code the way platformatic's built-in ones do).
 */
import { Writer, type Connection } from "@platformatic/kafka";
import type { ApiSpec } from "../generated/runtime.ts";

export function call<Req, Res>(connection: Connection, api: ApiSpec<Req, Res>, version: number, request: Req): Promise<Res> {
  const flexible = api.isFlexible(version);
  return new Promise<Res>((resolve, reject) => {
    connection.send<Res>(
      api.apiKey,
      version,
      () => api.encodeRequest(Writer.create(), version, request),
      (_correlationId, _apiKey, apiVersion, reader) => api.decodeResponse(reader, apiVersion),
      flexible,
      flexible,
      (err, res) => (err ? reject(err) : resolve(res as Res)),
    );
  });
}
