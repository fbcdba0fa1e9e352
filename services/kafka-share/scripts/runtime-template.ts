/**
 * The text of src/generated/runtime.ts: what every generated codec shares (the ApiSpec shape, the
 * tagged-field section of flexible versions, version checks). Kept as a template so the whole of
 * src/generated/ comes out of the generator and the diff check covers it.
 */
export const RUNTIME = `import { Writer, type Reader } from "@platformatic/kafka";

/** Encoders and decoders of one Kafka API, for versions minVersion..maxVersion. */
export interface ApiSpec<Request, Response> {
  readonly name: string;
  readonly apiKey: number;
  readonly minVersion: number;
  readonly maxVersion: number;
  /** Flexible versions use compact strings and arrays, tagged fields and header v2 / v1. */
  readonly isFlexible: (version: number) => boolean;
  readonly encodeRequest: (w: Writer, version: number, value: Request) => Writer;
  readonly decodeRequest: (r: Reader, version: number) => Request;
  readonly encodeResponse: (w: Writer, version: number, value: Response) => Writer;
  readonly decodeResponse: (r: Reader, version: number) => Response;
}

export const EMPTY_BUFFER: Buffer = Buffer.alloc(0);
export const ZERO_UUID = "00000000-0000-0000-0000-000000000000";

export function checkVersion(name: string, version: number, min: number, max: number): void {
  if (!Number.isInteger(version) || version < min || version > max) {
    throw new RangeError(\`\${name}: version \${version} is outside \${min}..\${max}\`);
  }
}

/** Whether a value equals a field's default (so a field absent from a version may carry it). */
export function isDefault(value: unknown, fallback: unknown): boolean {
  if (value === fallback) return true;
  if (Array.isArray(value)) return value.length === 0 && Array.isArray(fallback);
  if (Buffer.isBuffer(value) && Buffer.isBuffer(fallback)) return value.equals(fallback);
  return false;
}

/** Writes the tagged-field section: count, then tag, size and bytes per field, in tag order. */
export function writeTaggedFields(w: Writer, fields: Array<[number, Writer]>): void {
  fields.sort((a, b) => a[0] - b[0]);
  w.appendUnsignedVarInt(fields.length);
  for (const [tag, body] of fields) {
    w.appendUnsignedVarInt(tag).appendUnsignedVarInt(body.length).appendFrom(body);
  }
}

/**
 * Reads a tagged-field section; \`known\` decodes a tag it knows and returns true. Unknown tags are
 * skipped by their size, which is what lets newer brokers add tagged fields safely.
 */
export function readTaggedFields(r: Reader, known: (tag: number, r: Reader) => boolean): void {
  const count = r.readUnsignedVarInt();
  for (let i = 0; i < count; i++) {
    const tag = r.readUnsignedVarInt();
    const size = r.readUnsignedVarInt();
    const end = r.position + size;
    if (!known(tag, r)) r.skip(size);
    if (r.position !== end) throw new RangeError(\`tagged field \${tag}: read \${r.position - end + size} of \${size} bytes\`);
  }
}
`;
