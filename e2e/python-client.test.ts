import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { createShoalClient } from "@shoal/client";
import { ensurePythonEnv } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { maxAbsDiff } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";

const TEXTS = ["Polyglot clients see the same vectors.", "grpcio speaks HTTP/2 to the gateway's h2c port.", "Ünïcödé and emoji 🐟 survive the trip."];
const run = promisify(execFile);

interface PythonOutput {
  models: { id: string; dimensions: number }[];
  model: string;
  embeddings: number[][];
  packed: number[][];
  tokens: number[];
  prompt_tokens: number;
  unknown_model: string;
  reranked: { index: number; score: number }[] | null;
  classified: Record<string, number>[] | null;
}

/** Runs e2e/python/client.py with `stdin` and the generated stubs on PYTHONPATH; parses its JSON. */
function runClient(python: string, stubs: string, target: string, stdin: string, extra: string[] = []): Promise<PythonOutput> {
  return new Promise((ok, fail) => {
    const child = spawn(python, [resolve(REPO_ROOT, "e2e/python/client.py"), "--target", target, ...extra], {
      env: { ...process.env, PYTHONPATH: stubs },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("error", fail);
    child.once("exit", (code) => (code === 0 ? ok(JSON.parse(out) as PythonOutput) : fail(new Error(`client.py exited ${code}:\n${err}`))));
    child.stdin.end(stdin);
  });
}

describe("a Python grpcio client, on stubs generated from proto/ at test time, gets the same vectors", () => {
  let cluster: TestCluster;
  let python: string;
  let stubs: string;
  before(async () => {
    // A venv cached outside the clone, keyed by the pinned requirements and the interpreter
    // (${SHOAL_CACHE:-~/.cache/shoal}/pyenv-grpc-client-<hash>); the first run fetches wheels from PyPI.
    ({ python } = await ensurePythonEnv("grpc-client", resolve(REPO_ROOT, "e2e/python/requirements.txt"), {
      log: (line) => process.stderr.write(`${line}\n`),
    }));
    stubs = await mkdtemp(join(tmpdir(), "shoal-pystubs-"));
    await run(python, [
      "-m",
      "grpc_tools.protoc",
      `-I${resolve(REPO_ROOT, "proto")}`,
      `--python_out=${stubs}`,
      `--grpc_python_out=${stubs}`,
      "shoal/v1/common.proto",
      "shoal/v1/inference.proto",
      "shoal/v1/model.proto",
    ]);
    cluster = await startCluster({ presets: ["tiny", "tiny-rerank", "tiny-classify"] });
  });
  after(async () => {
    await cluster?.stop();
    if (stubs) await rm(stubs, { recursive: true, force: true });
  });

  test("ListModels and Embed (float and packed float32) match the TypeScript Connect client within 1e-6; NOT_FOUND maps", async () => {
    const base = cluster.urls[0]!;
    const py = await runClient(python, stubs, new URL(base).host, JSON.stringify(TEXTS), ["--model", "shoal-tiny-embed"]);
    const client = createShoalClient({ baseUrl: base, protocol: "connect" });
    const models = await client.listModels();
    assert.deepEqual(
      py.models,
      models.map((m) => ({ id: m.id, dimensions: m.dimensions })),
    );
    assert.equal(py.model, "shoal-tiny-embed");

    const ts = await client.embed(py.model, TEXTS);
    assert.equal(py.embeddings.length, TEXTS.length);
    for (const [i, v] of ts.vectors.entries()) {
      assert.ok(maxAbsDiff(py.embeddings[i]!, Array.from(v)) < 1e-6, `float vector ${i}`);
      assert.ok(maxAbsDiff(py.packed[i]!, Array.from(v)) < 1e-6, `packed vector ${i}`);
    }
    assert.deepEqual(py.tokens, ts.tokens);
    assert.equal(py.prompt_tokens, ts.usage.promptTokens);
    assert.equal(py.unknown_model, "NOT_FOUND");
  });

  test("Rerank and Classify from Python give the TypeScript client's scores", async () => {
    const base = cluster.urls[0]!;
    const [rerankModel, classifyModel] = ["shoal-tiny-rerank", "shoal-tiny-classify"];
    const py = await runClient(python, stubs, new URL(base).host, JSON.stringify(TEXTS), ["--rerank-model", rerankModel, "--classify-model", classifyModel]);
    const client = createShoalClient({ baseUrl: base, protocol: "connect" });
    const ts = await client.rerank(rerankModel, TEXTS[0]!, TEXTS.slice(1));
    assert.deepEqual(
      py.reranked!.map((r) => r.index),
      ts.results.map((r) => r.index),
      "same order",
    );
    py.reranked!.forEach((r, i) => {
      assert.ok(Math.abs(r.score - ts.results[i]!.score) < 1e-6, `score of document ${r.index}`);
    });
    const tc = await client.classify(classifyModel, TEXTS);
    assert.equal(py.classified!.length, TEXTS.length);
    tc.classifications.forEach((c, i) => {
      for (const l of c.labels) assert.ok(Math.abs(py.classified![i]![l.label]! - l.score) < 1e-6, `text ${i}, label ${l.label}`);
    });
  });
});
