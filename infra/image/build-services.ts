/**
 * `npm run build:services`: compiles the gateway and the worker to plain JavaScript, so they run
 * as `node dist/gateway.js` / `node dist/worker.js` with production dependencies only (no tsx,
 * no TypeScript). One ESM bundle per service (esbuild); the inference threads' entry is a bundle
 * of its own, found beside `worker.js` as the source finds its `.mjs` entry. Packages that cannot
 * be bundled (native addons, packages that load files or modules by computed path) stay external
 * and are copied into the image's node_modules by `prodModules()`.
 *
 *   npm run build:services            # → dist/
 *   npm run build:services -- --out x # → x/
 */
import { build } from "esbuild";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");

/**
 * Left out of the bundles: onnxruntime-node is a native addon and @platformatic/wasm-utils a wasm
 * module, both read files beside their own package.json; the OpenTelemetry SDK and pino load
 * modules by computed names (instrumentations, transports), which a bundle cannot follow.
 */
export const EXTERNAL_PACKAGES = [
  "onnxruntime-node",
  "@platformatic/wasm-utils",
  "@opentelemetry/sdk-node",
  "@opentelemetry/exporter-trace-otlp-proto",
  "pino",
] as const;

/** Output name → source, and the extension each output gets. */
const ENTRIES = [
  { out: "gateway", src: "services/gateway/src/main.ts", ext: ".js" },
  { out: "worker", src: "services/worker/src/main.ts", ext: ".js" },
  // The worker starts its threads from `./inference-thread-entry.mjs` next to itself (inference-threads.ts).
  { out: "inference-thread-entry", src: "services/worker/src/runtime/inference-thread.ts", ext: ".mjs" },
] as const;

/** CommonJS dependencies inside an ESM bundle still call `require` for Node built-ins. */
const BANNER = `import { createRequire as __shoalCreateRequire } from "node:module"; const require = __shoalCreateRequire(import.meta.url);`;

/** Builds the three bundles into `outDir` (emptied first) and returns their paths. */
export async function buildServices(outDir = join(REPO_ROOT, "dist")): Promise<string[]> {
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const outputs: string[] = [];
  for (const entry of ENTRIES) {
    const result = await build({
      absWorkingDir: REPO_ROOT,
      entryPoints: [{ in: entry.src, out: entry.out }],
      outdir: outDir,
      outExtension: { ".js": entry.ext },
      bundle: true,
      platform: "node",
      target: "node24",
      format: "esm",
      banner: { js: BANNER },
      external: [...EXTERNAL_PACKAGES],
      sourcemap: "linked",
      legalComments: "none",
      logLevel: "warning",
      metafile: true,
    });
    outputs.push(...Object.keys(result.metafile.outputs).filter((f) => f.endsWith(entry.ext)));
  }
  await writeFile(join(outDir, "package.json"), `${JSON.stringify({ type: "module", private: true }, null, 2)}\n`);
  return outputs;
}

if (import.meta.main) {
  const i = process.argv.indexOf("--out");
  const out = i > 0 ? resolve(process.argv[i + 1] ?? "dist") : join(REPO_ROOT, "dist");
  const started = performance.now();
  const files = await buildServices(out);
  process.stdout.write(`built ${files.join(", ")} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
