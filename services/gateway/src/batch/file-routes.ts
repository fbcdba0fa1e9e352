import type * as http from "node:http";
import busboy from "busboy";
import type { Readable } from "node:stream";
import type { Req, Res } from "../http-types.ts";
import { writeHead } from "../http-types.ts";
import { sendJson } from "../http-call.ts";
import { CHUNK_BYTES } from "./batch-config.ts";
import { BatchApiError, invalid, limitOf, notFound, nowSeconds, queryOf } from "./batch-http.ts";
import { fileObject, page } from "./batch-objects.ts";
import { type ChunkRef, encodeRecord, type FileRecord, newFileId, stateKey } from "./batch-records.ts";
import type { BatchStore } from "./batch-store.ts";

export interface FileRoutesDeps {
  readonly store: BatchStore;
  readonly maxFileBytes: number;
  readonly retentionMs: number;
}

interface Upload {
  purpose: string | undefined;
  filename: string;
  bytes: number;
  chunks: ChunkRef[];
  seen: boolean;
}

/**
 * Reads a multipart upload (busboy): the `purpose` field and the `file` part, whose bytes go to the
 * files topic in chunks as they arrive (the upload is never whole in memory).
 */
function readUpload(req: Req, fileId: string, deps: FileRoutesDeps): Promise<Upload> {
  const type = req.headers["content-type"] ?? "";
  if (!/^multipart\/form-data/i.test(type)) throw invalid("content-type must be multipart/form-data (fields: purpose, file)", null, "unsupported_media_type");
  const upload: Upload = { purpose: undefined, filename: "", bytes: 0, chunks: [], seen: false };
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers as http.IncomingHttpHeaders,
        limits: { fileSize: deps.maxFileBytes, files: 1, fields: 8, fieldSize: 1024, parts: 10 },
      });
    } catch (err) {
      reject(invalid(`malformed multipart body: ${(err as Error).message}`));
      return;
    }
    let filing: Promise<void> = Promise.resolve();
    bb.on("field", (name, value) => {
      if (name === "purpose") upload.purpose = value;
    });
    bb.on("file", (name, stream: Readable & { truncated?: boolean }, info) => {
      if (name !== "file" || upload.seen) {
        stream.resume();
        return;
      }
      upload.seen = true;
      upload.filename = info.filename ?? "upload.jsonl";
      filing = (async () => {
        let pending: Buffer[] = [];
        let size = 0;
        const put = async (bytes: Buffer): Promise<void> => {
          upload.chunks.push(await deps.store.writeChunk(`${fileId}/${upload.chunks.length}`, bytes));
        };
        for await (const data of stream as AsyncIterable<Buffer>) {
          upload.bytes += data.length;
          pending.push(data);
          size += data.length;
          while (size >= CHUNK_BYTES) {
            const all = Buffer.concat(pending);
            await put(all.subarray(0, CHUNK_BYTES));
            pending = [all.subarray(CHUNK_BYTES)];
            size = all.length - CHUNK_BYTES;
          }
        }
        if (stream.truncated === true) throw new BatchApiError(413, `file exceeds the limit of ${deps.maxFileBytes} bytes`, "file", "file_too_large");
        if (size > 0) await put(Buffer.concat(pending));
      })();
      filing.catch(() => undefined);
    });
    bb.on("error", (err: unknown) => reject(invalid(`malformed multipart body: ${(err as Error).message}`)));
    bb.on("close", () => {
      filing.then(() => resolve(upload), reject);
    });
    req.once("aborted", () => reject(new BatchApiError(400, "upload aborted", "file", "upload_aborted")));
    (req as NodeJS.ReadableStream).pipe(bb);
  });
}

/** `/v1/files…`: upload, list, retrieve, content, delete; a tenant sees its own files only. */
export async function serveFiles(req: Req, res: Res, tenant: string, rest: string[], deps: FileRoutesDeps): Promise<void> {
  const state = deps.store.state;
  const now = nowSeconds();
  const [id, sub, ...extra] = rest;
  const method = req.method ?? "GET";
  if (id === undefined) {
    if (method === "POST") {
      const fileId = newFileId();
      const upload = await readUpload(req, fileId, deps);
      if (upload.purpose !== "batch") throw invalid(`purpose: Shoal takes 'batch' files only (got ${JSON.stringify(upload.purpose ?? null)})`, "purpose");
      if (!upload.seen) throw invalid("file: a file part is required", "file", "missing_required_parameter");
      const record: FileRecord = {
        v: 1,
        id: fileId,
        tenant,
        filename: upload.filename.slice(0, 256),
        purpose: "batch",
        bytes: upload.bytes,
        createdAt: now,
        expiresAt: now + Math.floor(deps.retentionMs / 1000),
        chunks: upload.chunks,
      };
      await deps.store.write(stateKey("file", fileId), encodeRecord(record));
      return sendJson(req, res, 200, fileObject(record));
    }
    if (method !== "GET") throw new BatchApiError(405, "use GET or POST", null, "method_not_allowed");
    const q = queryOf(req);
    const purpose = q.get("purpose");
    let files = state.filesOf(tenant, now).filter((f) => purpose === null || f.purpose === purpose);
    if (q.get("order") === "asc") files = files.reverse();
    const { data, hasMore } = page(files, q.get("after") ?? undefined, limitOf(q, 10_000, 10_000));
    return sendJson(req, res, 200, {
      object: "list",
      data: data.map(fileObject),
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: hasMore,
    });
  }
  let file = state.fileOf(tenant, id, now);
  if (file === undefined) {
    await deps.store.catchUp();
    file = state.fileOf(tenant, id, now);
  }
  if (file === undefined || extra.length > 0 || (sub !== undefined && sub !== "content")) throw notFound("file", id);
  if (sub === "content") {
    if (method !== "GET") throw new BatchApiError(405, "use GET", null, "method_not_allowed");
    return streamContent(res, file.bytes, deps.store.readChunks(file.chunks));
  }
  if (method === "GET") return sendJson(req, res, 200, fileObject(file));
  if (method !== "DELETE") throw new BatchApiError(405, "use GET or DELETE", null, "method_not_allowed");
  // An upload's record is removed; a result file has none, so a marker hides it.
  await deps.store.write(stateKey("file", id), file.purpose === "batch" ? null : Buffer.from(JSON.stringify({ v: 1, deleted: true })));
  return sendJson(req, res, 200, { id, object: "file", deleted: true });
}

/** Writes a file's bytes as they are read back, chunk by chunk, waiting for the client to take each. */
async function streamContent(res: Res, bytes: number, chunks: AsyncGenerator<Buffer>): Promise<void> {
  const out = res as http.ServerResponse;
  let started = false;
  try {
    for await (const chunk of chunks) {
      if (!started) {
        writeHead(res, 200, { "content-type": "application/octet-stream", "content-length": String(bytes) });
        started = true;
      }
      if (!out.write(chunk)) await new Promise((r) => out.once("drain", r));
    }
    if (!started) writeHead(res, 200, { "content-type": "application/octet-stream", "content-length": "0" });
    out.end();
  } catch (err) {
    // Headers sent: the length promised cannot be kept; the cut connection says so.
    if (started) out.destroy(err as Error);
    else throw err;
  }
}
