/**
 * Field-by-field reading of a parsed shoal-model.json for model-manifest.ts: each check records a
 * problem naming its field and reading on, so every problem is reported at once.
 */
import { stat } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "node:path";
import { isJsonObject, type JsonObject } from "./json.ts";

type Json = JsonObject;

/** A value as a problem shows it: `missing`, or `got <JSON>` cut at 40 characters. */
export function describe(v: unknown): string {
  if (v === undefined) return "missing";
  const s = JSON.stringify(v);
  return `got ${s.length > 40 ? `${s.slice(0, 40)}…` : s}`;
}

/** Collects problems while reading fields; each problem names its field. */
export class FieldReader {
  readonly problems: string[] = [];

  string(obj: Json, key: string, field: string): string {
    const v = obj[key];
    if (typeof v === "string" && v.trim() !== "") return v;
    this.problems.push(`${field}: must be a non-empty string (${describe(v)})`);
    return "";
  }

  optionalString(obj: Json, key: string, field: string): string | undefined {
    return obj[key] === undefined ? undefined : this.string(obj, key, field);
  }

  integer(obj: Json, key: string, field: string, min: number): number {
    const v = obj[key];
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= min) return v;
    this.problems.push(`${field}: must be an integer >= ${min} (${describe(v)})`);
    return 0;
  }

  /** One of `allowed`, or undefined (and a problem) when the value is not. */
  oneOf<T extends string>(obj: Json, key: string, field: string, allowed: readonly T[]): T | undefined {
    const v = obj[key];
    if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as T;
    this.problems.push(`${field}: must be one of ${allowed.map((a) => `"${a}"`).join(", ")} (${describe(v)})`);
    return undefined;
  }

  /** A non-empty array of unique, non-empty strings. */
  labels(obj: Json, key: string, field: string): string[] {
    const v = obj[key];
    if (!Array.isArray(v) || v.length === 0) {
      this.problems.push(`${field}: must be a non-empty array of label names (${describe(v)})`);
      return [];
    }
    const bad = v.findIndex((x) => typeof x !== "string" || x.trim() === "");
    if (bad >= 0) {
      this.problems.push(`${field}[${bad}]: must be a non-empty string (${describe(v[bad])})`);
      return [];
    }
    const names = v as string[];
    const dup = names.findIndex((x, i) => names.indexOf(x) !== i);
    if (dup >= 0) {
      this.problems.push(`${field}[${dup}]: duplicate label ${JSON.stringify(names[dup])}`);
      return [];
    }
    return names;
  }

  /** Reports a field that the manifest's task must not set. */
  forbidden(obj: Json, key: string, field: string, why: string): void {
    if (obj[key] !== undefined) this.problems.push(`${field}: ${why} (${describe(obj[key])})`);
  }

  object(obj: Json, key: string, field: string): Json {
    const v = obj[key];
    if (isJsonObject(v)) return v;
    this.problems.push(`${field}: must be an object (${describe(v)})`);
    return {};
  }

  /** A path relative to the model directory that stays inside it. */
  relativeFile(dir: string, obj: Json, key: string, field: string): string {
    const name = this.string(obj, key, field);
    if (name === "") return "";
    const abs = resolve(dir, name);
    const rel = relative(dir, abs);
    if (isAbsolute(name) || rel.startsWith("..") || isAbsolute(rel)) {
      this.problems.push(`${field}: must name a file inside the model directory (got ${JSON.stringify(name)})`);
      return "";
    }
    return abs;
  }
}

/** The problem with a file the manifest names, if any. */
export async function fileProblem(path: string, field: string): Promise<string | undefined> {
  if (path === "") return undefined; // already reported by the field check
  try {
    return (await stat(path)).isFile() ? undefined : `${field}: ${path} is not a file`;
  } catch {
    return `${field}: ${path} does not exist`;
  }
}
