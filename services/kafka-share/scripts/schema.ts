/**
 * Kafka's message schema format (clients/src/main/resources/common/message/*.json), as far as the
 * generator needs it, and the version arithmetic on it. Kafka's own generator
 * (generator/src/main/java/org/apache/kafka/message) defines the format; these files are JSON
 * with `//` line comments.
 */
import { readFileSync } from "node:fs";

/** One field of a message or struct. */
export interface FieldSpec {
  readonly name: string;
  readonly type: string;
  readonly versions: string;
  readonly nullableVersions?: string;
  readonly taggedVersions?: string;
  readonly tag?: number;
  readonly default?: string | number | boolean;
  readonly ignorable?: boolean;
  readonly fields?: readonly FieldSpec[];
}

/** A struct declared once and used by name (`commonStructs`). */
export interface StructSpec {
  readonly name: string;
  readonly versions: string;
  readonly fields: readonly FieldSpec[];
}

/** A request or response schema. */
export interface MessageSpec {
  readonly apiKey: number;
  readonly type: "request" | "response";
  readonly name: string;
  readonly validVersions: string;
  readonly flexibleVersions: string;
  readonly fields: readonly FieldSpec[];
  readonly commonStructs?: readonly StructSpec[];
}

/** An inclusive version range; `hi` is Infinity for "N+", and lo > hi means none. */
export interface VersionRange {
  readonly lo: number;
  readonly hi: number;
}

export function parseVersions(text: string | undefined): VersionRange {
  if (text === undefined || text === "none") return { lo: 1, hi: 0 };
  const plus = /^(\d+)\+$/.exec(text);
  if (plus) return { lo: Number(plus[1]), hi: Infinity };
  const range = /^(\d+)-(\d+)$/.exec(text);
  if (range) return { lo: Number(range[1]), hi: Number(range[2]) };
  if (/^\d+$/.test(text)) return { lo: Number(text), hi: Number(text) };
  throw new Error(`bad version range '${text}'`);
}

/** The versions of `range` that fall within `within` (both inclusive). */
export function intersect(range: VersionRange, within: VersionRange): VersionRange {
  return { lo: Math.max(range.lo, within.lo), hi: Math.min(range.hi, within.hi) };
}

export function isEmpty(range: VersionRange): boolean {
  return range.lo > range.hi;
}

/** True when `range` covers every version in `within`. */
export function covers(range: VersionRange, within: VersionRange): boolean {
  return range.lo <= within.lo && range.hi >= within.hi;
}

/**
 * A TypeScript condition on `version` that is true exactly for the versions of `range` among
 * `within`; "true" or "false" when that holds for all or none of them.
 */
export function condition(range: VersionRange, within: VersionRange): string {
  const r = intersect(range, within);
  if (isEmpty(r)) return "false";
  if (covers(r, within)) return "true";
  const parts: string[] = [];
  if (r.lo > within.lo) parts.push(`version >= ${r.lo}`);
  if (r.hi < within.hi) parts.push(`version <= ${r.hi}`);
  return parts.join(" && ");
}

/** Reads a schema file, dropping the `//` comment lines JSON does not allow. */
export function readSchema(path: string): MessageSpec {
  const text = readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => !/^\s*\/\//.test(line))
    .join("\n");
  return JSON.parse(text) as MessageSpec;
}
