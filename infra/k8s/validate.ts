/**
 * Renders a kustomization (the pinned kustomize, schemas.ts) and checks every
 * object against the real schemas: Kubernetes' OpenAPI definitions for built-in kinds, the CRD's
 * openAPIV3Schema for KEDA's ScaledObject. Strict, as `kubeconform -strict` is: a field no schema
 * declares is an error (a typo such as `readinesProbe` would otherwise pass silently).
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { Ajv, type ValidateFunction } from "ajv";
import { parse, parseAllDocuments } from "yaml";
import type { SchemaFiles } from "./schemas.ts";

const run = promisify(execFile);

/** A rendered Kubernetes object (what a manifest declares). */
export interface K8sObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
  readonly [field: string]: unknown;
}

/** The objects `kustomize build <dir>` renders. */
export async function render(kustomize: string, dir: string): Promise<K8sObject[]> {
  const { stdout } = await run(kustomize, ["build", dir], { maxBuffer: 16 << 20 });
  return parseAllDocuments(stdout).map((d) => d.toJS() as K8sObject);
}

type Schema = Record<string, unknown>;

/**
 * Rewrites OpenAPI quirks into JSON Schema that says what the API server accepts: int-or-string
 * fields and quantities take numbers or strings; objects with declared properties and no
 * `additionalProperties` or preserve-unknown-fields marker accept nothing else.
 */
function tighten(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tighten);
  if (node === null || typeof node !== "object") return node;
  const s: Schema = {};
  for (const [k, v] of Object.entries(node)) s[k] = tighten(v);
  if (s["format"] === "int-or-string" || s["x-kubernetes-int-or-string"] === true) {
    const { type: _t, format: _f, ...rest } = s;
    return { ...rest, anyOf: [{ type: "string" }, { type: "integer" }] };
  }
  if (s["properties"] && s["additionalProperties"] === undefined && s["x-kubernetes-preserve-unknown-fields"] !== true) {
    s["additionalProperties"] = false;
  }
  return s;
}

/** Validates rendered objects; `check` returns the problems of one object (empty when valid). */
export interface Validator {
  check(obj: K8sObject): string[];
}

export async function createValidator(files: SchemaFiles): Promise<Validator> {
  const swagger = JSON.parse(await readFile(files.swagger, "utf8")) as { definitions: Record<string, Schema> };
  const definitions = tighten(swagger.definitions) as Record<string, Schema>;
  // A quantity is a string in the spec, yet `nvidia.com/gpu: 1` is what everyone writes and the API takes.
  definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = { anyOf: [{ type: "string" }, { type: "number" }] };
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: "k8s", definitions });
  const byKind = new Map<string, ValidateFunction>();
  for (const [name, def] of Object.entries(swagger.definitions)) {
    const gvks = def["x-kubernetes-group-version-kind"] as Array<{ group: string; version: string; kind: string }> | undefined;
    for (const g of gvks ?? []) {
      const apiVersion = g.group === "" ? g.version : `${g.group}/${g.version}`;
      const key = `${apiVersion}/${g.kind}`;
      if (!byKind.has(key)) byKind.set(key, ajv.compile({ $ref: `k8s#/definitions/${name}` }));
    }
  }
  const crd = parse(await readFile(files.kedaScaledObjects, "utf8")) as {
    spec: { group: string; names: { kind: string }; versions: Array<{ name: string; schema: { openAPIV3Schema: Schema } }> };
  };
  for (const v of crd.spec.versions) {
    const schema = tighten(v.schema.openAPIV3Schema) as Schema;
    // The API server checks metadata itself; the CRD leaves it open.
    (schema["properties"] as Schema)["metadata"] = { $ref: "k8s#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" };
    byKind.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, ajv.compile(schema));
  }
  return {
    check(obj) {
      const validate = byKind.get(`${obj.apiVersion}/${obj.kind}`);
      const where = `${obj.kind}/${obj.metadata?.name ?? "?"}`;
      if (!validate) return [`${where}: no schema for ${obj.apiVersion} ${obj.kind}`];
      if (validate(obj)) return [];
      return (validate.errors ?? []).map((e) => {
        const extra = e.keyword === "additionalProperties" ? ` '${String((e.params as { additionalProperty: string }).additionalProperty)}'` : "";
        return `${where}: ${e.instancePath || "/"} ${e.message ?? e.keyword}${extra}`;
      });
    },
  };
}
