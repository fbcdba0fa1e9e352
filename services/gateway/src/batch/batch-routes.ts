import { isJsonObject } from "@shoal/common";
import { readJsonRequest, sendJson } from "../http-call.ts";
import type { Req, Res } from "../http-types.ts";
import { BatchApiError, invalid, limitOf, notFound, nowSeconds, queryOf } from "./batch-http.ts";
import { BATCH_ENDPOINTS } from "./batch-lines.ts";
import { batchObject, page } from "./batch-objects.ts";
import { type BatchRecord, type CancelRecord, encodeRecord, newBatchId, stateKey } from "./batch-records.ts";
import { isOpen } from "./batch-state.ts";
import type { BatchStore } from "./batch-store.ts";

export interface BatchRoutesDeps {
  readonly store: BatchStore;
  /** Batches not yet final one tenant may have. */
  readonly maxOpenPerTenant: number;
}

/** OpenAI's only completion window, in seconds. */
const WINDOW_S = 24 * 3600;
const BODY_LIMIT = 64 * 1024;

/** OpenAI's metadata rules: at most 16 pairs, keys up to 64 characters, string values up to 512. */
function metadataOf(raw: unknown): Record<string, string> | null {
  if (raw === undefined || raw === null) return null;
  if (!isJsonObject(raw)) throw invalid("metadata: expected an object of strings", "metadata");
  const entries = Object.entries(raw);
  if (entries.length > 16) throw invalid("metadata: at most 16 keys", "metadata");
  for (const [k, v] of entries) {
    if (k.length > 64 || typeof v !== "string" || v.length > 512)
      throw invalid("metadata: keys of at most 64 characters, string values of at most 512", "metadata");
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

async function create(req: Req, res: Res, tenant: string, deps: BatchRoutesDeps): Promise<void> {
  const body = await readJsonRequest(req, BODY_LIMIT);
  if (!isJsonObject(body)) throw invalid("request body must be a JSON object");
  const inputFileId = body["input_file_id"];
  if (typeof inputFileId !== "string" || inputFileId === "") throw invalid("input_file_id: required string", "input_file_id", "missing_required_parameter");
  const endpoint = body["endpoint"];
  if (typeof endpoint !== "string" || !BATCH_ENDPOINTS.includes(endpoint)) {
    throw invalid(`endpoint: Shoal runs batches of ${BATCH_ENDPOINTS.join(", ")}`, "endpoint", "unsupported_value");
  }
  if (body["completion_window"] !== "24h") throw invalid("completion_window: only '24h' is supported", "completion_window", "unsupported_value");
  const metadata = metadataOf(body["metadata"]);
  const now = nowSeconds();
  let file = deps.store.state.fileOf(tenant, inputFileId, now);
  if (file === undefined) {
    await deps.store.catchUp();
    file = deps.store.state.fileOf(tenant, inputFileId, now);
  }
  if (file === undefined) throw new BatchApiError(404, `No such file: '${inputFileId.slice(0, 100)}'`, "input_file_id", "not_found");
  if (file.purpose !== "batch") throw invalid(`input_file_id: file ${inputFileId} has purpose '${file.purpose}', not 'batch'`, "input_file_id");
  const open = deps.store.state.openBatchesOf(tenant);
  if (open >= deps.maxOpenPerTenant) {
    throw new BatchApiError(
      429,
      `this API key's tenant has ${open} batches not yet finished, the most allowed (SHOAL_BATCH_MAX_OPEN); wait for one to end`,
      null,
      "too_many_open_batches",
    );
  }
  const id = newBatchId();
  const record: BatchRecord = { v: 1, id, tenant, endpoint, inputFileId, completionWindow: "24h", createdAt: now, expiresAt: now + WINDOW_S, metadata };
  await deps.store.write(stateKey("batch", id), encodeRecord(record));
  const view = deps.store.state.batchOf(tenant, id);
  if (view === undefined) throw new Error(`batch ${id} written but not applied`);
  sendJson(req, res, 200, batchObject(view));
}

/** `/v1/batches…`: create, list, retrieve, cancel; a tenant sees its own batches only. */
export async function serveBatches(req: Req, res: Res, tenant: string, rest: string[], deps: BatchRoutesDeps): Promise<void> {
  const state = deps.store.state;
  const [id, sub, ...extra] = rest;
  const method = req.method ?? "GET";
  if (id === undefined) {
    if (method === "POST") return create(req, res, tenant, deps);
    if (method !== "GET") throw new BatchApiError(405, "use GET or POST", null, "method_not_allowed");
    const q = queryOf(req);
    const all = state.batchesOf(tenant).map((v) => ({ id: v.batch.id, view: v }));
    const { data, hasMore } = page(all, q.get("after") ?? undefined, limitOf(q, 20, 100));
    return sendJson(req, res, 200, {
      object: "list",
      data: data.map((d) => batchObject(d.view)),
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: hasMore,
    });
  }
  let view = state.batchOf(tenant, id);
  if (view === undefined) {
    await deps.store.catchUp();
    view = state.batchOf(tenant, id);
  }
  if (view === undefined || extra.length > 0 || (sub !== undefined && sub !== "cancel")) throw notFound("batch", id);
  if (sub === undefined) {
    if (method !== "GET") throw new BatchApiError(405, "use GET", null, "method_not_allowed");
    return sendJson(req, res, 200, batchObject(view));
  }
  if (method !== "POST") throw new BatchApiError(405, "use POST", null, "method_not_allowed");
  if (!isOpen(view)) throw invalid(`Cannot cancel a batch with status '${view.progress?.status ?? "validating"}'.`, null, "batch_not_cancellable");
  if (view.cancel === undefined) {
    const cancel: CancelRecord = { v: 1, cancellingAt: nowSeconds() };
    await deps.store.write(stateKey("cancel", id), encodeRecord(cancel));
  }
  return sendJson(req, res, 200, batchObject(state.batchOf(tenant, id) ?? view));
}
