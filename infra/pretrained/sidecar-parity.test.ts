/**
 * The PyTorch runtime sidecar (services/sidecar-pytorch) behind the worker's runtime interface:
 * on the real all-MiniLM-L6-v2, its vectors match the ONNX path's (onnxruntime-node inference
 * threads) on the same token ids, alone and in padded multi-group runs; it is supervised (a
 * killed sidecar fails the run in flight with `thread-crashed`, a new one is started and the model
 * reloaded, and the same inputs then give the same vectors); a cross-encoder gets its token types
 * and returns the logits PyTorch gives each pair alone; bad inputs and bad weights get typed
 * errors. Real processes throughout: the sidecar runs in the infra/pretrained Python environment
 * (torch on CPU here). Skipped only with SHOAL_SKIP_PRETRAINED=1.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { readModelDir, ModelLoadError, type ModelSpec } from "../../services/common/src/model-manifest.ts";
import { InferenceError } from "../../services/worker/src/runtime/errors.ts";
import { createInferenceThreads, type InferenceThreads, type RunGroup } from "../../services/worker/src/runtime/inference-threads.ts";
import { SidecarHost } from "../../services/worker/src/runtime/sidecar/sidecar-host.ts";
import { createSidecarPool } from "../../services/worker/src/runtime/sidecar/sidecar-pool.ts";
import { createTextTokenizer } from "../../services/worker/src/runtime/text-tokenizer.ts";
import { ensureModel } from "../models/src/ensure-model.ts";
import { ensurePretrained, ensurePretrainedEnv } from "../models/src/pretrained.ts";
import { runLogged } from "../models/src/python-env.ts";
import { cosine } from "./cosine.ts";

const SIDECAR_SCRIPT = fileURLToPath(new URL("../../services/sidecar-pytorch/sidecar.py", import.meta.url));
const CROSS_ENCODER_SCRIPT = fileURLToPath(new URL("./tiny_cross_encoder.py", import.meta.url));
const SENTENCES_FILE = fileURLToPath(new URL("./sentences.json", import.meta.url));
/** Same weights, float32 on both sides: only summation order differs. */
const MIN_COSINE = 0.9999;

const skip = process.env["SHOAL_SKIP_PRETRAINED"] === "1" ? "SHOAL_SKIP_PRETRAINED=1" : false;
const lines: string[] = [];
const logger = {
  info: (obj: object, msg?: string) => lines.push(`${msg} ${JSON.stringify(obj)}`),
  warn: (obj: object, msg?: string) => lines.push(`WARN ${msg} ${JSON.stringify(obj)}`),
};

function rows(v: Float32Array, dims: number): Float32Array[] {
  return Array.from({ length: v.length / dims }, (_, i) => v.subarray(i * dims, (i + 1) * dims));
}

describe("PyTorch runtime sidecar", { skip }, () => {
  let spec: ModelSpec;
  let host: SidecarHost;
  let sidecar: InferenceThreads;
  let onnx: InferenceThreads;
  let groups: RunGroup[];
  let work: string;

  before(
    async () => {
      const dir = await ensurePretrained();
      const env = await ensurePretrainedEnv();
      spec = await readModelDir(dir);
      const tokenizer = await createTextTokenizer(spec);
      const { sentences } = JSON.parse(await readFile(SENTENCES_FILE, "utf8")) as { sentences: string[] };
      const ids = sentences.map((s) => tokenizer.encode(s, { truncate: true }).ids);
      // Three padded groups of mixed lengths, as the worker's padding plan sends them.
      groups = [{ ids: ids.slice(0, 9) }, { ids: ids.slice(9, 17) }, { ids: ids.slice(17) }];
      host = new SidecarHost({
        name: "pytorch",
        python: env.python,
        script: SIDECAR_SCRIPT,
        device: "cpu",
        dtype: "auto",
        threads: 1,
        logger,
        pingIntervalMs: 500,
      });
      sidecar = await createSidecarPool({ spec, host, weightsDir: join(dir, "torch") });
      onnx = await createInferenceThreads({ spec, threads: 1, intraOpThreads: 1 });
      work = await mkdtemp(join(tmpdir(), "shoal-sidecar-"));
    },
    { timeout: 20 * 60_000 },
  );

  after(async () => {
    if (process.env["SHOAL_DEBUG_SIDECAR"]) process.stderr.write(`${lines.join("\n")}\n`);
    await sidecar?.close();
    await host?.close();
    await onnx?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("labels itself and gives the ONNX path's vectors on the same ids (cosine >= 0.9999), in padded multi-group runs", async () => {
    assert.equal(sidecar.info.runtime, "sidecar:pytorch");
    assert.equal(sidecar.info.provider, "cpu");
    assert.equal(sidecar.dimensions, 384);
    const [a, b] = await Promise.all([sidecar.run(groups), onnx.run(groups)]);
    const n = groups.reduce((k, g) => k + g.ids.length, 0);
    assert.equal(a.vectors.length, n * 384);
    assert.equal(a.paddedTokens, b.paddedTokens);
    assert.ok(a.inferenceMs > 0);
    const cos = rows(a.vectors, 384).map((r, i) => cosine(r, rows(b.vectors, 384)[i]!));
    const min = Math.min(...cos);
    process.stderr.write(`sidecar vs ONNX on ${n} sentences: min cosine ${min.toFixed(7)}\n`);
    assert.ok(min >= MIN_COSINE, `min cosine ${min}`);
    // And alone: a text's vector does not depend on its batch companions.
    const alone = await sidecar.run([{ ids: [groups[0]!.ids[3]!] }]);
    assert.ok(cosine(alone.vectors, rows(a.vectors, 384)[3]!) >= 0.99999);
  });

  it("answers bad input with invalid-input and keeps serving", async () => {
    await assert.rejects(sidecar.run([{ ids: [] }]), (e: unknown) => e instanceof InferenceError && e.reason === "invalid-input");
    await assert.rejects(sidecar.run([{ ids: [[101, -5, 102]] }]), (e: unknown) => e instanceof InferenceError && e.reason === "invalid-input");
    const ok = await sidecar.run([{ ids: [groups[0]!.ids[0]!] }]);
    assert.equal(ok.vectors.length, 384);
  });

  it("refuses a folder without weights with ModelLoadError", async () => {
    await assert.rejects(createSidecarPool({ spec, host, weightsDir: work }), (e: unknown) => e instanceof ModelLoadError && /config\.json/.test(e.message));
  });

  it("restarts a killed sidecar: the run in flight fails thread-crashed, the model is reloaded, the same ids give the same vectors", async () => {
    const before = await sidecar.run(groups);
    const { pid } = await host.hello();
    const inFlight = sidecar.run(groups);
    process.kill(pid, "SIGKILL");
    await assert.rejects(inFlight, (e: unknown) => e instanceof InferenceError && e.reason === "thread-crashed");
    const again = await sidecar.run(groups);
    const { pid: newPid } = await host.hello();
    assert.notEqual(newPid, pid);
    const min = Math.min(...rows(again.vectors, 384).map((r, i) => cosine(r, rows(before.vectors, 384)[i]!)));
    assert.ok(min >= 0.99999, `min cosine after restart ${min}`);
    assert.ok(lines.some((l) => l.includes("runtime sidecar lost")));
  });

  it("runs a cross-encoder (rerank): token types reach the model, logits match the model run alone in PyTorch", async () => {
    const rerankSpec = await readModelDir(await ensureModel("tiny-rerank"));
    const tokenizer = await createTextTokenizer(rerankSpec);
    const { sentences } = JSON.parse(await readFile(SENTENCES_FILE, "utf8")) as { sentences: string[] };
    const pairs = sentences.slice(0, 6).map((d) => tokenizer.encodePair("where do small fish live?", d, { truncate: true }));
    const vocab = Object.keys((JSON.parse(await readFile(rerankSpec.tokenizerPath, "utf8")) as { model: { vocab: object } }).model.vocab).length;
    const pairsFile = join(work, "pairs.json");
    await writeFile(pairsFile, JSON.stringify({ ids: pairs.map((p) => [...p.ids]), types: pairs.map((p) => [...p.typeIds]) }));
    const modelDir = join(work, "cross-encoder");
    await runLogged((await ensurePretrainedEnv()).python, ["-B", CROSS_ENCODER_SCRIPT, "--vocab", String(vocab), "--pairs", pairsFile, "--out", modelDir], {
      log: () => {},
    });
    const reference = JSON.parse(await readFile(join(modelDir, "reference.json"), "utf8")) as { logits: number[] };
    const pool = await createSidecarPool({ spec: rerankSpec, host, weightsDir: modelDir });
    try {
      const run = await pool.run([{ ids: pairs.map((p) => p.ids), typeIds: pairs.map((p) => p.typeIds) }]);
      assert.equal(run.vectors.length, pairs.length);
      for (const [i, want] of reference.logits.entries()) assert.ok(Math.abs(run.vectors[i]! - want) < 1e-4, `pair ${i}: ${run.vectors[i]} vs ${want}`);
      // Without the token types the logits change: they do reach the model.
      const untyped = await pool.run([{ ids: pairs.map((p) => p.ids) }]);
      assert.ok(reference.logits.some((want, i) => Math.abs(untyped.vectors[i]! - want) > 1e-3));
    } finally {
      await pool.close();
    }
  });

  it("kills and replaces a sidecar that stops answering (SIGSTOP), failing its run", { timeout: 60_000 }, async () => {
    const hung = new SidecarHost({
      name: "pytorch",
      python: (await ensurePretrainedEnv()).python,
      script: SIDECAR_SCRIPT,
      device: "cpu",
      dtype: "auto",
      threads: 1,
      logger,
      pingIntervalMs: 200,
      hangTimeoutMs: 1500,
    });
    try {
      const pool = await createSidecarPool({ spec, host: hung, weightsDir: join(spec.dir, "torch") });
      const { pid } = await hung.hello();
      process.kill(pid, "SIGSTOP");
      await assert.rejects(pool.run(groups), (e: unknown) => e instanceof InferenceError && e.reason === "thread-crashed");
      const after = await pool.run([{ ids: [groups[0]!.ids[0]!] }]);
      assert.equal(after.vectors.length, 384);
      assert.notEqual((await hung.hello()).pid, pid);
      await pool.close();
    } finally {
      await hung.close();
    }
  });
});
