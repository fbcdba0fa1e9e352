import { fail } from "node:assert/strict";
import { type Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { ClusterService } from "@shoal/gen/shoal/v1/cluster_pb.ts";

export type Protocol = "connect" | "connect-json" | "grpc";

/** Connect-node clients for one gateway URL over the given protocol. */
export function clientsFor(
  baseUrl: string,
  protocol: Protocol,
): {
  inference: Client<typeof InferenceService>;
  models: Client<typeof ModelService>;
  cluster: Client<typeof ClusterService>;
} {
  const transport =
    protocol === "grpc" ? createGrpcTransport({ baseUrl }) : createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: protocol === "connect" });
  return {
    inference: createClient(InferenceService, transport),
    models: createClient(ModelService, transport),
    cluster: createClient(ClusterService, transport),
  };
}

/** A Connect (HTTP/1.1) InferenceService client that sends `Authorization: Bearer <key>` on every call. */
export function keyedInference(baseUrl: string, key: string): Client<typeof InferenceService> {
  const transport = createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${key}`);
        return next(req);
      },
    ],
  });
  return createClient(InferenceService, transport);
}

/** Euclidean norm of a vector. */
export function norm(v: readonly number[]): number {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}

/** Largest absolute element-wise difference. */
export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) return Number.POSITIVE_INFINITY;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** The code and message of a call that must fail (the test fails if it succeeds). */
export async function codeOf(p: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
  fail("expected the call to fail");
}
