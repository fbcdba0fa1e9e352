import { create } from "@bufbuild/protobuf";
import { Code, createContextValues, createHandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { CatalogModel } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { EmbedRequestSchema, EmbedResponseSchema, InferenceService, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { ApiKeySpec } from "../api-keys.ts";
import { callerKey, type Principal, principalKey } from "../auth.ts";
import { checkDimensions } from "../embed-options.ts";
import { echo, PermissionDeniedError, toConnectError } from "../errors.ts";
import { openAiEmbeddingsBody, openAiErrorFrom, parseEmbeddingsRequest } from "../openai-embeddings.ts";
import type { BatchLine } from "./batch-lines.ts";
import type { BatchRecord } from "./batch-records.ts";
import type { LineOutcome } from "./batch-run.ts";

export interface LineCallDeps {
  /** The InferenceService's Embed: the very path `/v1/embeddings` takes. */
  readonly embed: ServiceImpl<typeof InferenceService>["embed"];
  readonly models: ReadonlyMap<string, CatalogModel>;
  /** The configured keys (none: keys off): a batch's lines may use the models its tenant's keys may. */
  readonly apiKeys: readonly ApiKeySpec[];
  readonly timeoutMs: number;
  /** Tries of a request that failed for a passing reason. */
  readonly attempts: number;
}

/** Codes worth another try: the cluster was busy, away or slow, not the request wrong. */
const PASSING = new Set<Code>([Code.Unavailable, Code.DeadlineExceeded, Code.Aborted, Code.ResourceExhausted]);

/**
 * The caller a batch's lines run as: its tenant, on the batch lane, with the models any key of the
 * tenant may use. Token rates are not charged: a batch is paced by its lines in flight and by the
 * batch lane, which yields to interactive calls (docs/batch.md).
 */
function tenantPrincipal(tenant: string, keys: readonly ApiKeySpec[]): Principal {
  const mine = keys.filter((k) => k.tenant === tenant);
  const allows = (model: string): boolean => mine.some((k) => k.models === "*" || k.models.includes(model));
  return {
    tenant,
    lane: Lane.BATCH,
    admin: false,
    allows,
    authorizeModel(model) {
      if (model !== "" && !allows(model)) throw new PermissionDeniedError(`tenant '${tenant}' may not use model '${echo(model)}'`);
    },
    chargeTokens() {},
  };
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/**
 * Runs one line of an embeddings batch as `POST /v1/embeddings` would, on the batch lane: the same
 * request parsing, Embed, response body and OpenAI error (with its HTTP status), so an output line
 * holds exactly what a direct call answers. A busy cluster (admission), a lost worker or a deadline
 * is tried again (up to `attempts`, a busy cluster without limit, after its retry hint).
 */
export function createLineCall(deps: LineCallDeps): (batch: BatchRecord, line: BatchLine, signal: AbortSignal) => Promise<LineOutcome> {
  const principals = new Map<string, Principal>();
  const principalOf = (tenant: string): Principal | undefined => {
    if (deps.apiKeys.length === 0) return undefined;
    const known = principals.get(tenant);
    if (known !== undefined) return known;
    const p = tenantPrincipal(tenant, deps.apiKeys);
    principals.set(tenant, p);
    return p;
  };

  return async (batch, line, signal) => {
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) return { kind: "aborted" };
      try {
        const parsed = parseEmbeddingsRequest(line.body);
        const model = deps.models.get(parsed.model);
        if (model !== undefined && parsed.dimensions !== undefined) checkDimensions(parsed.dimensions, model, "dimensions");
        const request = create(EmbedRequestSchema, {
          model: parsed.model,
          inputs: parsed.inputs,
          lane: Lane.BATCH,
          options: { encoding: VectorEncoding.FLOAT32_LE, dimensions: parsed.dimensions, inputType: parsed.inputType },
        });
        const principal = principalOf(batch.tenant);
        const ctx = createHandlerContext({
          service: InferenceService,
          method: InferenceService.method.embed,
          protocolName: "batch",
          requestMethod: "POST",
          url: batch.endpoint,
          requestSignal: signal,
          timeoutMs: deps.timeoutMs,
          contextValues: createContextValues().set(principalKey, principal).set(callerKey, `batch:${batch.id}`),
        });
        const out = create(EmbedResponseSchema, await deps.embed(request, ctx));
        return { kind: "response", statusCode: 200, body: openAiEmbeddingsBody(out, parsed.base64) };
      } catch (err) {
        if (signal.aborted) return { kind: "aborted" };
        const e = toConnectError(err);
        const hinted = Number(e.metadata.get("retry-after-ms") ?? "");
        // Admission's refusals carry a hint and clear as the lane drains: tried until they pass.
        if (PASSING.has(e.code) && ((e.code === Code.ResourceExhausted && hinted > 0) || attempt < deps.attempts)) {
          await sleep(Number.isFinite(hinted) && hinted > 0 ? hinted : Math.min(10_000, 250 * 2 ** (attempt - 1)), signal);
          continue;
        }
        const o = openAiErrorFrom(e);
        return { kind: "response", statusCode: o.status, body: { error: { message: o.message, type: o.type, param: o.param, code: o.code } } };
      }
    }
  };
}
