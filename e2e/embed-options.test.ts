import assert from "node:assert/strict";
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ensureMavenModel, ensureModel } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf, maxAbsDiff, norm } from "./harness/clients.ts";

/** The real e5-small-v2 (prompts "query: " / "passage: ", 512 tokens, not Matryoshka). */
const E5 = "e5-small-v2";
/** The generated tiny encoder declared Matryoshka-trained: its weights are random, the cut is what is tested. */
const MRL = "shoal-tiny-mrl";
const TEXT = "how do shoals of fish turn all at once";

async function matryoshkaTiny(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "shoal-mrl-")), "mrl");
  await cp(await ensureModel("tiny"), dir, { recursive: true });
  const path = join(dir, "shoal-model.json");
  const manifest = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  await writeFile(path, JSON.stringify({ ...manifest, id: MRL, matryoshka: true }, null, 2));
  return dir;
}

describe("embedding options on a real cluster: prompts, dimensions, quantised types, truncation, Tokenize", () => {
  let cluster: TestCluster;
  let api: ReturnType<typeof clientsFor>;
  before(async () => {
    cluster = await startCluster({ presets: [], modelDirs: [await ensureMavenModel(E5), await matryoshkaTiny()] });
    api = clientsFor(cluster.urls[0]!, "connect");
  });
  after(async () => {
    await cluster?.stop();
  });
  const embed = (model: string, inputs: string[], options: Parameters<typeof api.inference.embed>[0]["options"] = {}) =>
    api.inference.embed({ model, inputs, options }, { timeoutMs: 60_000 });

  test("ListModels shows each model's prompts and Matryoshka flag from its manifest", async () => {
    const models = new Map((await api.models.listModels({})).models.map((m) => [m.id, m]));
    assert.equal(models.get(E5)?.queryPrompt, "query: ");
    assert.equal(models.get(E5)?.passagePrompt, "passage: ");
    assert.equal(models.get(E5)?.matryoshka, false);
    assert.equal(models.get(MRL)?.matryoshka, true);
  });

  test("e5: input type QUERY embeds exactly 'query: ' + text; DOCUMENT 'passage: ' + text; none the text as sent", async () => {
    const [typedQ, literalQ, typedD, literalD, plain] = await Promise.all([
      embed(E5, [TEXT], { inputType: InputType.QUERY }),
      embed(E5, [`query: ${TEXT}`]),
      embed(E5, [TEXT], { inputType: InputType.SEARCH_DOCUMENT }),
      embed(E5, [`passage: ${TEXT}`]),
      embed(E5, [TEXT]),
    ]);
    const v = (r: typeof plain) => r.embeddings[0]!.values;
    assert.ok(maxAbsDiff(v(typedQ), v(literalQ)) < 1e-6);
    assert.ok(maxAbsDiff(v(typedD), v(literalD)) < 1e-6);
    assert.ok(maxAbsDiff(v(typedQ), v(plain)) > 1e-3, "the prompt changes the vector");
    assert.equal(typedQ.embeddings[0]!.tokens, literalQ.embeddings[0]!.tokens);
    assert.ok(typedQ.embeddings[0]!.tokens > plain.embeddings[0]!.tokens);
  });

  test("dimensions: a Matryoshka model's vector is cut and renormalised; e5 and out-of-range values are InvalidArgument", async () => {
    const [full, cut] = await Promise.all([embed(MRL, [TEXT]), embed(MRL, [TEXT], { dimensions: 16 })]);
    const head = full.embeddings[0]!.values.slice(0, 16);
    const expected = head.map((x) => x / norm(head));
    assert.equal(cut.dimensions, 16);
    assert.equal(cut.embeddings[0]!.values.length, 16);
    assert.ok(Math.abs(norm(cut.embeddings[0]!.values) - 1) < 1e-5);
    assert.ok(maxAbsDiff(cut.embeddings[0]!.values, expected) < 1e-5);
    const notMrl = await codeOf(embed(E5, [TEXT], { dimensions: 128 }));
    assert.equal(notMrl.code, Code.InvalidArgument);
    assert.match(notMrl.message, /not Matryoshka/);
    assert.equal((await codeOf(embed(MRL, [TEXT], { dimensions: 100_000 }))).code, Code.InvalidArgument);
    assert.equal((await codeOf(embed(MRL, [TEXT], { dimensions: 0 }))).code, Code.InvalidArgument);
  });

  test("embedding types FLOAT + INT8 + UBINARY + BINARY at once, bytes as the documented rules give them", async () => {
    const res = await embed(E5, [TEXT, "a second text"], {
      embeddingTypes: [EmbeddingType.FLOAT, EmbeddingType.INT8, EmbeddingType.UBINARY, EmbeddingType.BINARY],
    });
    for (const e of res.embeddings) {
      const v = e.values;
      assert.equal(v.length, 384);
      const int8 = Array.from(new Int8Array(e.int8.buffer, e.int8.byteOffset, e.int8.byteLength));
      assert.deepEqual(
        int8,
        // Halves away from zero; `+ 0` turns -0 into 0.
        v.map((x) => Math.max(-127, Math.min(127, x < 0 ? -Math.round(-x * 127) : Math.round(x * 127))) + 0),
      );
      const bits = Array.from({ length: 48 }, (_, b) => v.slice(b * 8, b * 8 + 8).reduce((byte, x, j) => byte | (x > 0 ? 0x80 >> j : 0), 0));
      assert.deepEqual(Array.from(e.ubinary), bits);
      assert.deepEqual(
        Array.from(new Int8Array(e.binary.buffer, e.binary.byteOffset, e.binary.byteLength)),
        bits.map((b) => b - 128),
      );
      assert.equal(e.uint8.length, 0, "only the asked types");
    }
    const only = await embed(E5, [TEXT], { embeddingTypes: [EmbeddingType.UINT8] });
    assert.equal(only.embeddings[0]!.values.length, 0);
    assert.equal(only.embeddings[0]!.uint8.length, 384);
  });

  test("truncation: NONE is InvalidArgument naming tokens and limit; START and END cut to the limit, reported back", async () => {
    const long = Array.from({ length: 700 }, (_, i) => `word${i % 50}`).join(" ");
    const none = await codeOf(embed(E5, [long], { truncation: Truncation.NONE }));
    assert.equal(none.code, Code.InvalidArgument);
    assert.match(none.message, /^inputs\[0\]: \d+ tokens exceed the limit of 512 tokens of model 'e5-small-v2'/);
    const [end, start] = await Promise.all([embed(E5, [long], { truncation: Truncation.END }), embed(E5, [long], { truncation: Truncation.START })]);
    for (const r of [end, start]) {
      assert.equal(r.maxSequenceLength, 512);
      assert.equal(r.embeddings[0]!.tokens, 512);
      assert.equal(r.embeddings[0]!.truncated, true);
    }
    assert.ok(maxAbsDiff(end.embeddings[0]!.values, start.embeddings[0]!.values) > 1e-3, "different ends kept");
  });

  test("Tokenize: the ids Embed counts, token strings, offsets into the input, prompt and specials marked", async () => {
    const text = "Shoals turn, together!";
    const res = await api.inference.tokenize({ model: E5, inputs: [text], inputType: InputType.QUERY }, { timeoutMs: 60_000 });
    const t = res.tokenized[0]!;
    assert.equal(res.maxSequenceLength, 512);
    assert.deepEqual(t.tokens, ["[CLS]", "query", ":", "sho", "##als", "turn", ",", "together", "!", "[SEP]"]);
    assert.deepEqual(t.ids.slice(0, 1), [101]);
    assert.deepEqual(t.special, [true, true, true, false, false, false, false, false, false, true]);
    const words = t.tokens.map((_, i) => text.slice(t.starts[i], t.ends[i]));
    assert.deepEqual(words, ["", "", "", "Sho", "als", "turn", ",", "together", "!", ""]);
    const embedded = await embed(E5, [text], { inputType: InputType.QUERY });
    assert.equal(embedded.embeddings[0]!.tokens, t.ids.length);
    assert.equal(res.usage?.promptTokens, t.ids.length);
    assert.equal((await codeOf(api.inference.tokenize({ model: "no-such-model", inputs: ["a"] }))).code, Code.NotFound);
    assert.equal((await codeOf(api.inference.tokenize({ model: E5, inputs: [] }))).code, Code.InvalidArgument);
    const tooLong = await codeOf(api.inference.tokenize({ model: E5, inputs: ["word ".repeat(600)] }, { timeoutMs: 60_000 }));
    assert.equal(tooLong.code, Code.InvalidArgument);
    assert.match(tooLong.message, /602 tokens exceed the limit of 512/);
  });

  test("OpenAI route: dimensions cuts for real, base64 carries the same floats, input_type selects the prompt", async () => {
    const post = async (body: unknown) =>
      fetch(`${cluster.urls[0]}/v1/embeddings`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const cut = (await (await post({ model: MRL, input: TEXT, dimensions: 16 })).json()) as { data: { embedding: number[] }[] };
    const connect = await embed(MRL, [TEXT], { dimensions: 16 });
    assert.ok(maxAbsDiff(cut.data[0]!.embedding, connect.embeddings[0]!.values) < 1e-6);
    const b64 = (await (await post({ model: E5, input: TEXT, input_type: "query", encoding_format: "base64" })).json()) as { data: { embedding: string }[] };
    const bytes = Buffer.from(b64.data[0]!.embedding, "base64");
    const floats = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    const literal = await embed(E5, [`query: ${TEXT}`]);
    assert.ok(maxAbsDiff(floats, literal.embeddings[0]!.values) < 1e-6);
    const bad = await post({ model: E5, input: TEXT, dimensions: 128 });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { param: string } }).error.param, "dimensions");
    assert.equal((await post({ model: E5, input: TEXT, input_type: "sideways" })).status, 400);
  });
});
