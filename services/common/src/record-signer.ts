/**
 * Authenticates the records Shoal's services send each other through Kafka (issue #19, the Kafka
 * trust boundary): with a shared cluster key, every job, result and cancel record carries an
 * HMAC-SHA256 over its kind and value in the `shoal-sig` header, and readers drop records whose
 * signature is missing or wrong. Worker status records are signed too, over their key (the worker
 * id) and value (`statusSignedBytes`), so a tombstone is signed and a status cannot be moved to
 * another worker's key; gateways' reply-topic registrations likewise (kind `gateway`). A client that may produce to a jobs or reply topic can then
 * neither forge a job (another tenant's, or with a forged attempt count) nor answer someone
 * else's call. The kind is inside the MAC, so a result cannot be replayed as a job.
 *
 * Keys: `SHOAL_CLUSTER_KEYS` (or `SHOAL_CLUSTER_KEYS_FILE`), comma-separated, each at least 32
 * bytes given as hex or base64. The first signs; all verify — rotate by adding the new key second
 * everywhere, then moving it first, then dropping the old one. Without keys nothing is signed or
 * checked (a single-host, loopback cluster).
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { EnvReader } from "./env-config.ts";

export type SignedKind = "job" | "result" | "cancel" | "status" | "gateway" | "registry";

export const SIGNATURE_HEADER = "shoal-sig";
const VERSION = "v1";
const MIN_KEY_BYTES = 32;

export interface RecordSigner {
  /** Whether keys are configured (records are signed and checked). */
  readonly enabled: boolean;
  /** The header value for `value`, or undefined when signing is off. */
  sign(kind: SignedKind, value: Uint8Array): string | undefined;
  /**
   * Whether a record may be trusted: always when signing is off; else its header must be a
   * signature of `kind` and `value` by one of the keys.
   */
  verify(kind: SignedKind, value: Uint8Array | null, header: Buffer | string | (Buffer | string)[] | undefined): boolean;
}

/** A cluster key that cannot be used. */
export class ClusterKeyError extends Error {
  override readonly name = "ClusterKeyError";
}

/**
 * Parses `SHOAL_CLUSTER_KEYS`: comma-separated keys, each hex (64+ digits) or base64 of 32+ bytes.
 * @throws ClusterKeyError naming the key's position (never its value)
 */
export function parseClusterKeys(text: string | undefined): Buffer[] {
  if (text === undefined || text.trim() === "") return [];
  return text
    .split(/[,\s]+/)
    .filter((k) => k !== "")
    .map((k, i) => {
      const bytes = /^[0-9a-f]+$/i.test(k) && k.length % 2 === 0 ? Buffer.from(k, "hex") : Buffer.from(k, "base64");
      if (bytes.length < MIN_KEY_BYTES)
        throw new ClusterKeyError(`cluster key ${i + 1}: at least ${MIN_KEY_BYTES} bytes (hex or base64) are needed, got ${bytes.length}`);
      return bytes;
    });
}

/**
 * What a status record's signature covers: its key (the worker id, length-prefixed) and its value
 * (none for a tombstone).
 */
export function statusSignedBytes(key: string, value: Uint8Array | null): Buffer {
  const k = Buffer.from(key, "utf8");
  const length = Buffer.alloc(4);
  length.writeUInt32BE(k.length);
  return Buffer.concat([length, k, value ?? new Uint8Array(0)]);
}

/** A key's public id in the header: the first 8 hex digits of its SHA-256. */
function keyId(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 8);
}

function mac(key: Buffer, kind: SignedKind, value: Uint8Array): Buffer {
  return createHmac("sha256", key).update(`shoal-${VERSION}\0${kind}\0`).update(value).digest();
}

export function createRecordSigner(keys: readonly Buffer[]): RecordSigner {
  const byId = new Map(keys.map((k) => [keyId(k), k]));
  const signing = keys[0];
  const signingId = signing === undefined ? "" : keyId(signing);
  return {
    enabled: signing !== undefined,
    sign(kind, value) {
      if (signing === undefined) return undefined;
      return `${VERSION}.${signingId}.${mac(signing, kind, value).toString("base64url")}`;
    },
    verify(kind, value, header) {
      if (signing === undefined) return true;
      const raw = Array.isArray(header) ? header[0] : header;
      if (raw === undefined || value === null) return false;
      const [version, id, sig] = raw.toString().split(".");
      const key = id === undefined ? undefined : byId.get(id);
      if (version !== VERSION || key === undefined || sig === undefined) return false;
      const given = Buffer.from(sig, "base64url");
      const want = mac(key, kind, value);
      return given.length === want.length && timingSafeEqual(given, want);
    },
  };
}

/** `SHOAL_CLUSTER_KEYS` and `SHOAL_CLUSTER_KEYS_FILE` (same format, in a file), merged; problems go to `r`. */
export function readClusterKeys(r: EnvReader): Buffer[] {
  const keys: Buffer[] = [];
  const take = (source: string, text: string | undefined): void => {
    try {
      keys.push(...parseClusterKeys(text));
    } catch (err) {
      r.problem(`${source}: ${(err as Error).message}`);
    }
  };
  take("SHOAL_CLUSTER_KEYS", r.optionalString("SHOAL_CLUSTER_KEYS"));
  const file = r.optionalString("SHOAL_CLUSTER_KEYS_FILE");
  if (file !== undefined) {
    try {
      take(`SHOAL_CLUSTER_KEYS_FILE=${file}`, readFileSync(file, "utf8"));
    } catch (err) {
      r.problem(`SHOAL_CLUSTER_KEYS_FILE=${file}: ${(err as Error).message}`);
    }
  }
  return keys;
}

/** Warns once at start when records cross a network unsigned: brokers off loopback and no cluster key. */
export function warnIfUnsigned(signer: RecordSigner, brokers: readonly string[], log: { warn(obj: object, msg: string): void }): void {
  const remote = brokers.filter((b) => !/^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|::1)(:\d+)?$/.test(b));
  if (signer.enabled || remote.length === 0) return;
  log.warn(
    { brokers: remote },
    "Kafka brokers are off loopback and SHOAL_CLUSTER_KEYS is not set: anyone who can produce to Shoal's topics can forge jobs and results",
  );
}
