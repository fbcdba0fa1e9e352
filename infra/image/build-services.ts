/**
 * `npm run build:services`: compiles the gateway and the worker to plain JavaScript, so they run
 * as `node dist/gateway.js` / `node dist/worker.js` with production dependencies only (no tsx,
 * no TypeScript). One ESM bundle per service (esbuild); the inference threads' entry is a bundle
 * of its own, found beside `worker.js` as the source finds its `.mjs` entry. Packages that cannot
 * be bundled (native addons, packages that load files or modules by computed path) stay external
 * and are copied into the image's node_modules by `prodModules()`.
 *
 *   npm run build:services            # → dist/ (with the sidecar's Python files and the built console beside)
 *   npm run build:services -- --out x # → x/
 */
import { build } from "esbuild";
import { existsSync } from "node:fs";
import { cp, mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");

/**
 * Left out of the bundles: onnxruntime-node and @node-rs/crc32 are native addons and
 * @platformatic/wasm-utils a wasm module, all read files beside their own package.json (or in their
 * per-platform packages); the OpenTelemetry SDK and pino load modules by computed names
 * (instrumentations, transports), which a bundle cannot follow.
 */
export const EXTERNAL_PACKAGES = [
  "onnxruntime-node",
  "@node-rs/crc32",
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
  // The gateway decodes large Connect JSON bodies on a thread started from `./json-thread-entry.mjs` (json-decoder.ts).
  { out: "json-thread-entry", src: "services/gateway/src/json-thread.ts", ext: ".mjs" },
] as const;

/** CommonJS dependencies inside an ESM bundle still call `require` for Node built-ins. */
const BANNER = `import { createRequire as __shoalCreateRequire } from "node:module"; const require = __shoalCreateRequire(import.meta.url);`;

/**
 * Files the services read beside their code, copied beside the bundles with `assets`, where the
 * services look first (`firstExisting`): the PyTorch sidecar's Python files, and the web console when
 * it is built (`services/console/dist`). The image leaves them out: it has no PyTorch, and it sets
 * SHOAL_CONSOLE_DIR to a console of its own.
 */
const ASSETS = [
  { from: "services/sidecar-pytorch/sidecar.py", to: "sidecar-pytorch/sidecar.py", required: true },
  { from: "services/sidecar-pytorch/frames.py", to: "sidecar-pytorch/frames.py", required: true },
  { from: "services/console/dist", to: "console", required: false },
] as const;

/**
 * Builds the four bundles into `outDir` (emptied first) and returns their paths; with `assets`,
 * copies ASSETS beside them, so `node <outDir>/worker.js` runs sidecar models and the gateway
 * serves the console as from the sources.
 */
export async function buildServices(outDir = join(REPO_ROOT, "dist"), opts: { readonly assets?: boolean } = {}): Promise<string[]> {
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
  if (opts.assets === true) {
    for (const a of ASSETS) {
      const from = join(REPO_ROOT, a.from);
      if (!a.required && !existsSync(from)) continue;
      await cp(from, join(outDir, a.to), { recursive: true });
    }
  }
  return outputs;
}

if (import.meta.main) {
  const i = process.argv.indexOf("--out");
  const out = i > 0 ? resolve(process.argv[i + 1] ?? "dist") : join(REPO_ROOT, "dist");
  const started = performance.now();
  const files = await buildServices(out, { assets: true });
  process.stdout.write(`built ${files.join(", ")} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
