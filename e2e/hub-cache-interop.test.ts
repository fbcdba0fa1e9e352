/**
 * The Hub cache is shared with Python tools: huggingface_hub (the real library, from PyPI) fills
 * a cache from the fake Hub that Shoal then serves offline, and Shoal fills one that
 * huggingface_hub reads with HF_HUB_OFFLINE=1 (issue #48). Needs Python 3.10+, no broker.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { fetchHubModel, SHOAL_MODEL_CONFIG_FILES, shoalModelFiles } from "@shoal/common";
import { type FakeHub, startFakeHub } from "@shoal/common/fake-hub";
import { ensurePythonEnv } from "@shoal/models";
import { REPO_ROOT } from "./harness/service-process.ts";

const run = promisify(execFile);
const SCRIPT = resolve(REPO_ROOT, "e2e/python/hub_interop.py");

interface PythonOutput {
  snapshot: string;
  files?: Record<string, string>;
  warnings?: string[];
  repos?: { repo_id: string; revisions: { commit: string; refs: string[]; files: string[] }[] }[];
}

const FILES: Record<string, string | Uint8Array> = {
  "config.json": JSON.stringify({ architectures: ["BertModel"], hidden_size: 32 }),
  "tokenizer.json": JSON.stringify({ version: "1.0", model: { type: "WordPiece" } }),
  "tokenizer_config.json": JSON.stringify({ model_max_length: 128 }),
  "modules.json": JSON.stringify([{ idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" }]),
  "1_Pooling/config.json": JSON.stringify({ word_embedding_dimension: 32, pooling_mode_mean_tokens: true }),
  "onnx/model.onnx": randomBytes(150_000), // LFS: served through a redirect, named by sha256
  "README.md": "# not fetched",
};
const WANTED = ["1_Pooling/config.json", "config.json", "modules.json", "onnx/model.onnx", "tokenizer.json", "tokenizer_config.json"];
const sha256 = (b: Uint8Array | string): string => createHash("sha256").update(b).digest("hex");

describe("Hub cache interop with Python's huggingface_hub", () => {
  let hub: FakeHub;
  let python: string;
  let scratch: string;

  before(async () => {
    ({ python } = await ensurePythonEnv("hub-interop", resolve(REPO_ROOT, "e2e/python/hub-requirements.txt"), {
      log: (line) => process.stderr.write(`${line}\n`),
    }));
    hub = await startFakeHub();
    scratch = await mkdtemp(join(tmpdir(), "shoal-hub-interop-"));
  });
  after(async () => {
    await hub?.close();
    if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
  });

  /** Runs the Python side with only the Hub variables we set (no user token or cache leaks in). */
  async function py(args: string[], env: Record<string, string>): Promise<PythonOutput> {
    const { stdout } = await run(python, [SCRIPT, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: scratch, HF_HUB_DISABLE_TELEMETRY: "1", HF_HUB_DISABLE_PROGRESS_BARS: "1", ...env },
      maxBuffer: 16 << 20,
    });
    return JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as PythonOutput;
  }

  test("Python fills the cache; Shoal serves it offline and online without downloading again", async () => {
    const repo = "interop/python-filled";
    await hub.addRevision(repo, { ...FILES, "config.json": '{"architectures":["BertModel"],"v":0}' }, { refs: ["main"] });
    const v1 = await hub.addRevision(repo, FILES, { refs: ["main", "v1"] });
    const home = join(scratch, "py-home");
    const cacheDir = join(home, "hub");
    const allow = [...SHOAL_MODEL_CONFIG_FILES, "onnx/model.onnx"].flatMap((p) => ["--allow", p]);
    const out = await py(["download", "--repo", repo, "--revision", "v1", ...allow], { HF_ENDPOINT: hub.url, HF_HOME: home });
    assert.equal(out.snapshot, join(cacheDir, "models--interop--python-filled", "snapshots", v1));

    const requestsBefore = hub.requests.length;
    const offline = await fetchHubModel({ repo, revision: "v1", env: { HF_HOME: home, HF_HUB_OFFLINE: "1" } });
    assert.equal(hub.requests.length, requestsBefore, "offline: no request");
    assert.equal(offline.dir, out.snapshot);
    assert.equal(offline.commitSha, v1);
    assert.deepEqual(offline.files, WANTED);
    for (const file of WANTED) assert.equal(sha256(await readFile(join(offline.dir, file))), sha256(FILES[file]!), file);

    const online = await fetchHubModel({ repo, revision: "v1", files: shoalModelFiles(), env: { HF_HOME: home, HF_ENDPOINT: hub.url } });
    assert.equal(online.dir, out.snapshot);
    assert.equal(online.downloadedBytes, 0);
    assert.equal(hub.contentRequests(repo).length, WANTED.length, "each file downloaded once, by Python");
  });

  test("the fake Hub's gate and cut-off behave for huggingface_hub as for Shoal: refused without a token, retried after a cut", async () => {
    const repo = "interop/gated-cut";
    await hub.addRevision(repo, FILES);
    hub.gate(repo, "hf_interop");
    const home = join(scratch, "gated-home");
    await assert.rejects(py(["download", "--repo", repo, "--allow", "config.json"], { HF_ENDPOINT: hub.url, HF_HOME: home }), /GatedRepo|401|restricted/);
    hub.cutOffOnce(repo, "onnx/model.onnx");
    const out = await py(["download", "--repo", repo, "--allow", "onnx/model.onnx"], { HF_ENDPOINT: hub.url, HF_HOME: home, HF_TOKEN: "hf_interop" });
    assert.equal(sha256(await readFile(join(out.snapshot, "onnx/model.onnx"))), sha256(FILES["onnx/model.onnx"]!));
    // huggingface_hub retried the cut transfer. It reads in 10 MB chunks, so from a 150 kB file
    // cut half way it kept nothing and asks again from byte 0 (Shoal's client resumes with Range).
    assert.equal(hub.contentRequests(repo, "onnx/model.onnx").length, 2);
  });

  test("Shoal fills the cache; Python reads it with HF_HUB_OFFLINE=1", async () => {
    const repo = "interop/shoal-filled";
    const sha = await hub.addRevision(repo, FILES);
    const home = join(scratch, "shoal-home");
    const model = await fetchHubModel({ repo, env: { HF_HOME: home, HF_ENDPOINT: hub.url } });
    assert.deepEqual(model.files, WANTED);

    const requestsBefore = hub.requests.length;
    const out = await py(["read", "--repo", repo, ...WANTED.flatMap((f) => ["--file", f])], { HF_HOME: home, HF_HUB_OFFLINE: "1", HF_ENDPOINT: hub.url });
    assert.equal(hub.requests.length, requestsBefore, "Python made no request");
    assert.equal(out.snapshot, model.dir);
    for (const file of WANTED) assert.equal(out.files?.[file], sha256(FILES[file]!), file);
    assert.deepEqual(out.warnings, []);
    const cached = out.repos?.find((r) => r.repo_id === repo);
    assert.deepEqual(cached?.revisions, [{ commit: sha, refs: ["main"], files: WANTED }]);
  });
});
