/**
 * Emits TypeScript types, encoders and decoders for one Kafka message schema, for every version in
 * its validVersions. One function per struct takes the version and branches on it where a field's
 * `versions`, `nullableVersions`, `taggedVersions` or the message's `flexibleVersions` say so, the
 * way Kafka's generated Java classes do. Byte-level primitives come from @platformatic/kafka's
 * Writer and Reader.
 */
import { condition, covers, intersect, isEmpty, parseVersions, type FieldSpec, type MessageSpec, type VersionRange } from "./schema.ts";

const PRIMITIVES: Record<string, { ts: string; write: string; read: string; zero: string }> = {
  bool: { ts: "boolean", write: "appendBoolean", read: "readBoolean", zero: "false" },
  int8: { ts: "number", write: "appendInt8", read: "readInt8", zero: "0" },
  int16: { ts: "number", write: "appendInt16", read: "readInt16", zero: "0" },
  uint16: { ts: "number", write: "appendUnsignedInt16", read: "readUnsignedInt16", zero: "0" },
  int32: { ts: "number", write: "appendInt32", read: "readInt32", zero: "0" },
  uint32: { ts: "number", write: "appendUnsignedInt32", read: "readUnsignedInt32", zero: "0" },
  int64: { ts: "bigint", write: "appendInt64", read: "readInt64", zero: "0n" },
  float64: { ts: "number", write: "appendFloat64", read: "readFloat64", zero: "0" },
  uuid: { ts: "string", write: "appendUUID", read: "readUUID", zero: "ZERO_UUID" },
};

/** Field names in the JSON are PascalCase; the TypeScript ones camelCase. */
export function camel(name: string): string {
  return name.charAt(0).toLowerCase() + name.slice(1);
}

interface Struct {
  readonly tsName: string;
  readonly fields: readonly FieldSpec[];
}

/** Emits one message's module body (types, then writers, then readers). */
export function emitMessage(spec: MessageSpec, out: string[]): void {
  const all = parseVersions(spec.validVersions);
  const flexible = parseVersions(spec.flexibleVersions);
  const common = new Map((spec.commonStructs ?? []).map((s) => [s.name, s.fields]));
  const structs: Struct[] = [];
  const seen = new Set<string>();
  // Structs whose all-defaults value some version needs (a field absent from that version).
  const defaultStructs = new Set<string>();

  const structName = (typeName: string): string => `${spec.name}${typeName}`;
  // Collects every struct reachable from the message, nested ones under the message's name.
  const collect = (tsName: string, fields: readonly FieldSpec[]): void => {
    structs.push({ tsName, fields });
    for (const f of fields) {
      const inner = elementType(f.type);
      if (PRIMITIVES[inner] || inner === "string" || inner === "bytes" || inner === "records") continue;
      if (isEmpty(intersect(parseVersions(f.versions), all))) continue;
      const name = structName(inner);
      if (seen.has(name)) continue;
      seen.add(name);
      const fields = f.fields ?? common.get(inner);
      if (!fields) throw new Error(`${spec.name}.${f.name}: unknown struct ${inner}`);
      collect(name, fields);
    }
  };
  collect(spec.name, spec.fields);

  const present = (f: FieldSpec): VersionRange => intersect(parseVersions(f.versions), all);
  const live = (fields: readonly FieldSpec[]): FieldSpec[] => fields.filter((f) => !isEmpty(present(f)));
  const tsType = (f: FieldSpec): string => {
    const inner = elementType(f.type);
    const base = PRIMITIVES[inner]?.ts ?? (inner === "string" ? "string" : inner === "bytes" || inner === "records" ? "Buffer" : structName(inner));
    const t = f.type.startsWith("[]") ? `${wrapArray(base)}[]` : base;
    const nullable = !isEmpty(intersect(parseVersions(f.nullableVersions), present(f)));
    return nullable ? `${t} | null` : t;
  };
  const optional = (f: FieldSpec): boolean => !covers(present(f), all) || f.default !== undefined || f.taggedVersions !== undefined;

  for (const s of structs) {
    out.push(`/** ${s.tsName === spec.name ? `${spec.name} (API key ${spec.apiKey}), versions ${spec.validVersions}.` : `Part of ${spec.name}.`} */`);
    out.push(`export interface ${s.tsName} {`);
    for (const f of live(s.fields)) {
      const v = present(f);
      const note = covers(v, all) ? "" : ` (versions ${f.versions})`;
      out.push(`  /** ${escapeDoc(aboutOf(f))}${note} */`);
      out.push(`  ${camel(f.name)}${optional(f) ? "?" : ""}: ${tsType(f)};`);
    }
    out.push("}", "");
  }

  const defaultOf = (f: FieldSpec): string => {
    const inner = elementType(f.type);
    const d = f.default;
    if (d === "null") return "null";
    if (f.type.startsWith("[]")) return "[]";
    if (inner === "string") return JSON.stringify(typeof d === "string" ? d : "");
    if (inner === "bytes" || inner === "records") return "EMPTY_BUFFER";
    const p = PRIMITIVES[inner];
    if (!p) {
      if (nullableSomewhere(f)) return "null";
      defaultStructs.add(structName(inner));
      return `read${structName(inner)}Default()`;
    }
    if (d === undefined) return p.zero;
    if (inner === "bool") return String(d === true || d === "true");
    if (inner === "int64") return `${BigInt(String(d))}n`;
    return String(Number(d));
  };
  const nullableSomewhere = (f: FieldSpec): boolean => !isEmpty(intersect(parseVersions(f.nullableVersions), present(f)));

  // ---- writers
  const writeValue = (f: FieldSpec, expr: string, w: string): string[] => {
    const inner = elementType(f.type);
    const nullable = condition(parseVersions(f.nullableVersions), present(f));
    const lines: string[] = [];
    if (nullable !== "true") {
      const guard = nullable === "false" ? `${expr} === null` : `${expr} === null && !(${nullable})`;
      if (tsType(f).endsWith("| null")) lines.push(`if (${guard}) throw new RangeError("${spec.name}: ${f.name} is not nullable in version " + version);`);
    }
    if (f.type.startsWith("[]")) {
      lines.push(`${w}.appendArray(${expr}, (w, e) => ${elementWriter(inner, "e", "w")}, flexible, false);`);
    } else if (inner === "string") {
      lines.push(`${w}.appendString(${expr}, flexible);`);
    } else if (inner === "bytes" || inner === "records") {
      lines.push(`${w}.appendBytes(${expr}, flexible);`);
    } else if (PRIMITIVES[inner]) {
      lines.push(`${w}.${PRIMITIVES[inner].write}(${expr});`);
    } else if (nullableSomewhere(f)) {
      // Nullable structs carry a presence byte: -1 null, 1 present.
      lines.push(`if (${expr} === null) ${w}.appendInt8(-1);`, `else { ${w}.appendInt8(1); write${structName(inner)}(${w}, version, ${expr}); }`);
    } else {
      lines.push(`write${structName(inner)}(${w}, version, ${expr});`);
    }
    return lines;
  };
  const elementWriter = (inner: string, e: string, w: string): string => {
    if (inner === "string") return `${w}.appendString(${e}, flexible)`;
    if (inner === "bytes") return `${w}.appendBytes(${e}, flexible)`;
    const p = PRIMITIVES[inner];
    if (p) return `${w}.${p.write}(${e})`;
    return `write${structName(inner)}(${w}, version, ${e})`;
  };

  for (const s of structs) {
    const fields = live(s.fields);
    out.push(`function write${s.tsName}(w: Writer, version: number, value: ${s.tsName}): void {`);
    out.push(`  const flexible = ${condition(flexible, all)};`);
    const tagged: FieldSpec[] = [];
    for (const f of fields) {
      const key = camel(f.name);
      const expr = optional(f) ? `(value.${key} ?? ${defaultOf(f)})` : `value.${key}`;
      if (f.taggedVersions !== undefined) {
        tagged.push(f);
        continue;
      }
      const cond = condition(present(f), all);
      const body = writeValue(f, "v", "w");
      if (cond === "true" && body.length === 1) {
        out.push(`  ${body[0]?.replace(/\bv\b/, expr)}`);
        continue;
      }
      out.push(`  {`, `    const v = ${expr};`);
      if (cond === "true") out.push(...body.map((l) => `    ${l}`));
      else {
        out.push(`    if (${cond}) {`, ...body.map((l) => `      ${l}`), `    }`);
        if (!f.ignorable)
          out.push(`    else if (!isDefault(v, ${defaultOf(f)})) throw new RangeError("${spec.name}: ${f.name} needs version ${f.versions}, got " + version);`);
      }
      out.push(`  }`);
    }
    if (tagged.length === 0) {
      out.push(`  if (flexible) w.appendUnsignedVarInt(0); // no tagged fields`, `}`, ``);
      continue;
    }
    out.push(`  if (flexible) {`);
    out.push(`    const tagged: Array<[number, Writer]> = [];`);
    for (const f of tagged) {
      const key = camel(f.name);
      const cond = condition(parseVersions(f.taggedVersions), all);
      out.push(`    if (${cond} && value.${key} !== undefined && !isDefault(value.${key}, ${defaultOf(f)})) {`);
      out.push(`      const t = Writer.create();`, `      const v = value.${key};`);
      out.push(...writeValue(f, "v", "t").map((l) => `      ${l}`));
      out.push(`      tagged.push([${f.tag ?? -1}, t]);`, `    }`);
    }
    out.push(`    writeTaggedFields(w, tagged);`, `  }`, `}`, ``);
  }

  // ---- readers
  const readValue = (f: FieldSpec, r: string): string => {
    const inner = elementType(f.type);
    const nullable = nullableSomewhere(f);
    if (f.type.startsWith("[]")) {
      const method = nullable ? "readNullableArray" : "readArray";
      return `${r}.${method}((r) => ${elementReader(inner, "r")}, flexible, false)`;
    }
    if (inner === "string") return nullable ? `${r}.readNullableString(flexible)` : `${r}.readString(flexible)`;
    if (inner === "bytes" || inner === "records") return nullable ? `${r}.readNullableBytes(flexible)` : `${r}.readBytes(flexible)`;
    const p = PRIMITIVES[inner];
    if (p) return `${r}.${p.read}()`;
    if (nullable) return `(${r}.readInt8() < 0 ? null : read${structName(inner)}(${r}, version))`;
    return `read${structName(inner)}(${r}, version)`;
  };
  const elementReader = (inner: string, r: string): string => {
    if (inner === "string") return `${r}.readString(flexible)`;
    if (inner === "bytes") return `${r}.readBytes(flexible)`;
    const p = PRIMITIVES[inner];
    if (p) return `${r}.${p.read}()`;
    return `read${structName(inner)}(${r}, version)`;
  };

  for (const s of structs) {
    const fields = live(s.fields);
    out.push(`function read${s.tsName}(r: Reader, version: number): ${s.tsName} {`);
    out.push(`  const flexible = ${condition(flexible, all)};`);
    out.push(`  const value: ${s.tsName} = {`);
    for (const f of fields) {
      const cond = f.taggedVersions !== undefined ? "false" : condition(present(f), all);
      const read = readValue(f, "r");
      const expr = cond === "true" ? read : cond === "false" ? defaultOf(f) : `${cond} ? ${read} : ${defaultOf(f)}`;
      out.push(`    ${camel(f.name)}: ${expr},`);
    }
    out.push(`  };`);
    const taggedFields = fields.filter((f) => f.taggedVersions !== undefined);
    if (taggedFields.length === 0) {
      out.push(`  if (flexible) readTaggedFields(r, () => false); // none known: skip all`, `  return value;`, `}`, ``);
      continue;
    }
    out.push(`  if (flexible) {`, `    readTaggedFields(r, (tag, r) => {`, `      switch (tag) {`);
    for (const f of taggedFields) {
      out.push(`        case ${f.tag ?? -1}:`, `          value.${camel(f.name)} = ${readValue(f, "r")};`, `          return true;`);
    }
    out.push(`        default:`, `          return false;`, `      }`, `    });`, `  }`, `  return value;`, `}`, ``);
  }

  // A non-nullable struct missing from a version reads as a struct of defaults, as in Kafka.
  for (const s of structs.filter((s) => defaultStructs.has(s.tsName))) {
    out.push(`function read${s.tsName}Default(): ${s.tsName} {`);
    out.push(
      `  return { ${live(s.fields)
        .map((f) => `${camel(f.name)}: ${defaultOf(f)}`)
        .join(", ")} };`,
      `}`,
    );
    out.push(``);
  }

  out.push(`/** Writes a ${spec.name} body (no header) for \`version\` (${spec.validVersions}). */`);
  out.push(`export function encode${spec.name}(w: Writer, version: number, value: ${spec.name}): Writer {`);
  out.push(`  checkVersion("${spec.name}", version, ${all.lo}, ${all.hi});`, `  write${spec.name}(w, version, value);`, `  return w;`, `}`, ``);
  out.push(`/** Reads a ${spec.name} body (no header) of \`version\` (${spec.validVersions}). */`);
  out.push(`export function decode${spec.name}(r: Reader, version: number): ${spec.name} {`);
  out.push(`  checkVersion("${spec.name}", version, ${all.lo}, ${all.hi});`, `  return read${spec.name}(r, version);`, `}`, ``);
}

function elementType(type: string): string {
  return type.startsWith("[]") ? type.slice(2) : type;
}

function wrapArray(t: string): string {
  return t.includes(" ") ? `(${t})` : t;
}

function aboutOf(f: FieldSpec): string {
  return (f as { about?: string }).about ?? f.name;
}

function escapeDoc(s: string): string {
  return s.replaceAll("*/", "*\\/");
}
