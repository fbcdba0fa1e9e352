import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { ensurePythonEnv } from "@shoal/models";
import OpenAI, { toFile } from "openai";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { maxAbsDiff } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";

const ACME = "sk-acme-batch-0123456789";
const RIVAL = "sk-rival-batch-0123456789";
const MAX_OPEN = 4;

type Line = { custom_id: string; method: string; url: string; body: Record<string, unknown> };
type OutLine = {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: Record<string, unknown> } | null;
  error: { code: string; message: string } | null;
};

const jsonl = (lines: readonly unknown[]): string => `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;
const parse = (text: string): OutLine[] =>
  text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as OutLine);

/** `n` embedding requests over varied texts, some with several inputs. */
function embedLines(model: string, n: number, prefix = "req"): Line[] {
  return Array.from({ length: n }, (_, i) => ({
    custom_id: `${prefix}-${i}`,
    method: "POST",
    url: "/v1/embeddings",
    body: { model, input: i % 5 === 0 ? [`text ${i} of a batch`, `another text ${i}`] : `text ${i}: a shoal of fish turned at once`, encoding_format: "float" },
  }));
}

async function waitFor(openai: OpenAI, id: string, done: (b: OpenAI.Batch) => boolean, timeoutMs = 120_000): Promise<OpenAI.Batch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const b = await openai.batches.retrieve(id);
    if (done(b)) return b;
    if (Date.now() > deadline) throw new Error(`batch ${id} still ${b.status} (${JSON.stringify(b.request_counts)}) after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const final = (b: OpenAI.Batch): boolean => ["completed", "failed", "cancelled", "expired"].includes(b.status);

describe("OpenAI Batch API (#50): files and batches in Kafka, lines on the batch lane, two gateways", () => {
  let cluster: TestCluster;
  let model: string;
  /** acme on gateway 0 and on gateway 1: state written through one is served by the other. */
  let acme: OpenAI;
  let acme1: OpenAI;
  let rival: OpenAI;
  before(async () => {
    cluster = await startCluster({
      gateways: 2,
      gatewayEnv: {
        SHOAL_API_KEYS: `acme=${ACME},rival=${RIVAL}`,
        SHOAL_BATCH_TOPIC_PREFIX: `shoal.t${randomBytes(4).toString("hex")}`,
        SHOAL_BATCH_MAX_OPEN: String(MAX_OPEN),
        SHOAL_BATCH_CHECKPOINT_MS: "300",
        SHOAL_BATCH_LINES_IN_FLIGHT: "4",
      },
    });
    model = cluster.modelIds[0]!;
    acme = new OpenAI({ baseURL: `${cluster.urls[0]}/v1`, apiKey: ACME, maxRetries: 0 });
    acme1 = new OpenAI({ baseURL: `${cluster.urls[1]}/v1`, apiKey: ACME, maxRetries: 0 });
    rival = new OpenAI({ baseURL: `${cluster.urls[1]}/v1`, apiKey: RIVAL, maxRetries: 0 });
  });
  after(async () => {
    await cluster?.stop();
  });

  async function upload(client: OpenAI, text: string, name = "input.jsonl"): Promise<OpenAI.FileObject> {
    return client.files.create({ file: await toFile(Buffer.from(text), name), purpose: "batch" });
  }

  test("upload → create → completed: every custom_id once, vectors equal to /v1/embeddings, a bad model's line in the error file", async () => {
    const lines = [...embedLines(model, 60), { custom_id: "no-model", method: "POST", url: "/v1/embeddings", body: { model: "no-such-model", input: "x" } }];
    const file = await upload(acme, jsonl(lines));
    assert.match(file.id, /^file-[A-Za-z0-9]{24}$/);
    assert.deepEqual([file.object, file.purpose, file.filename, file.bytes], ["file", "batch", "input.jsonl", Buffer.byteLength(jsonl(lines))]);
    // Written through gateway 0, read through gateway 1.
    assert.equal((await acme1.files.retrieve(file.id)).bytes, file.bytes);
    assert.equal(await (await acme1.files.content(file.id)).text(), jsonl(lines));

    const created = await acme1.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h", metadata: { run: "e2e" } });
    assert.match(created.id, /^batch_[A-Za-z0-9]{24}$/);
    assert.deepEqual([created.object, created.status, created.completion_window, created.input_file_id], ["batch", "validating", "24h", file.id]);
    assert.equal(created.expires_at, created.created_at + 86_400);
    assert.deepEqual(created.metadata, { run: "e2e" });

    const done = await waitFor(acme, created.id, final);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.deepEqual(done.request_counts, { total: 61, completed: 60, failed: 1 });
    for (const at of [done.in_progress_at, done.finalizing_at, done.completed_at]) assert.ok(typeof at === "number" && at >= done.created_at);
    assert.ok(done.output_file_id !== null && done.error_file_id !== null);

    const output = parse(await (await acme.files.content(done.output_file_id!)).text());
    const errors = parse(await (await acme1.files.content(done.error_file_id!)).text());
    const ids = [...output, ...errors].map((l) => l.custom_id);
    assert.equal(new Set(ids).size, ids.length, "a custom_id appears twice");
    assert.deepEqual(new Set(ids), new Set(lines.map((l) => l.custom_id)));

    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.custom_id, "no-model");
    assert.equal(errors[0]!.response?.status_code, 404);
    assert.equal((errors[0]!.response!.body["error"] as { code: string }).code, "model_not_found");

    // Each output line holds what a direct call answers (the same body, the same vectors).
    for (const l of output.filter((_, i) => i % 6 === 0)) {
      const input = lines.find((x) => x.custom_id === l.custom_id)!;
      assert.match(l.id, /^batch_req_/);
      assert.equal(l.error, null);
      assert.equal(l.response?.status_code, 200);
      const body = l.response!.body as unknown as OpenAI.CreateEmbeddingResponse;
      const direct = await acme.embeddings.create(input.body as unknown as OpenAI.EmbeddingCreateParams);
      assert.deepEqual([body.object, body.model, body.data.length, body.usage], [direct.object, direct.model, direct.data.length, direct.usage]);
      for (const [i, d] of direct.data.entries()) assert.ok(maxAbsDiff(body.data[i]!.embedding, d.embedding) < 1e-6, `${l.custom_id}[${i}]`);
    }

    const listed = await acme.batches.list({ limit: 100 });
    assert.ok(listed.data.some((b) => b.id === created.id));
    const files = (await acme1.files.list()).data.map((f) => f.id);
    for (const id of [file.id, done.output_file_id!, done.error_file_id!]) assert.ok(files.includes(id), id);
    const out = await acme.files.retrieve(done.output_file_id!);
    assert.equal(out.purpose, "batch_output");
  });

  test("cancel: cancelling at once, cancelled within seconds, the partial output downloadable with each custom_id once", async () => {
    const lines = embedLines(model, 400, "c");
    const file = await upload(acme, jsonl(lines));
    const b = await acme.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    await waitFor(acme, b.id, (x) => x.request_counts !== undefined && x.request_counts.completed > 0);
    const asked = Date.now();
    const cancelling = await acme1.batches.cancel(b.id);
    assert.ok(["cancelling", "cancelled"].includes(cancelling.status), cancelling.status);
    assert.ok(cancelling.cancelling_at !== null);
    const done = await waitFor(acme, b.id, final, 30_000);
    assert.equal(done.status, "cancelled");
    assert.ok(Date.now() - asked < 10_000, `cancelled after ${Date.now() - asked} ms`);
    const counts = done.request_counts!;
    assert.ok(counts.completed > 0 && counts.completed < 400, JSON.stringify(counts));
    const output = parse(await (await acme.files.content(done.output_file_id!)).text());
    assert.equal(output.length, counts.completed);
    assert.equal(new Set(output.map((l) => l.custom_id)).size, output.length);
    // A final batch cannot be cancelled again.
    await assert.rejects(acme.batches.cancel(b.id), (err: unknown) => err instanceof OpenAI.BadRequestError);
  });

  test("bad input: not JSONL, unknown url, method, duplicate custom_id and another endpoint fail at validating with errors.data per line", async () => {
    const notJsonl = await upload(acme, "id,text\n1,hello\n", "data.csv");
    const good = embedLines(model, 3);
    const mixed = await upload(
      acme,
      jsonl([
        good[0],
        { ...good[1], url: "/v1/unknown" },
        { ...good[2], method: "GET" },
        { ...good[1], custom_id: good[0]!.custom_id },
        { ...good[1], url: "/v1/chat/completions" },
      ]),
    );
    const a = await acme.batches.create({ input_file_id: notJsonl.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const b = await acme.batches.create({ input_file_id: mixed.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const fa = await waitFor(acme, a.id, final);
    assert.equal(fa.status, "failed");
    assert.ok(fa.failed_at !== null);
    assert.deepEqual(
      fa.errors?.data?.map((e) => [e.code, e.line]),
      [
        ["invalid_json_line", 1],
        ["invalid_json_line", 2],
      ],
    );
    const fb = await waitFor(acme, b.id, final);
    assert.equal(fb.status, "failed");
    assert.deepEqual(
      fb.errors?.data?.map((e) => [e.code, e.line]),
      [
        ["invalid_url", 2],
        ["invalid_method", 3],
        ["duplicate_custom_id", 4],
        ["invalid_url", 5],
      ],
    );
    assert.equal(fb.output_file_id, null);

    // Refused at creation: an endpoint Shoal does not batch, another window, a missing file, a wrong purpose.
    const refused = async (p: Promise<unknown>, status: number, param: string | null): Promise<void> => {
      await assert.rejects(p, (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        assert.equal(err.status, status, err.message);
        assert.equal(err.param ?? null, param);
        return true;
      });
    };
    await refused(acme.batches.create({ input_file_id: mixed.id, endpoint: "/v1/chat/completions", completion_window: "24h" }), 400, "endpoint");
    await refused(acme.batches.create({ input_file_id: mixed.id, endpoint: "/v1/embeddings", completion_window: "1h" as "24h" }), 400, "completion_window");
    await refused(acme.batches.create({ input_file_id: "file-nope", endpoint: "/v1/embeddings", completion_window: "24h" }), 404, "input_file_id");
    await refused(acme.files.create({ file: await toFile(Buffer.from("{}\n"), "x.jsonl"), purpose: "fine-tune" }), 400, "purpose");

    // A deleted file is gone for reads and for new batches.
    assert.deepEqual(await acme.files.delete(mixed.id), { id: mixed.id, object: "file", deleted: true });
    await refused(acme.files.retrieve(mixed.id), 404, "id");
    await refused(acme.batches.create({ input_file_id: mixed.id, endpoint: "/v1/embeddings", completion_window: "24h" }), 404, "input_file_id");
  });

  test("tenancy: another tenant's batch and file ids are 404 for every call, and never listed", async () => {
    const file = await upload(acme, jsonl(embedLines(model, 2)));
    const b = await acme.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const notFound = async (p: Promise<unknown>): Promise<void> => {
      await assert.rejects(p, (err: unknown) => err instanceof OpenAI.NotFoundError);
    };
    await notFound(rival.batches.retrieve(b.id));
    await notFound(rival.batches.cancel(b.id));
    await notFound(rival.files.retrieve(file.id));
    await notFound(rival.files.content(file.id));
    await notFound(rival.files.delete(file.id));
    await notFound(rival.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" }));
    assert.ok(!(await rival.batches.list()).data.some((x) => x.id === b.id));
    assert.ok(!(await rival.files.list()).data.some((x) => x.id === file.id));
    // A cursor from another tenant's list pages nothing of theirs.
    assert.deepEqual((await rival.batches.list({ after: b.id })).data, []);
    const unkeyed = await fetch(`${cluster.urls[0]}/v1/batches/${b.id}`);
    assert.equal(unkeyed.status, 401);
    // acme's own batch is unaffected.
    assert.equal((await waitFor(acme, b.id, final)).status, "completed");
  });

  test("too many open batches for a key: 429 in OpenAI's error shape", async () => {
    const file = await upload(rival, jsonl(embedLines(model, 300, "busy")));
    const open: string[] = [];
    for (let i = 0; i < MAX_OPEN; i++)
      open.push((await rival.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" })).id);
    await assert.rejects(rival.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.RateLimitError, String(err));
      assert.equal(err.code, "too_many_open_batches");
      return true;
    });
    for (const id of open) await rival.batches.cancel(id);
    for (const id of open) assert.equal((await waitFor(rival, id, final, 30_000)).status, "cancelled");
  });

  test("the official openai Python SDK: files.create(purpose='batch'), batches.create/retrieve/list, files.content", async () => {
    const { python } = await ensurePythonEnv("peer-sdks", resolve(REPO_ROOT, "e2e/python/peer-requirements.txt"), {
      log: (line) => process.stderr.write(`${line}\n`),
    });
    const lines = embedLines(model, 12, "py");
    const got = await new Promise<{ status: string; counts: Record<string, number>; output: OutLine[]; listed: boolean }>((ok, fail) => {
      const child = spawn(python, [resolve(REPO_ROOT, "e2e/python/batch_sdk.py")], { stdio: ["pipe", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (err += d.toString()));
      child.once("error", fail);
      child.once("exit", (code) => (code === 0 ? ok(JSON.parse(out)) : fail(new Error(`batch_sdk.py exited ${code}:\n${err}`))));
      child.stdin.end(JSON.stringify({ base: `${cluster.urls[1]}/v1`, key: ACME, jsonl: jsonl(lines) }));
    });
    assert.equal(got.status, "completed");
    assert.deepEqual(got.counts, { total: 12, completed: 12, failed: 0 });
    assert.deepEqual(got.output.map((l) => l.custom_id).sort(), lines.map((l) => l.custom_id).sort());
    assert.ok(got.listed);
  });
});

describe("a batch survives the loss of the gateway running it (kill -9)", () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      gateways: 2,
      gatewayEnv: { SHOAL_BATCH_TOPIC_PREFIX: `shoal.t${randomBytes(4).toString("hex")}`, SHOAL_BATCH_CHECKPOINT_MS: "200", SHOAL_BATCH_LINES_IN_FLIGHT: "2" },
    });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("the survivor takes the batch over from its last snapshot: completed, every custom_id exactly once, the same vectors", async () => {
    const model = cluster.modelIds[0]!;
    const clients = cluster.urls.map((u) => new OpenAI({ baseURL: `${u}/v1`, apiKey: "unused", maxRetries: 0 }));
    const lines = embedLines(model, 600, "k");
    const file = await clients[0]!.files.create({ file: await toFile(Buffer.from(jsonl(lines)), "big.jsonl"), purpose: "batch" });
    const b = await clients[0]!.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" });
    const started = await Promise.race(cluster.gateways.map((g, i) => g.waitForLog((l) => l.msg === "batch run started" && l["batch"] === b.id).then(() => i)));
    const survivor = clients[1 - started]!;
    await waitFor(survivor, b.id, (x) => (x.request_counts?.completed ?? 0) >= 100);
    await cluster.gateways[started]!.stop("SIGKILL");
    const killedAt = (await survivor.batches.retrieve(b.id)).request_counts!.completed;
    assert.ok(killedAt < 600, "the batch was still running when its gateway died");

    const resumed = await cluster.gateways[1 - started]!.waitForLog((l) => l.msg === "batch run resumes" && l["batch"] === b.id, 60_000);
    assert.ok((resumed["nextLine"] as number) >= 100, `resumed at line ${String(resumed["nextLine"])}, not from the start`);
    const done = await waitFor(survivor, b.id, final, 180_000);
    assert.equal(done.status, "completed", JSON.stringify(done));
    assert.deepEqual(done.request_counts, { total: 600, completed: 600, failed: 0 });
    assert.equal(done.error_file_id, null);
    const output = parse(await (await survivor.files.content(done.output_file_id!)).text());
    assert.deepEqual(
      output.map((l) => l.custom_id),
      lines.map((l) => l.custom_id),
      "each line once, in input order",
    );
    for (const l of output.filter((_, i) => i % 50 === 0)) {
      const input = lines.find((x) => x.custom_id === l.custom_id)!;
      const direct = await survivor.embeddings.create(input.body as unknown as OpenAI.EmbeddingCreateParams);
      const body = l.response!.body as unknown as OpenAI.CreateEmbeddingResponse;
      for (const [i, d] of direct.data.entries()) assert.ok(maxAbsDiff(body.data[i]!.embedding, d.embedding) < 1e-6, `${l.custom_id}[${i}]`);
    }
  });
});
