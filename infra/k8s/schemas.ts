/**
 * The tools and schemas the manifests are checked with, fetched once through the Go module proxy
 * and cached outside the clone, keyed by version:
 *
 *   ${SHOAL_CACHE:-~/.cache/shoal}/kustomize-<version>/kustomize   (`go install`)
 *   ${SHOAL_CACHE:-~/.cache/shoal}/k8s-schemas-<kubernetes>-keda-<keda>/
 *     swagger.json            Kubernetes' OpenAPI v2 spec (k8s.io/kubernetes: api/openapi-spec)
 *     keda-scaledobjects.yaml KEDA's ScaledObject CRD (github.com/kedacore/keda/v2: config/crd/bases)
 */
import { execFile } from "node:child_process";
import { access, mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Kubernetes release the API schemas come from (kubectl's minor here). */
export const KUBERNETES_VERSION = "v1.32.4";
export const KEDA_VERSION = "v2.21.1";
/** The kustomize kubectl 1.32 embeds. */
export const KUSTOMIZE_VERSION = "v5.5.0";

const cacheRoot = (): string => process.env["SHOAL_CACHE"] ?? join(homedir(), ".cache/shoal");

/** The pinned kustomize binary, built with `go install` on first use (about two minutes). */
export async function ensureKustomize(): Promise<string> {
  const dir = join(cacheRoot(), `kustomize-${KUSTOMIZE_VERSION}`);
  const bin = join(dir, "kustomize");
  if (
    await access(bin).then(
      () => true,
      () => false,
    )
  )
    return bin;
  await run("go", ["install", `sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}`], {
    cwd: tmpdir(),
    env: { ...process.env, GOBIN: dir, GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
    maxBuffer: 16 << 20,
  }).catch((err: Error) => {
    throw new Error(`go install kustomize ${KUSTOMIZE_VERSION} failed (Go and the module proxy are needed once): ${err.message}`);
  });
  return bin;
}

/** Reads one file out of a Go module's zip, downloaded (or found) in the module cache. */
async function fileFromModule(module: string, version: string, path: string): Promise<Buffer> {
  const scratch = await mkdtemp(join(tmpdir(), "shoal-gomod-"));
  try {
    // A module whose go.mod wants a newer Go than this one still downloads; only extraction fails,
    // and the zip is all this needs. Outside any module, so no go.mod is touched.
    const { stdout } = await run("go", ["mod", "download", "-json", `${module}@${version}`], {
      cwd: scratch,
      env: { ...process.env, GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
      maxBuffer: 1 << 20,
    }).catch((err: { stdout?: string; message: string }) => {
      if (err.stdout?.includes('"Zip"')) return { stdout: err.stdout };
      throw new Error(`go mod download ${module}@${version} failed: ${err.message}`);
    });
    const zip = (JSON.parse(stdout) as { Zip?: string }).Zip;
    if (!zip) throw new Error(`go mod download ${module}@${version} gave no zip: ${stdout}`);
    const { stdout: bytes } = await run("unzip", ["-p", zip, `${module}@${version}/${path}`], { encoding: "buffer", maxBuffer: 64 << 20 });
    if (bytes.length === 0) throw new Error(`${module}@${version} has no ${path}`);
    return bytes;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

export interface SchemaFiles {
  readonly swagger: string;
  readonly kedaScaledObjects: string;
}

/** Fetches (once) and returns the paths of the cached schema files. */
export async function ensureSchemas(): Promise<SchemaFiles> {
  const dir = join(cacheRoot(), `k8s-schemas-${KUBERNETES_VERSION}-keda-${KEDA_VERSION}`);
  const files: SchemaFiles = { swagger: join(dir, "swagger.json"), kedaScaledObjects: join(dir, "keda-scaledobjects.yaml") };
  const have = await readFile(files.kedaScaledObjects).then(
    () => true,
    () => false,
  );
  if (have) return files;
  await mkdir(dir, { recursive: true });
  const swagger = await fileFromModule("k8s.io/kubernetes", KUBERNETES_VERSION, "api/openapi-spec/swagger.json");
  const keda = await fileFromModule("github.com/kedacore/keda/v2", KEDA_VERSION, "config/crd/bases/keda.sh_scaledobjects.yaml");
  await writeFile(`${files.swagger}.partial`, swagger);
  await rename(`${files.swagger}.partial`, files.swagger);
  // Written last: its presence means the folder is complete.
  await writeFile(`${files.kedaScaledObjects}.partial`, keda);
  await rename(`${files.kedaScaledObjects}.partial`, files.kedaScaledObjects);
  return files;
}
