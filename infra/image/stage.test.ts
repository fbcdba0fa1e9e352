import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { EXTERNAL_PACKAGES, REPO_ROOT } from "./build-services.ts";
import { prodModules } from "./stage.ts";

test("the image's node_modules: the external packages and their runtime closure, no dev tooling", async () => {
  const mods = await prodModules();
  const paths = new Set(mods.map((m) => m.path));
  for (const name of EXTERNAL_PACKAGES) assert.ok(paths.has(`node_modules/${name}`), name);
  // What the externals need at run time comes along (onnxruntime-node → onnxruntime-common, pino → sonic-boom).
  for (const dep of ["onnxruntime-common", "sonic-boom", "@opentelemetry/api"]) assert.ok(paths.has(`node_modules/${dep}`), dep);
  // Bundled or dev-only packages stay out.
  for (const absent of ["tsx", "esbuild", "typescript", "@biomejs/biome", "node", "kafkajs", "@connectrpc/connect"]) {
    assert.ok(!paths.has(`node_modules/${absent}`), absent);
  }
  for (const m of mods) assert.ok(existsSync(join(REPO_ROOT, m.path)), `${m.path} is installed`);
});
