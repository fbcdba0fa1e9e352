import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { HubDownloadError, HubEntryNotFoundError, HubGatedError, HubOfflineMissError, HubRepoNotFoundError, HubRevisionNotFoundError } from "./errors.ts";
import { startFakeHub, type FakeHub } from "./fake-hub.ts";
import { fetchHubModel, type FetchHubModelOptions } from "./fetch-hub-model.ts";
import { formatHubProgress } from "./progress.ts";
import type { HubProgress } from "./download.ts";

let hub: FakeHub;
let scratch: string;
let repoCount = 0;

before(async () => {
  hub = await startFakeHub();
  scratch = await mkdtemp(join(tmpdir(), "shoal-hub-"));
});
after(async () => {
  await hub.close();
  await rm(scratch, { recursive: true, force: true });
});

/** A model repository's files: small configs and a binary "ONNX" file (the protocol does not care). */
function fixture(tag: string, onnxBytes = 300_000): Record<string, string | Uint8Array> {
  return {
    "config.json": JSON.stringify({ architectures: ["BertModel"], tag }),
    "tokenizer.json": JSON.stringify({ version: "1.0", tag }),
    "modules.json": "[]",
    "1_Pooling/config.json": JSON.stringify({ pooling_mode_mean_tokens: true }),
    "2_Normalize/config.json": "{}",
    "onnx/model.onnx": randomBytes(onnxBytes),
    "onnx/model_qint8_avx512.onnx": randomBytes(1000),
    "README.md": `# ${tag}`,
    "model.safetensors": randomBytes(2000),
  };
}

/** A fresh repository name and cache folder per test: no shared state. */
async function fresh(): Promise<{ repo: string; cacheDir: string; home: string }> {
  repoCount++;
  const home = join(scratch, `home-${repoCount}`);
  await mkdir(home, { recursive: true });
  return { repo: `org/model-${repoCount}`, cacheDir: join(home, "hub"), home };
}

function opts(repo: string, cacheDir: string, home: string, extra: Partial<FetchHubModelOptions> = {}): FetchHubModelOptions {
  return { repo, cacheDir, endpoint: hub.url, env: { HF_HOME: home }, ...extra };
}

const sha256 = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");
const gitSha1 = (b: Uint8Array): string => createHash("sha1").update(`blob ${b.byteLength}\0`).update(b).digest("hex");

test("a branch resolves to its commit sha; the snapshot links to blobs named by ETag", async () => {
  const { repo, cacheDir, home } = await fresh();
  const files = fixture("a");
  const sha = await hub.addRevision(repo, files);
  const model = await fetchHubModel(opts(repo, cacheDir, home));
  assert.equal(model.commitSha, sha);
  assert.equal(model.revision, "main");
  assert.equal(model.dir, join(cacheDir, `models--org--${repo.split("/")[1]}`, "snapshots", sha));
  assert.deepEqual(model.files, ["1_Pooling/config.json", "2_Normalize/config.json", "config.json", "modules.json", "onnx/model.onnx", "tokenizer.json"]);
  assert.equal(model.fromCache, false);
  assert.equal(await readFile(join(model.dir, "..", "..", "refs", "main"), "utf8"), sha);
  const onnx = files["onnx/model.onnx"] as Uint8Array;
  assert.deepEqual(await readFile(join(model.dir, "onnx/model.onnx")), Buffer.from(onnx));
  // LFS files are named by sha256, regular files by git blob sha1, as huggingface_hub names them.
  assert.equal(await readlink(join(model.dir, "onnx/model.onnx")), `../../../blobs/${sha256(onnx)}`);
  assert.equal(await readlink(join(model.dir, "config.json")), `../../blobs/${gitSha1(Buffer.from(files["config.json"] as string))}`);
  const total = Object.entries(files)
    .filter(([f]) => model.files.includes(f))
    .reduce((n, [, c]) => n + Buffer.byteLength(c), 0);
  assert.equal(model.downloadedBytes, total);
});

test("two revisions give two snapshots; main moves; a sha and a tag resolve too", async () => {
  const { repo, cacheDir, home } = await fresh();
  const v1 = await hub.addRevision(repo, fixture("one"), { refs: ["main", "v1"] });
  const v2 = await hub.addRevision(repo, fixture("two"));
  const [main, tagged, bySha] = await Promise.all([
    fetchHubModel(opts(repo, cacheDir, home)),
    fetchHubModel(opts(repo, cacheDir, home, { revision: "v1" })),
    fetchHubModel(opts(repo, cacheDir, home, { revision: v2 })),
  ]);
  assert.equal(main.commitSha, v2);
  assert.equal(tagged.commitSha, v1);
  assert.equal(bySha.dir, main.dir);
  assert.notEqual(main.dir, tagged.dir);
  assert.match(await readFile(join(main.dir, "config.json"), "utf8"), /"two"/);
  assert.match(await readFile(join(tagged.dir, "config.json"), "utf8"), /"one"/);
  hub.setRef(repo, "main", v1);
  const moved = await fetchHubModel(opts(repo, cacheDir, home));
  assert.equal(moved.commitSha, v1);
  assert.equal(await readFile(join(cacheDir, `models--${repo.replace("/", "--")}`, "refs", "main"), "utf8"), v1);
});

test("a second fetch downloads nothing; a new revision sharing a blob links it without download", async () => {
  const { repo, cacheDir, home } = await fresh();
  const files = fixture("reuse");
  await hub.addRevision(repo, files);
  await fetchHubModel(opts(repo, cacheDir, home));
  const seen = hub.requests.length;
  const again = await fetchHubModel(opts(repo, cacheDir, home));
  const calls = hub.requests.slice(seen);
  assert.deepEqual(
    calls.map((r) => `${r.method} ${r.path}`),
    [`GET /api/models/${repo}/revision/main`],
  );
  assert.equal(again.downloadedBytes, 0);
  const next = await hub.addRevision(repo, { ...files, "config.json": '{"changed":true}' });
  const mark = hub.requests.length;
  const third = await fetchHubModel(opts(repo, cacheDir, home));
  assert.equal(third.commitSha, next);
  const downloads = hub.requests.slice(mark).filter((r) => r.method === "GET" && !r.path.startsWith("/api/"));
  assert.deepEqual(
    downloads.map((r) => r.path),
    [`/${repo}/resolve/${next}/config.json`],
  );
});

test("offline serves from the cache through refs/, with no request; an unreachable endpoint falls back too", async () => {
  const { repo, cacheDir, home } = await fresh();
  const sha = await hub.addRevision(repo, fixture("off"), { refs: ["main", "v9"] });
  await fetchHubModel(opts(repo, cacheDir, home, { revision: "v9" }));
  const seen = hub.requests.length;
  const offline = await fetchHubModel(opts(repo, cacheDir, home, { revision: "v9", env: { HF_HOME: home, HF_HUB_OFFLINE: "1" } }));
  assert.equal(hub.requests.length, seen);
  assert.equal(offline.commitSha, sha);
  assert.equal(offline.fromCache, true);
  assert.deepEqual(offline.files, ["1_Pooling/config.json", "2_Normalize/config.json", "config.json", "modules.json", "onnx/model.onnx", "tokenizer.json"]);
  const unreachable = await fetchHubModel(opts(repo, cacheDir, home, { revision: "v9", endpoint: "http://127.0.0.1:9" }));
  assert.equal(unreachable.commitSha, sha);
  assert.equal(unreachable.fromCache, true);
});

test("offline misses name the repository, revision and file", async () => {
  const { repo, cacheDir, home } = await fresh();
  await hub.addRevision(repo, fixture("miss"));
  await assert.rejects(fetchHubModel(opts(repo, cacheDir, home, { offline: true })), (err: unknown) => {
    assert.ok(err instanceof HubOfflineMissError);
    assert.match(err.message, new RegExp(`hf:${repo}@main`));
    return true;
  });
  await fetchHubModel(opts(repo, cacheDir, home));
  await assert.rejects(
    fetchHubModel(opts(repo, cacheDir, home, { offline: true, files: { include: [], require: ["onnx/other.onnx"] } })),
    (err: unknown) => err instanceof HubOfflineMissError && err.file === "onnx/other.onnx",
  );
});

test("a gated repository: 401 without a token, 403 with a wrong one, served with HF_TOKEN or HF_TOKEN_PATH", async () => {
  const { repo, cacheDir, home } = await fresh();
  await hub.addRevision(repo, fixture("gated"));
  hub.gate(repo, "hf_right");
  await assert.rejects(fetchHubModel(opts(repo, cacheDir, home)), (err: unknown) => {
    assert.ok(err instanceof HubGatedError);
    assert.equal(err.status, 401);
    assert.match(err.message, /set HF_TOKEN/);
    return true;
  });
  await assert.rejects(fetchHubModel(opts(repo, cacheDir, home, { env: { HF_HOME: home, HF_TOKEN: "hf_wrong" } })), (err: unknown) => {
    return err instanceof HubGatedError && err.status === 403;
  });
  const withEnv = await fetchHubModel(opts(repo, cacheDir, home, { env: { HF_HOME: home, HF_TOKEN: "hf_right" } }));
  assert.equal(withEnv.files.length, 6);
  const tokenFile = join(home, "token");
  await writeFile(tokenFile, "hf_right\n");
  const other = await fresh();
  const withFile = await fetchHubModel(opts(repo, other.cacheDir, home, { env: { HF_HOME: home } }));
  assert.equal(withFile.commitSha, withEnv.commitSha);
  const resolves = hub.requests.filter((r) => r.path.startsWith(`/${repo}/resolve/`));
  assert.ok(resolves.some((r) => r.authorized));
  const cdn = hub.contentRequests(repo).filter((r) => r.path.startsWith("/lfs-cdn/"));
  assert.ok(cdn.length > 0 && cdn.every((r) => !r.authorized), "the token never goes to the CDN's origin");
});

test("unknown repository, unknown revision and a missing required file are typed errors", async () => {
  const { repo, cacheDir, home } = await fresh();
  await hub.addRevision(repo, fixture("errs"));
  await assert.rejects(fetchHubModel(opts("nobody/nothing", cacheDir, home)), HubRepoNotFoundError);
  await assert.rejects(fetchHubModel(opts(repo, cacheDir, home, { revision: "no-such-branch" })), (err: unknown) => {
    assert.ok(err instanceof HubRevisionNotFoundError);
    assert.match(err.message, /no-such-branch/);
    return true;
  });
  await assert.rejects(
    fetchHubModel(opts(repo, cacheDir, home, { files: { include: ["onnx/model_q4.onnx"], require: ["onnx/model_q4.onnx"] } })),
    (err: unknown) => err instanceof HubEntryNotFoundError && err.file === "onnx/model_q4.onnx" && err.message.includes(repo),
  );
});

test("a download cut off half way is resumed with Range and completes", async () => {
  const { repo, cacheDir, home } = await fresh();
  const files = fixture("cut", 500_000);
  await hub.addRevision(repo, files);
  hub.cutOffOnce(repo, "onnx/model.onnx");
  hub.cutOffOnce(repo, "config.json");
  const model = await fetchHubModel(opts(repo, cacheDir, home));
  assert.deepEqual(await readFile(join(model.dir, "onnx/model.onnx")), Buffer.from(files["onnx/model.onnx"] as Uint8Array));
  assert.equal(await readFile(join(model.dir, "config.json"), "utf8"), files["config.json"]);
  const onnxGets = hub.contentRequests(repo, "onnx/model.onnx");
  assert.equal(onnxGets.length, 2);
  assert.equal(onnxGets[0]?.range, undefined);
  assert.match(onnxGets[1]?.range ?? "", /^bytes=[1-9]\d*-$/);
  assert.match(hub.contentRequests(repo, "config.json")[1]?.range ?? "", /^bytes=[1-9]\d*-$/);
});

test("a partial file left by an earlier process is resumed from where it stopped", async () => {
  const { repo, cacheDir, home } = await fresh();
  const files = fixture("partial", 200_000);
  await hub.addRevision(repo, files);
  const onnx = files["onnx/model.onnx"] as Uint8Array;
  const blobs = join(cacheDir, `models--${repo.replace("/", "--")}`, "blobs");
  await mkdir(blobs, { recursive: true });
  await writeFile(join(blobs, `${sha256(onnx)}.incomplete`), onnx.subarray(0, 123_456));
  const model = await fetchHubModel(opts(repo, cacheDir, home));
  assert.deepEqual(await readFile(join(model.dir, "onnx/model.onnx")), Buffer.from(onnx));
  assert.deepEqual(
    hub.contentRequests(repo, "onnx/model.onnx").map((r) => r.range),
    ["bytes=123456-"],
  );
});

test("content that does not match its ETag is refused and leaves nothing in the cache", async () => {
  const { repo, cacheDir, home } = await fresh();
  await hub.addRevision(repo, fixture("bad"));
  hub.corrupt(repo, "onnx/model.onnx");
  await assert.rejects(fetchHubModel(opts(repo, cacheDir, home, { concurrency: 1 })), (err: unknown) => {
    assert.ok(err instanceof HubDownloadError);
    assert.equal(err.file, "onnx/model.onnx");
    assert.match(err.message, /does not match its ETag/);
    return true;
  });
  const storage = join(cacheDir, `models--${repo.replace("/", "--")}`);
  const blobs = await readdir(join(storage, "blobs"));
  assert.ok(
    blobs.every((b) => /^[0-9a-f]{40}$/.test(b)),
    `only the small files' blobs remain: ${blobs.join(", ")}`,
  );
  const snapshot = (await readdir(join(storage, "snapshots")))[0]!;
  await assert.rejects(readFile(join(storage, "snapshots", snapshot, "onnx/model.onnx")));

  const regular = await fresh();
  await hub.addRevision(regular.repo, fixture("bad2"));
  hub.corrupt(regular.repo, "config.json");
  await assert.rejects(
    fetchHubModel(opts(regular.repo, regular.cacheDir, regular.home)),
    (err: unknown) => err instanceof HubDownloadError && err.file === "config.json",
  );
});

test("progress reports bytes of total per file, ending at the total", async () => {
  const { repo, cacheDir, home } = await fresh();
  const files = fixture("progress", 400_000);
  await hub.addRevision(repo, files);
  const events: HubProgress[] = [];
  await fetchHubModel(opts(repo, cacheDir, home, { onProgress: (p) => events.push(p) }));
  const onnx = events.filter((e) => e.file === "onnx/model.onnx");
  assert.ok(onnx.length >= 2, `several events for a 400 kB file, got ${onnx.length}`);
  assert.ok(onnx.every((e) => e.total === 400_000 && e.repo === repo));
  assert.ok(onnx.every((e, i) => i === 0 || e.bytes > onnx[i - 1]!.bytes));
  assert.equal(onnx.at(-1)?.bytes, 400_000);
  assert.equal(formatHubProgress({ repo, file: "onnx/model.onnx", bytes: 200_000, total: 400_000 }), `hf:${repo} onnx/model.onnx 200 kB / 400 kB (50%)`);
});

test("a named ONNX variant is fetched instead of onnx/model.onnx", async () => {
  const { repo, cacheDir, home } = await fresh();
  await hub.addRevision(repo, fixture("variant"));
  const { shoalModelFiles } = await import("./files.ts");
  const model = await fetchHubModel(opts(repo, cacheDir, home, { files: shoalModelFiles({ onnxFile: "onnx/model_qint8_avx512.onnx" }) }));
  assert.ok(model.files.includes("onnx/model_qint8_avx512.onnx"));
  assert.ok(!model.files.includes("onnx/model.onnx"));
});
