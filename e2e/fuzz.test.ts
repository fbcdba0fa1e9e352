/**
 * Seeded, bounded fuzzing of every way into the gateway and the worker: Connect JSON and binary,
 * gRPC-Web and gRPC (raw HTTP/2 streams and a real client with random field values), raw bytes on
 * the TCP port, and random or mutated records on the jobs topics and the gateway's reply topic
 * (a tenth of the job records name a legal reply topic that does not exist).
 * Each case must end, in time, with a valid Connect/gRPC status (or a clean 4xx off the RPC
 * paths); afterwards both processes are alive, serve a normal Embed and are back near their
 * memory baseline. Reproduce a run with SHOAL_FUZZ_SEED=<seed printed>; SHOAL_FUZZ_SCALE=0.1
 * runs a tenth of the cases.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http2 from "node:http2";
import net from "node:net";
import { gzipSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { codeFromString, codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Kafka, logLevel } from "kafkajs";
import { decodeEnvelope, encodeEnvelope, encodeResult, jobsTopic, replyTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { EmbedRequestSchema, InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { JobEnvelopeSchema, JobResultSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { GetModelRequestSchema, ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { kafkaBrokers, startCluster, type TestCluster, workerMetricsUrl } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total as metricTotal } from "./harness/prometheus.ts";

// A fixed seed (printed), so a failure replays; SHOAL_FUZZ_SEED overrides it.
const SEED = Number(process.env["SHOAL_FUZZ_SEED"] ?? 19_0_2026);
const SCALE = Number(process.env["SHOAL_FUZZ_SCALE"] ?? "1");
/** `kind#index` (as failures print them): replays that one case, printing what it sends. */
const ONLY = process.env["SHOAL_FUZZ_CASE"];
const COUNTS = {
  "connect-json": 3_000,
  "connect-proto": 1_800,
  "grpc-web": 400,
  "grpc-h2": 1_800,
  "grpc-client": 1_000,
  "tcp-raw": 300,
  "kafka-jobs": 1_200,
  "kafka-replies": 500,
} as const;
type Kind = keyof typeof COUNTS;
const CASE_TIMEOUT_MS = 20_000; // > SHOAL_MAX_TIMEOUT_MS: a call still open past it hangs
const CONCURRENCY = 24;
const MAX_REQUEST_BYTES = 64 * 1024;
const KEY = `sk-fuzz-${randomBytes(12).toString("hex")}`;
const TIGHT_KEY = `sk-tight-${randomBytes(12).toString("hex")}`;
/**
 * Leaks of JS objects show in the gateway's JS heap (it stays within a few MB across the 10,000
 * cases); RSS also keeps native buffers the allocator retains after the burst (120–160 MB on
 * Node 24 with the heap flat), so its bound only catches native leaks of a larger scale.
 */
const HEAP_GROWTH_LIMIT_MB = 40;
const RSS_GROWTH_LIMIT_MB = 250;

// ---------------------------------------------------------------- seeded randomness

/** sfc32: small, fast, seedable; one stream per case so cases reproduce in any order. */
class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d = 1;
  constructor(seed: number, stream: number) {
    this.a = seed >>> 0;
    this.b = (stream * 0x9e3779b9) >>> 0;
    this.c = 0xdeadbeef ^ seed;
    for (let i = 0; i < 12; i++) this.u32();
  }
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }
  /** [0, n) */
  int(n: number): number {
    return Math.floor((this.u32() / 2 ** 32) * n);
  }
  chance(p: number): boolean {
    return this.u32() / 2 ** 32 < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

const WORDS = [
  "fish",
  "shoal",
  "harbour",
  "the",
  "a",
  "quarterly",
  "revenue",
  "silver",
  "turned",
  "κόσμος",
  "世界",
  "мир",
  "😀",
  "🐟🐠",
  "naïve",
  "e\u0301",
  "\u200b",
  "\u202e",
  "𠀀𠀁",
  "\u0000",
  "\t",
  "\ud800",
  "\udfff",
  "null",
  "<script>",
  "' OR 1=1 --",
  "%s%n",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal hostile input (Log4Shell lookup syntax) the fuzzer sends on purpose
  "${jndi:x}",
];

function text(r: Rng, maxChars = 300): string {
  if (r.chance(0.05)) return "";
  if (r.chance(0.05)) return " \t\n ";
  if (r.chance(0.04)) return "x".repeat(1_900 + r.int(300)); // around SHOAL_MAX_INPUT_CHARS
  if (r.chance(0.1)) return String.fromCharCode(...Array.from({ length: 1 + r.int(40) }, () => r.int(0x10000)));
  const words = Array.from({ length: 1 + r.int(Math.max(1, maxChars / 6)) }, () => r.pick(WORDS));
  return words.join(r.chance(0.8) ? " " : "").slice(0, maxChars);
}

function randomJson(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 6 : 8)) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.pick([0, -1, 1.5, 1e308, -1e-308, 2 ** 53 + 1, 4294967296, -2147483649]);
    case 3:
      return text(r, 60);
    case 4:
      return r.pick(["LANE_BATCH", "LANE_INTERACTIVE", "LANE_NOPE", "VECTOR_ENCODING_FLOAT32_LE", "NaN", "Infinity", "1e3", "-0"]);
    case 5:
      return "";
    case 6:
      return Array.from({ length: r.int(6) }, () => randomJson(r, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: r.int(5) }, () => [
          r.pick(["model", "inputs", "options", "lane", "id", "normalize", "truncate", "encoding", "@type", "__proto__", "constructor", text(r, 10)]),
          randomJson(r, depth + 1),
        ]),
      );
  }
}

/** A valid Embed request body in Connect JSON (sometimes with proto field names or enum numbers). */
function validEmbedJson(r: Rng, models: readonly string[]): Record<string, unknown> {
  const body: Record<string, unknown> = { model: r.pick(models), inputs: Array.from({ length: 1 + r.int(4) }, () => text(r, 80).trim() || "fish") };
  if (r.chance(0.4))
    body["options"] = { normalize: r.chance(0.5), truncate: r.chance(0.7), encoding: r.pick(["VECTOR_ENCODING_FLOAT", "VECTOR_ENCODING_FLOAT32_LE", 2, 0]) };
  if (r.chance(0.3)) body["lane"] = r.pick(["LANE_BATCH", "LANE_INTERACTIVE", 1, 2]);
  return body;
}

/** Structural mutations of a JSON value, then sometimes byte mutations of its text. */
function mutateJson(r: Rng, value: Record<string, unknown>): Record<string, unknown> {
  const v: Record<string, unknown> = structuredClone(value);
  for (let n = 1 + r.int(3); n > 0; n--) {
    const key = r.pick(["model", "inputs", "options", "lane", text(r, 12)]);
    switch (r.int(8)) {
      case 0:
        delete v[key];
        break;
      case 1:
        v[key] = randomJson(r);
        break;
      case 2:
        v["inputs"] = Array.from({ length: r.int(40) }, () => text(r, 200));
        break;
      case 3:
        v["inputs"] = [...((Array.isArray(v["inputs"]) ? v["inputs"] : []) as unknown[]), randomJson(r)];
        break;
      case 4:
        v["model"] = r.pick(["", "no-such-model", text(r, 30), "shoal-tiny-embed ", "SHOAL-TINY-EMBED"]);
        break;
      case 5:
        v["options"] = randomJson(r);
        break;
      case 6:
        v["lane"] = r.pick([99, -1, "LANE_UNSPECIFIED", 1.5, "2"]);
        break;
      default: {
        let nest: unknown = randomJson(r, 4);
        for (let i = 0; i < 50 + r.int(200); i++) nest = [nest];
        v[key] = nest;
      }
    }
  }
  return v;
}

function mutateBytes(r: Rng, input: Uint8Array): Buffer {
  let b = Buffer.from(input);
  for (let n = 1 + r.int(4); n > 0; n--) {
    const at = b.length === 0 ? 0 : r.int(b.length);
    switch (r.int(6)) {
      case 0:
        if (b.length > 0) b[at] = b[at]! ^ (1 << r.int(8));
        break;
      case 1:
        if (b.length > 0) b[at] = r.pick([0x00, 0xff, 0x7f, 0x80, 0x22, 0x5c, 0x7b]);
        break;
      case 2:
        b = Buffer.concat([b.subarray(0, at), r.bytes(1 + r.int(16)), b.subarray(at)]);
        break;
      case 3:
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + r.int(16)))]);
        break;
      case 4:
        b = b.subarray(0, at);
        break;
      default:
        b = Buffer.concat([b, b.subarray(at, at + r.int(64))]);
    }
  }
  return b;
}

/** Protobuf bytes: a valid message with random values, a mutation of one, a crafted oddity or noise. */
function protoBody(r: Rng, method: string, models: readonly string[]): Buffer {
  const valid = (): Uint8Array =>
    method === "GetModel"
      ? toBinary(GetModelRequestSchema, create(GetModelRequestSchema, { id: r.chance(0.7) ? r.pick(models) : text(r, 20) }))
      : toBinary(
          EmbedRequestSchema,
          create(EmbedRequestSchema, {
            model: r.chance(0.85) ? r.pick(models) : text(r, 20),
            inputs: Array.from({ length: r.int(r.chance(0.1) ? 30 : 4) }, () => text(r, 100)),
            options: r.chance(0.5) ? { truncate: r.chance(0.7), encoding: r.int(4), ...(r.chance(0.5) ? { normalize: r.chance(0.5) } : {}) } : undefined,
            lane: r.pick([0, 1, 2, 7]),
          }),
        );
  switch (r.int(6)) {
    case 0:
    case 1:
      return Buffer.from(valid());
    case 2:
    case 3:
      return mutateBytes(r, valid());
    case 4:
      // Wire-format oddities: a length larger than the message, a group, a huge varint, fixed64, field 0.
      return r.pick([
        Buffer.from([0x12, 0xff, 0xff, 0xff, 0x7f, 0x61]),
        Buffer.from([0x0b, 0x0c]),
        Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        Buffer.concat([Buffer.from([0x0a, 0x04]), Buffer.from("tiny"), Buffer.from([0x21]), r.bytes(8)]),
        Buffer.from([0x00, 0x00]),
        Buffer.concat([Buffer.from([0x1a, 0x80, 0x01]), Buffer.alloc(128, 0x1a)]),
      ]);
    default:
      return r.bytes(r.int(r.chance(0.05) ? MAX_REQUEST_BYTES + 1024 : 400));
  }
}

// ---------------------------------------------------------------- outcome bookkeeping

interface Tally {
  readonly counts: Map<Kind, number>;
  /** Slowest case per kind, ms. */
  readonly slowest: Map<Kind, number>;
  readonly histogram: Map<string, number>;
  readonly failures: string[];
}

function record(t: Tally, kind: Kind, label: string, failure?: string): void {
  t.counts.set(kind, (t.counts.get(kind) ?? 0) + 1);
  const key = `${kind} ${label}`;
  t.histogram.set(key, (t.histogram.get(key) ?? 0) + 1);
  if (failure !== undefined && t.failures.length < 200) t.failures.push(`${kind}: ${failure}`);
}

/**
 * Internal answers Connect-ES gives to malformed protocol input before any Shoal code runs (as
 * grpc-go does): undecodable protobuf, a compressed flag without grpc-encoding. Nothing else may
 * be Internal or Unknown.
 */
function internalAllowed(message: string): boolean {
  return /^(parse binary|received compressed envelope|decompression failed)/.test(message);
}

const RPC_PATHS = [
  "/shoal.v1.InferenceService/Embed",
  "/shoal.v1.InferenceService/Embed",
  "/shoal.v1.InferenceService/Embed",
  "/shoal.v1.ModelService/ListModels",
  "/shoal.v1.ModelService/GetModel",
  "/grpc.health.v1.Health/Check",
];
const OTHER_PATHS = [
  "/shoal.v1.InferenceService/Nope",
  "/nope",
  "/",
  "/metrics",
  "/healthz",
  "/readyz",
  "/v1/embeddings",
  "/v2/embed",
  "/v1/rerank",
  "/embed",
  "/rerank",
  "/tokenize",
  "/info",
  "/console/",
  "/console/%2e%2e/%2e%2e/etc/passwd",
  "/console/..%2f..%2f..%2fpackage.json",
  "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
  "//x",
  "/shoal.v1.InferenceService/Embed/extra",
];

function authHeader(r: Rng): Record<string, string> {
  const roll = r.int(20);
  if (roll < 14) return { authorization: `Bearer ${KEY}` };
  if (roll < 15) return { authorization: `Bearer ${TIGHT_KEY}` };
  if (roll < 16) return {};
  if (roll < 17) return { authorization: `Bearer ${KEY.slice(0, -1)}x` };
  if (roll < 18) return { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` };
  if (roll < 19) return { authorization: "Bearer" };
  return { authorization: `Bearer ${"A".repeat(1 + r.int(2_000))}` };
}

function extraHeaders(r: Rng): Record<string, string> {
  const h: Record<string, string> = {};
  if (r.chance(0.2)) h["connect-timeout-ms"] = r.pick(["1", "50", "5000", "99999999999", "-1", "abc", "0", "1.5"]);
  if (r.chance(0.1)) h["connect-protocol-version"] = r.pick(["1", "2", ""]);
  if (r.chance(0.1))
    h["traceparent"] = r.pick([
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      "garbage",
      "ff-00000000000000000000000000000000-0000000000000000-00",
      `00-${"z".repeat(32)}-${"1".repeat(16)}-01`,
    ]);
  if (r.chance(0.05)) h["grpc-timeout"] = r.pick(["1S", "100m", "xyz", "99999999H"]);
  if (r.chance(0.1)) h[`x-fuzz-${r.int(1000)}`] = "v".repeat(r.int(200));
  return h;
}

// ---------------------------------------------------------------- HTTP/1.1 cases (fetch)

function validConnectError(status: number, body: Buffer): { label: string; failure?: string } {
  let parsed: { code?: unknown; message?: unknown };
  try {
    parsed = JSON.parse(body.toString("utf8")) as { code?: unknown; message?: unknown };
  } catch {
    return { label: `${status} unparseable`, failure: `HTTP ${status} with a body that is not a Connect error: ${body.subarray(0, 120).toString()}` };
  }
  const code = typeof parsed.code === "string" ? codeFromString(parsed.code) : undefined;
  if (code === undefined) return { label: `${status} no-code`, failure: `HTTP ${status}: no Connect code in ${body.subarray(0, 120).toString()}` };
  if (codeToHttpStatus(code) !== status)
    return { label: `${status} ${parsed.code as string}`, failure: `HTTP ${status} does not match code ${parsed.code as string}` };
  const message = typeof parsed.message === "string" ? parsed.message : "";
  if ((code === Code.Internal || code === Code.Unknown) && !internalAllowed(message)) {
    return { label: `${status} ${parsed.code as string}`, failure: `unexpected ${parsed.code as string}: ${message}` };
  }
  return { label: `${status} ${parsed.code as string}` };
}

/** gRPC-Web over HTTP/1.1: the status is in a trailer frame (flag 0x80) at the end of the body. */
function grpcWebStatus(status: number, headers: Headers, body: Buffer): { label: string; failure?: string } {
  let grpcStatus = headers.get("grpc-status");
  let grpcMessage = headers.get("grpc-message") ?? "";
  for (let at = 0; grpcStatus === null && at + 5 <= body.length; ) {
    const len = body.readUInt32BE(at + 1);
    if ((body[at]! & 0x80) !== 0) {
      const trailer = body.subarray(at + 5, at + 5 + len).toString();
      grpcStatus = /grpc-status:\s*(\d+)/i.exec(trailer)?.[1] ?? null;
      grpcMessage = /grpc-message:\s*([^\r\n]*)/i.exec(trailer)?.[1] ?? "";
    }
    at += 5 + len;
  }
  if (status !== 200) return status < 500 ? { label: `http ${status}` } : { label: `http ${status}`, failure: `gRPC-Web HTTP ${status}` };
  return grpcStatusOutcome(grpcStatus, grpcMessage);
}

function grpcStatusOutcome(grpcStatus: string | null, grpcMessage: string): { label: string; failure?: string } {
  const n = grpcStatus === null ? Number.NaN : Number(grpcStatus);
  if (!Number.isInteger(n) || n < 0 || n > 16) return { label: "no-status", failure: `no valid grpc-status (${String(grpcStatus)})` };
  const message = decodeURIComponent(grpcMessage);
  if ((n === Code.Internal || n === Code.Unknown) && !internalAllowed(message))
    return { label: Code[n] ?? String(n), failure: `unexpected ${Code[n]}: ${message}` };
  return { label: n === 0 ? "OK" : (Code[n] ?? String(n)) };
}

async function httpCase(
  base: string,
  kind: "connect-json" | "connect-proto" | "grpc-web",
  r: Rng,
  models: readonly string[],
): Promise<{ label: string; failure?: string }> {
  const rpc = r.chance(0.9);
  const path = rpc ? r.pick(RPC_PATHS) : r.pick(OTHER_PATHS);
  const method = r.chance(0.95) ? "POST" : r.pick(["GET", "PUT", "DELETE", "PATCH"]);
  const headers: Record<string, string> = { ...authHeader(r), ...extraHeaders(r) };
  let body: Buffer;
  if (kind === "connect-json") {
    headers["content-type"] = r.chance(0.9)
      ? r.pick(["application/json", "application/json", "application/json; charset=utf-8"])
      : r.pick(["text/plain", "application/proto", "application/connect+json", "application/json; charset=latin1", "", "application/x-www-form-urlencoded"]);
    const roll = r.int(10);
    const json = roll < 3 ? validEmbedJson(r, models) : roll < 7 ? mutateJson(r, validEmbedJson(r, models)) : (randomJson(r) as Record<string, unknown>);
    body = Buffer.from(JSON.stringify(json) ?? "null");
    if (r.chance(0.2)) body = mutateBytes(r, body);
    if (r.chance(0.03)) body = Buffer.concat([Buffer.from('{"model":"x","inputs":["'), Buffer.alloc(MAX_REQUEST_BYTES, 0x61), Buffer.from('"]}')]);
  } else {
    headers["content-type"] =
      kind === "grpc-web"
        ? r.pick(["application/grpc-web+proto", "application/grpc-web", "application/grpc-web+json", "application/grpc-web-text"])
        : r.chance(0.92)
          ? "application/proto"
          : r.pick(["application/json", "application/octet-stream", "application/connect+proto"]);
    const payload = protoBody(r, path.endsWith("/GetModel") ? "GetModel" : "Embed", models);
    if (kind === "grpc-web") {
      const prefix = Buffer.alloc(5);
      prefix[0] = r.chance(0.9) ? 0 : r.pick([1, 0x80, 0xff]);
      prefix.writeUInt32BE(r.chance(0.9) ? payload.length : r.int(2 ** 32), 1);
      body = r.chance(0.9) ? Buffer.concat([prefix, payload]) : mutateBytes(r, Buffer.concat([prefix, payload]));
    } else body = payload;
  }
  if (r.chance(0.05)) {
    headers["content-encoding"] = r.pick(["gzip", "br", "x-nope"]);
    if (headers["content-encoding"] === "gzip" && r.chance(0.7)) body = gzipSync(body);
  }
  const request = `[${method} ${path} ${headers["content-type"]} ${headers["content-encoding"] ?? ""} ${body.length} B]`;
  if (ONLY !== undefined) console.error({ method, path, headers, body: body.toString(kind === "connect-json" ? "utf8" : "hex") });
  let res: Response;
  let resBody: Buffer;
  try {
    res = await fetch(`${base}${path}`, { method, headers, ...(method === "GET" ? {} : { body }), signal: AbortSignal.timeout(CASE_TIMEOUT_MS) });
    resBody = Buffer.from(await res.arrayBuffer());
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    throw Object.assign(new Error(`${e.message} (${e.cause?.code ?? "?"}) ${request}`, { cause: e.cause }), { name: e.name });
  }
  const described = (o: { label: string; failure?: string }): { label: string; failure?: string } =>
    o.failure === undefined ? o : { ...o, failure: `${o.failure} ${request}` };
  return described(judgeHttp(kind, path, res, resBody));
}

/** The Cohere and TEI routes: each answers an error in its own dialect's shape. */
const PEER_BODIES: Record<string, { name: string; errorShape: (b: Record<string, unknown>) => boolean }> = {
  "/v2/embed": { name: "cohere", errorShape: (b) => typeof b["message"] === "string" },
  "/v1/rerank": { name: "cohere", errorShape: (b) => typeof b["message"] === "string" },
  "/embed": { name: "tei", errorShape: (b) => typeof b["error"] === "string" && typeof b["error_type"] === "string" },
  "/rerank": { name: "tei", errorShape: (b) => typeof b["error"] === "string" && typeof b["error_type"] === "string" },
  "/tokenize": { name: "tei", errorShape: (b) => typeof b["error"] === "string" && typeof b["error_type"] === "string" },
  "/info": { name: "tei", errorShape: (b) => typeof b["error"] === "string" && typeof b["error_type"] === "string" },
};

function judgeHttp(kind: "connect-json" | "connect-proto" | "grpc-web", path: string, res: Response, resBody: Buffer): { label: string; failure?: string } {
  const contentType = res.headers.get("content-type") ?? "";
  if (path === "/v1/embeddings") {
    if (res.status === 200) return { label: "openai 200" };
    const e = (JSON.parse(resBody.toString() || "{}") as { error?: { type?: string } }).error;
    if (e?.type === undefined) return { label: `openai ${res.status}`, failure: `OpenAI endpoint HTTP ${res.status} without an error body` };
    return res.status >= 500 ? { label: `openai ${res.status}`, failure: `OpenAI endpoint HTTP ${res.status}` } : { label: `openai ${res.status}` };
  }
  const peer = PEER_BODIES[path];
  if (peer !== undefined) {
    const label = `${peer.name} ${res.status}`;
    if (res.status === 200) return { label };
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(resBody.toString() || "{}") as Record<string, unknown>;
    } catch {}
    if (!peer.errorShape(body)) return { label, failure: `${peer.name} HTTP ${res.status} without its error body` };
    return res.status >= 500 ? { label, failure: `${peer.name} HTTP ${res.status}` } : { label };
  }
  if (resBody.includes("root:x:0:0") || resBody.includes('"workspaces"')) return { label: "traversal", failure: `${path} served a file outside the console` };
  if (kind === "grpc-web" && contentType.startsWith("application/grpc-web")) return grpcWebStatus(res.status, res.headers, resBody);
  if (res.status === 200) {
    if (contentType.startsWith("application/json")) {
      try {
        JSON.parse(resBody.toString());
      } catch {
        return { label: "200 bad-json", failure: "200 with a body that is not JSON" };
      }
    }
    return { label: "200" };
  }
  if (contentType.startsWith("application/json")) return validConnectError(res.status, resBody);
  // A bidi stream (reflection) asked over HTTP/1.1: Connect-ES answers 505 Version Not Supported.
  if (res.status === 505 && path.includes("ServerReflection") && resBody.length === 0) return { label: "505 bidi-over-h1" };
  if (res.status >= 500) return { label: `${res.status}`, failure: `HTTP ${res.status} (${contentType}) on ${path} ${resBody.subarray(0, 100).toString()}` };
  return { label: `${res.status}` };
}

// ---------------------------------------------------------------- gRPC over raw HTTP/2 streams

class H2Pool {
  private sessions: http2.ClientHttp2Session[] = [];
  private next = 0;
  constructor(
    private readonly base: string,
    size: number,
  ) {
    for (let i = 0; i < size; i++) this.sessions.push(this.open());
  }
  private open(): http2.ClientHttp2Session {
    const s = http2.connect(this.base);
    s.on("error", () => undefined);
    return s;
  }
  get(): http2.ClientHttp2Session {
    const i = this.next++ % this.sessions.length;
    let s = this.sessions[i]!;
    if (s.closed || s.destroyed) this.sessions[i] = s = this.open();
    return s;
  }
  close(): void {
    for (const s of this.sessions) s.destroy();
  }
}

function h2Case(pool: H2Pool, r: Rng, models: readonly string[]): Promise<{ label: string; failure?: string }> {
  const rpc = r.chance(0.93);
  const path = rpc ? r.pick(RPC_PATHS) : r.pick(OTHER_PATHS);
  const headers: http2.OutgoingHttpHeaders = {
    ":method": r.chance(0.97) ? "POST" : "GET",
    ":path": path,
    "content-type": r.chance(0.9)
      ? r.pick(["application/grpc", "application/grpc+proto"])
      : r.pick(["application/grpc+json", "application/json", "text/plain", "application/grpc+nope"]),
    te: "trailers",
    ...authHeader(r),
    ...extraHeaders(r),
  };
  if (r.chance(0.05)) headers["grpc-encoding"] = r.pick(["gzip", "identity", "snappy"]);
  // Length-prefixed messages: usually one well-framed message, sometimes none, two, a lying length or a bad flag.
  const payload = protoBody(r, path.endsWith("/GetModel") ? "GetModel" : "Embed", models);
  const frame = (p: Buffer, flag = 0, len = p.length): Buffer => {
    const prefix = Buffer.alloc(5);
    prefix[0] = flag;
    prefix.writeUInt32BE(len >>> 0, 1);
    return Buffer.concat([prefix, p]);
  };
  const roll = r.int(20);
  const body =
    roll < 13
      ? frame(payload)
      : roll === 13
        ? Buffer.alloc(0)
        : roll === 14
          ? Buffer.concat([frame(payload), frame(payload)])
          : roll === 15
            ? frame(payload, 0, payload.length + 1 + r.int(1_000))
            : roll === 16
              ? frame(payload, r.pick([1, 2, 0x80, 0xff]))
              : roll === 17
                ? frame(payload, 0, r.chance(0.5) ? 2 ** 31 : MAX_REQUEST_BYTES + 1)
                : roll === 18
                  ? r.bytes(r.int(64))
                  : mutateBytes(r, frame(payload));
  // The caller resets its stream: half-way through the upload, or while the call is in flight.
  const cancelEarly = r.chance(0.03);
  const cancelLate =
    !cancelEarly && r.chance(0.03) ? { afterMs: r.int(30), code: r.pick([http2.constants.NGHTTP2_CANCEL, http2.constants.NGHTTP2_INTERNAL_ERROR]) } : undefined;
  if (ONLY !== undefined) console.error({ headers, body: body.toString("hex"), cancelEarly });
  return new Promise((resolve) => {
    let settled = false;
    const done = (o: { label: string; failure?: string }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      done({ label: "hang", failure: `no answer within ${CASE_TIMEOUT_MS} ms on ${path}` });
    }, CASE_TIMEOUT_MS);
    let stream: http2.ClientHttp2Stream;
    try {
      stream = pool.get().request(headers, { endStream: false });
    } catch {
      // A session the server just closed (GOAWAY): nothing was sent.
      clearTimeout(timer);
      resolve({ label: "client-refused-request" });
      return;
    }
    let status = 0;
    let grpcStatus: string | null = null;
    let grpcMessage = "";
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) {
        grpcStatus = String(h["grpc-status"]);
        grpcMessage = String(h["grpc-message"] ?? "");
      }
    });
    stream.on("trailers", (t) => {
      if (t["grpc-status"] !== undefined) {
        grpcStatus = String(t["grpc-status"]);
        grpcMessage = String(t["grpc-message"] ?? "");
      }
    });
    stream.on("data", () => undefined);
    let streamError = "";
    // A server may answer early and then reset the rest of the upload: judged on close.
    stream.on("error", (err: Error) => (streamError = err.message));
    stream.on("close", () => {
      // A caller that reset its stream before the status came has nothing to judge.
      if (cancelEarly || (cancelLate && grpcStatus === null)) return done({ label: "client-cancel" });
      if (status === 0) return done({ label: "reset", failure: `${path}: stream closed without a response (rst ${stream.rstCode}) ${streamError}` });
      if (status !== 200) return done(status < 500 ? { label: `http ${status}` } : { label: `http ${status}`, failure: `HTTP ${status} on ${path}` });
      if (!rpc && grpcStatus === null) return done({ label: "non-rpc 200" });
      done(grpcStatusOutcome(grpcStatus, grpcMessage));
    });
    if (cancelEarly) {
      stream.write(body.subarray(0, body.length >> 1));
      setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), r.int(20));
    } else {
      stream.end(body);
      if (cancelLate) setTimeout(() => stream.close(cancelLate.code), cancelLate.afterMs);
    }
  });
}

// ---------------------------------------------------------------- gRPC client with random field values

async function grpcClientCase(transport: Transport, r: Rng, models: readonly string[]): Promise<{ label: string; failure?: string }> {
  const headers = authHeader(r);
  const timeoutMs = r.chance(0.3) ? 1 + r.int(3_000) : undefined;
  const signal = AbortSignal.timeout(CASE_TIMEOUT_MS);
  try {
    const which = r.int(10);
    if (which < 7) {
      await createClient(InferenceService, transport).embed(
        {
          model: r.chance(0.85) ? r.pick(models) : text(r, 30),
          inputs: Array.from({ length: r.int(r.chance(0.1) ? 24 : 5) }, () => text(r, 300)),
          options: { truncate: r.chance(0.6), encoding: r.int(4), ...(r.chance(0.5) ? { normalize: r.chance(0.5) } : {}) },
          lane: r.pick([0, 1, 2, 5, -3]) as Lane,
        },
        { timeoutMs, signal, headers },
      );
    } else if (which < 9)
      await createClient(ModelService, transport).getModel({ id: r.chance(0.5) ? r.pick(models) : text(r, 40) }, { timeoutMs, signal, headers });
    else await createClient(ModelService, transport).listModels({}, { timeoutMs, signal, headers });
    return { label: "OK" };
  } catch (err) {
    const e = ConnectError.from(err);
    if (signal.aborted) return { label: "hang", failure: `no answer within ${CASE_TIMEOUT_MS} ms` };
    if ((e.code === Code.Internal || e.code === Code.Unknown) && !internalAllowed(e.rawMessage))
      return { label: Code[e.code]!, failure: `unexpected ${Code[e.code]}: ${e.rawMessage}` };
    return { label: Code[e.code] ?? String(e.code) };
  }
}

// ---------------------------------------------------------------- raw bytes on the TCP port

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

function tcpPayload(r: Rng): Buffer {
  const http1 = (): Buffer =>
    Buffer.from(
      r.pick([
        'POST /shoal.v1.InferenceService/Embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n{"model":"shoal-tiny-embed","inputs":["hi"]}',
        "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /shoal.v1.InferenceService/Embed HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{",
        `GET /${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        `GET / HTTP/1.1\r\n${"X-A: b\r\n".repeat(3_000)}\r\n`,
      ]),
    );
  const frames = (): Buffer => {
    const parts: Buffer[] = [H2_PREFACE];
    for (let i = 0; i < 1 + r.int(6); i++) {
      const payload = r.bytes(r.int(64));
      const head = Buffer.alloc(9);
      head.writeUIntBE(r.chance(0.8) ? payload.length : r.int(2 ** 24), 0, 3);
      head[3] = r.int(12); // DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION, unknown
      head[4] = r.int(256);
      head.writeUInt32BE(r.chance(0.5) ? 1 + 2 * r.int(4) : r.u32(), 5);
      parts.push(head, payload);
    }
    return Buffer.concat(parts);
  };
  switch (r.int(5)) {
    case 0:
      return r.bytes(1 + r.int(512));
    case 1:
      return mutateBytes(r, http1());
    case 2:
      return http1();
    default:
      return frames();
  }
}

function tcpCase(port: number, r: Rng): Promise<{ label: string; failure?: string }> {
  const payload = tcpPayload(r);
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let got = Buffer.alloc(0);
    const finish = (how: string): void => {
      clearTimeout(timer);
      socket.destroy();
      const head = got.subarray(0, 12).toString("latin1");
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      if (status !== undefined)
        return resolve(Number(status) >= 500 ? { label: `http ${status}`, failure: `HTTP ${status} to raw bytes` } : { label: `http ${status}` });
      resolve({ label: got.length > 0 ? `${how} after ${got.length > 8 && got[3] === 4 ? "h2 frames" : "bytes"}` : how });
    };
    // The server may rightly wait for more bytes; the client gives up after a while.
    const timer = setTimeout(() => finish("idle"), 1_500);
    socket.on("data", (c: Buffer) => (got = Buffer.concat([got, c]).subarray(0, 4096)));
    socket.on("error", () => finish("reset"));
    socket.on("end", () => finish("closed"));
    socket.write(payload);
  });
}

// ---------------------------------------------------------------- Kafka records

function kafkaValue(r: Rng, kind: "kafka-jobs" | "kafka-replies", models: readonly string[], ownReplyTopic: string): Buffer {
  const roll = r.int(10);
  if (roll < 3) return r.bytes(r.int(r.chance(0.1) ? 1_024 : 64));
  const valid =
    kind === "kafka-jobs"
      ? encodeEnvelope(
          create(JobEnvelopeSchema, {
            jobId: r.chance(0.8) ? randomUuid(r) : text(r, 20),
            model: r.chance(0.8) ? r.pick(models) : text(r, 20),
            deadlineUnixMs: BigInt(r.pick([0, Date.now() - 1_000, Date.now() + 200, Date.now() + 5_000, 2 ** 52])),
            enqueuedUnixMs: BigInt(r.chance(0.9) ? Date.now() : r.int(2 ** 31)),
            // Mostly where someone listens (the fuzzed gateway's topic, its one partition); one in
            // ten names a legal reply topic that does not exist: the worker drops such results at once.
            replyTo: { topic: r.chance(0.9) ? ownReplyTopic : `${MISSING_REPLY_PREFIX}${r.int(40)}`, partition: 0 },
            attempt: r.int(5),
            lane: r.pick([0, 1, 2, 9]),
            tenant: r.chance(0.5) ? "" : text(r, 20),
            ...(r.chance(0.95)
              ? {
                  task: {
                    case: "embed" as const,
                    value: { inputs: Array.from({ length: r.int(6) }, () => text(r, 200)), normalize: r.chance(0.5), truncate: r.chance(0.7) },
                  },
                }
              : {}),
          }),
        )
      : encodeResult(
          create(JobResultSchema, {
            jobId: r.chance(0.8) ? randomUuid(r) : text(r, 20),
            status: r.int(10),
            message: text(r, 50),
            workerId: text(r, 10),
            attempt: r.int(3),
            ...(r.chance(0.7)
              ? { output: { case: "embed" as const, value: { dimensions: r.int(400), vectors: r.bytes(r.int(256)), tokenCounts: [r.int(9)], truncated: [] } } }
              : {}),
          }),
        );
  return roll < 6 ? mutateBytes(r, valid) : Buffer.from(valid);
}

/** Legal reply topics that no gateway has: a tenth of the job records name one. */
const MISSING_REPLY_PREFIX = "shoal.replies.fuzz-nobody-";

/**
 * Whether a job record names a partition of the fuzzed gateway's reply topic other than its one
 * partition (a mutation can make one). Such records are left out: the topic exists, so the
 * worker's look-up passes, and producing to the missing partition is retried for seconds before
 * the result is dropped, which is not what this test measures. Reply topics that do not exist
 * are kept (the worker drops their results at once), and illegal names too (the codec rejects them).
 */
function repliesToMissingPartition(value: Buffer, ownReplyTopic: string): boolean {
  try {
    const e = decodeEnvelope(value);
    return e.replyTo?.topic === ownReplyTopic && e.replyTo.partition !== 0;
  } catch {
    return false;
  }
}

/** Whether a job record (as produced) is a decodable job naming a reply topic that does not exist. */
function repliesNowhere(value: Buffer): boolean {
  try {
    return decodeEnvelope(value).replyTo?.topic.startsWith(MISSING_REPLY_PREFIX) === true;
  } catch {
    return false;
  }
}

function randomUuid(r: Rng): string {
  const h = r.bytes(16).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// ---------------------------------------------------------------- the test

async function runPool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/**
 * Node flags for both services: a preload that runs a full GC on SIGUSR2, so memory is compared
 * after a collection rather than whenever V8 last felt like one.
 */
function gcOnSignalArgs(): string {
  const dir = mkdtempSync(join(tmpdir(), "shoal-fuzz-"));
  const preload = join(dir, "gc-on-sigusr2.mjs");
  writeFileSync(preload, 'process.on("SIGUSR2", () => globalThis.gc?.());\n');
  return `--expose-gc --import ${preload}`;
}

async function collectGarbage(pids: readonly number[]): Promise<void> {
  for (let i = 0; i < 2; i++) {
    for (const pid of pids) process.kill(pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 500));
  }
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? "0") / 1024;
}

describe(`fuzzing the gateway and the worker (seed ${SEED}; SHOAL_FUZZ_SEED=${SEED} to reproduce)`, () => {
  let cluster: TestCluster;
  let base: string;
  let port: number;
  let models: string[];
  before(async () => {
    const nodeArgs = gcOnSignalArgs();
    cluster = await startCluster({
      presets: ["tiny", "tiny-embed-b"],
      workerEnv: { SHOAL_NODE_ARGS: nodeArgs },
      gatewayEnv: {
        SHOAL_NODE_ARGS: nodeArgs,
        SHOAL_API_KEYS: `fuzz=${KEY}, tight=${TIGHT_KEY};requestsPerSecond=5;burst=5;tokensPerSecond=500`,
        SHOAL_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
        SHOAL_MAX_INPUTS: "16",
        SHOAL_MAX_INPUT_CHARS: "2000",
        SHOAL_DEFAULT_TIMEOUT_MS: "5000",
        SHOAL_MAX_TIMEOUT_MS: "10000",
      },
    });
    base = cluster.urls[0]!;
    port = Number(new URL(base).port);
    models = cluster.modelIds;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("≥10,000 random and mutated requests and records: every one answered with a valid status; nothing crashes or leaks", async () => {
    const authed = (protocol: "connect" | "grpc") => {
      const { inference } = clientsFor(base, protocol);
      return (texts: string[]) => inference.embed({ model: models[0]!, inputs: texts }, { headers: { authorization: `Bearer ${KEY}` } });
    };
    // Warm up both processes so the baseline is a serving process, not a cold one.
    for (let i = 0; i < 40; i++) await authed(i % 2 ? "grpc" : "connect")([`warm up ${i}`, "shoal of fish"]);
    await new Promise((r) => setTimeout(r, 2_000));
    const gateway = cluster.gateways[0]!;
    const worker = cluster.workers[0]!;
    await collectGarbage([gateway.pid, worker.pid]);
    const rssBefore = { gateway: rssMb(gateway.pid), worker: rssMb(worker.pid) };
    const heapMb = async (): Promise<number> => metricTotal(await scrape(`${base}/metrics`, KEY), "nodejs_heap_size_used_bytes") / 2 ** 20;
    const heapBefore = await heapMb();

    const tally: Tally = { counts: new Map(), slowest: new Map(), histogram: new Map(), failures: [] };
    const started = performance.now();
    const pool = new H2Pool(base, 6);
    const grpcSessions = new Http2SessionManager(base);
    const grpcTransport = createGrpcTransport({ baseUrl: base, sessionManager: grpcSessions });
    const kinds = (Object.keys(COUNTS) as Kind[]).filter((k) => !k.startsWith("kafka"));
    const cases: Array<{ kind: Kind; i: number }> = [];
    for (const kind of kinds)
      for (let i = 0; i < Math.ceil(COUNTS[kind] * SCALE); i++) if (ONLY === undefined || ONLY === `${kind}#${i}`) cases.push({ kind, i });
    // Interleave kinds deterministically so every protocol is in flight at once.
    const order = new Rng(SEED, 0);
    for (let i = cases.length - 1; i > 0; i--) {
      const j = order.int(i + 1);
      [cases[i], cases[j]] = [cases[j]!, cases[i]!];
    }

    const kafka = new Kafka({ clientId: "e2e-fuzz", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const ownReplyTopic = replyTopic(`${cluster.pool}-g0`);
    let excluded = 0;
    let toMissingTopics = 0;
    const worker0 = cluster.workers[0]!;
    // Answered nowhere: refused by the reply-topic registry (on by default) or, with it off, for a missing topic.
    const workerMetrics = await workerMetricsUrl(worker0);
    const droppedResults = async (): Promise<number> => metricTotal(await scrape(workerMetrics), "shoal_worker_results_dropped_total");
    const dropped0 = await droppedResults();
    const kafkaRecords = async (): Promise<void> => {
      for (const kind of ONLY === undefined ? (["kafka-jobs", "kafka-replies"] as const) : []) {
        const n = Math.ceil(COUNTS[kind] * SCALE);
        for (let start = 0; start < n; start += 100) {
          const messages = Array.from({ length: Math.min(100, n - start) }, (_, k) => {
            const r = new Rng(SEED, (kind === "kafka-jobs" ? 1 : 2) * 1_000_000 + start + k);
            const lane = r.chance(0.5) ? Lane.INTERACTIVE : Lane.BATCH;
            return {
              topic: kind === "kafka-jobs" ? jobsTopic(cluster.pool, lane) : ownReplyTopic,
              partition: kind === "kafka-jobs" ? r.int(4) : 0,
              key: r.chance(0.5) ? null : r.bytes(r.int(40)),
              value: ((v) => {
                if (kind === "kafka-jobs" && repliesToMissingPartition(v, ownReplyTopic)) {
                  excluded++;
                  return r.bytes(8);
                }
                if (kind === "kafka-jobs" && repliesNowhere(v)) toMissingTopics++;
                return v;
              })(kafkaValue(r, kind, models, ownReplyTopic)),
              headers: r.chance(0.3)
                ? {
                    traceparent: r.pick(["garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", r.bytes(20).toString("latin1")]),
                    [`x-${r.int(9)}`]: r.bytes(r.int(30)),
                  }
                : {},
            };
          });
          const byTopic = new Map<string, typeof messages>();
          for (const m of messages) byTopic.set(m.topic, [...(byTopic.get(m.topic) ?? []), m]);
          await producer.sendBatch({ topicMessages: [...byTopic].map(([topic, ms]) => ({ topic, messages: ms.map(({ topic: _t, ...m }) => m) })) });
          for (const _ of messages) record(tally, kind, "produced");
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };

    const streams = Object.fromEntries(kinds.map((k, n) => [k, (n + 3) * 1_000_000])) as Record<Kind, number>;
    await Promise.all([
      kafkaRecords(),
      runPool(cases, CONCURRENCY, async ({ kind, i }) => {
        const r = new Rng(SEED, streams[kind] + i);
        const at = `#${i}`;
        const t0 = performance.now();
        try {
          const outcome =
            kind === "grpc-h2"
              ? await h2Case(pool, r, models)
              : kind === "grpc-client"
                ? await grpcClientCase(grpcTransport, r, models)
                : kind === "tcp-raw"
                  ? await tcpCase(port, r)
                  : await httpCase(base, kind as "connect-json" | "connect-proto" | "grpc-web", r, models);
          record(tally, kind, outcome.label, outcome.failure === undefined ? undefined : `${at} ${outcome.failure}`);
        } catch (err) {
          const e = err as Error & { cause?: { code?: string } };
          const label = e.name === "TimeoutError" ? "hang" : `client-error ${e.cause?.code ?? e.name}`;
          record(tally, kind, label, `${at} ${label}: ${e.message}`);
        }
        tally.slowest.set(kind, Math.max(tally.slowest.get(kind) ?? 0, performance.now() - t0));
      }),
    ]);
    pool.close();
    grpcSessions.abort();
    await producer.disconnect();
    const seconds = (performance.now() - started) / 1000;

    const total = [...tally.counts.values()].reduce((a, b) => a + b, 0);
    const lines = [
      `seed ${SEED}: ${total} cases in ${seconds.toFixed(1)} s`,
      `per kind: ${[...tally.counts].map(([k, n]) => `${k} ${n}`).join(", ")}`,
      `slowest case per kind (ms): ${[...tally.slowest].map(([k, ms]) => `${k} ${ms.toFixed(0)}`).join(", ")}`,
      `job records mutated into another partition of the reply topic, replaced by noise: ${excluded}`,
      `decodable job records naming a reply topic that does not exist: ${toMissingTopics}; results answered nowhere: ${(await droppedResults()) - dropped0}`,
      "status histogram:",
      ...[...tally.histogram].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `  ${k}: ${n}`),
    ];
    console.error(lines.join("\n"));
    if (tally.failures.length > 0) console.error(`failures (first 30):\n${tally.failures.slice(0, 30).join("\n")}`);

    // Both processes alive and serving.
    for (const p of [gateway, worker]) assert.doesNotThrow(() => process.kill(p.pid, 0), `${p.name} is not running`);
    try {
      assert.equal((await authed("grpc")(["after the storm"])).embeddings.length, 1);
      assert.equal((await authed("connect")(["after the storm", "again"])).embeddings.length, 2);
    } catch (err) {
      console.error(`worker log tail:\n${worker.tail(40)}\ngateway log tail:\n${gateway.tail(20)}`);
      throw err;
    }
    // A pause for the last calls, timers and sockets to end, then a full collection.
    await new Promise((r) => setTimeout(r, 5_000));
    await collectGarbage([gateway.pid, worker.pid]);
    const rssAfter = { gateway: rssMb(gateway.pid), worker: rssMb(worker.pid) };
    const heapAfter = await heapMb();
    console.error(
      `memory (RSS MB) gateway ${rssBefore.gateway.toFixed(0)} -> ${rssAfter.gateway.toFixed(0)} (JS heap used ${heapBefore.toFixed(0)} -> ${heapAfter.toFixed(0)}), worker ${rssBefore.worker.toFixed(0)} -> ${rssAfter.worker.toFixed(0)}`,
    );
    // kafkajs logs broker answers at error level (an invalid topic named by a corrupted record): those are the client library's, not ours.
    const fatal = [...gateway.logs, ...worker.logs].filter(
      (l) => l.level === "fatal" || l.level === "stderr" || (l.level === "error" && l["component"] !== "kafkajs"),
    );
    if (fatal.length > 0)
      console.error(
        `error lines:\n${fatal
          .slice(0, 10)
          .map((l) => JSON.stringify(l).slice(0, 400))
          .join("\n")}`,
      );

    assert.deepEqual(tally.failures, [], `seed ${SEED}: ${tally.failures.length} failing cases`);
    // Jobs answered to a reply topic nobody has: their results were dropped (and, above, everyone
    // else's calls were answered in bounded time meanwhile).
    if (toMissingTopics >= 10) assert.ok((await droppedResults()) - dropped0 > 0, `none of ${toMissingTopics} results to missing reply topics was dropped`);
    if (ONLY === undefined) assert.ok(total >= 10_000 * SCALE, `only ${total} cases`);
    assert.equal(fatal.length, 0, "errors logged by the services");
    assert.ok(heapAfter - heapBefore < HEAP_GROWTH_LIMIT_MB, `gateway JS heap grew by ${(heapAfter - heapBefore).toFixed(0)} MB`);
    assert.ok(rssAfter.gateway - rssBefore.gateway < RSS_GROWTH_LIMIT_MB, `gateway RSS grew by ${(rssAfter.gateway - rssBefore.gateway).toFixed(0)} MB`);
    assert.ok(rssAfter.worker - rssBefore.worker < RSS_GROWTH_LIMIT_MB, `worker RSS grew by ${(rssAfter.worker - rssBefore.worker).toFixed(0)} MB`);
  });
});
