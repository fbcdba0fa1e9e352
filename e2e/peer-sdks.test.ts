import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Client } from "@connectrpc/connect";
import { EmbeddingType, InputType } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { EmbedResponse, InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ensurePythonEnv } from "@shoal/models";
import OpenAI from "openai";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { keyedInference, maxAbsDiff } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";
import { E5_PROMPTS, tinyVariant } from "./harness/tiny-variant.ts";

const EMBED = "shoal-tiny-embed";
const RERANK = "shoal-tiny-rerank";
/** The tiny encoder with E5's prompts, declared Matryoshka-trained: input types and `dimensions` change its vectors. */
const PROMPTED = "shoal-tiny-prompted";
const KEY = "sk-sdks-0a1b2c3d4e5f6789";
const TEXTS = ["The harbour was full of small fishing boats.", "A shoal of silver fish turned at once.", "Quarterly revenue grew by twelve percent."];
const QUERY = "how do fish swim together";

interface SdkError {
  readonly status: number | null;
  readonly type: string;
  readonly message: string;
}
type Scored = { index: number; score: number; text?: string };

/** What e2e/python/peer_sdks.py prints. */
interface SdkOutput {
  cohere_v2_embed: { float: number[][]; int8: number[][]; uint8: number[][]; binary: number[][]; ubinary: number[][]; texts: string[]; input_tokens: number };
  cohere_v2_embed_query: number[][];
  cohere_v2_rerank: Scored[];
  cohere_v1_embed: { response_type: string; float: number[][] };
  cohere_v1_rerank: Scored[];
  cohere_errors: Record<"unknown_model" | "too_long_none" | "bad_key", SdkError | null>;
  openai_float: number[][];
  openai_default: number[][];
  openai_mrl_16: number[];
  openai_errors: { dimensions_not_matryoshka: SdkError | null };
  langchain_openai_documents: number[][];
  langchain_openai_query: number[];
  langchain_cohere_rerank: { text: string; score: number }[];
  hf_feature_extraction: number[] | number[][];
}

function runSdks(python: string, input: unknown): Promise<SdkOutput> {
  return new Promise((ok, fail) => {
    const child = spawn(python, [resolve(REPO_ROOT, "e2e/python/peer_sdks.py")], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("error", fail);
    child.once("exit", (code) => (code === 0 ? ok(JSON.parse(out) as SdkOutput) : fail(new Error(`peer_sdks.py exited ${code}:\n${err}`))));
    child.stdin.end(JSON.stringify(input));
  });
}

const bytes = (b: Uint8Array, signed: boolean): number[] => Array.from(signed ? new Int8Array(b.buffer, b.byteOffset, b.byteLength) : b);
const floats = (r: EmbedResponse): number[][] => r.embeddings.map((e) => e.values);

function assertVectors(actual: readonly (readonly number[])[], expected: readonly (readonly number[])[], what: string): void {
  assert.equal(actual.length, expected.length, what);
  for (const [i, v] of expected.entries()) assert.ok(maxAbsDiff(actual[i]!, v) < 1e-6, `${what}[${i}]`);
}

describe("other APIs' real SDKs (cohere, openai, langchain, huggingface_hub) against Shoal: Shoal's own values", () => {
  let cluster: TestCluster;
  let shoal: Client<typeof InferenceService>;
  let sdk: SdkOutput;
  before(async () => {
    // A venv cached outside the clone, keyed by the pinned requirements (first run: wheels from PyPI).
    const [{ python }, mrl] = await Promise.all([
      ensurePythonEnv("peer-sdks", resolve(REPO_ROOT, "e2e/python/peer-requirements.txt"), { log: (line) => process.stderr.write(`${line}\n`) }),
      tinyVariant(PROMPTED, { matryoshka: true, prompts: E5_PROMPTS }),
    ]);
    cluster = await startCluster({ presets: ["tiny", "tiny-rerank"], modelDirs: [mrl], gatewayEnv: { SHOAL_API_KEYS: `sdks=${KEY}` } });
    shoal = keyedInference(cluster.urls[0]!, KEY);
    sdk = await runSdks(python, { base: cluster.urls[0], key: KEY, embed: EMBED, rerank: RERANK, prompted: PROMPTED, texts: TEXTS, query: QUERY });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("cohere ClientV2.embed: search_document float, int8, uint8, binary, ubinary equal Embed's; search_query too", async () => {
    const types = [EmbeddingType.FLOAT, EmbeddingType.INT8, EmbeddingType.UINT8, EmbeddingType.BINARY, EmbeddingType.UBINARY];
    const [ref, refQuery] = await Promise.all([
      shoal.embed({ model: PROMPTED, inputs: TEXTS, options: { inputType: InputType.SEARCH_DOCUMENT, embeddingTypes: types } }),
      shoal.embed({ model: PROMPTED, inputs: [QUERY], options: { inputType: InputType.SEARCH_QUERY } }),
    ]);
    const plain = await shoal.embed({ model: PROMPTED, inputs: [QUERY] });
    assert.ok(maxAbsDiff(sdk.cohere_v2_embed_query[0]!, plain.embeddings[0]!.values) > 1e-3, "the query prompt changed the vector");
    const got = sdk.cohere_v2_embed;
    assertVectors(got.float, floats(ref), "float");
    assert.deepEqual(
      got.int8,
      ref.embeddings.map((e) => bytes(e.int8, true)),
    );
    assert.deepEqual(
      got.uint8,
      ref.embeddings.map((e) => bytes(e.uint8, false)),
    );
    assert.deepEqual(
      got.binary,
      ref.embeddings.map((e) => bytes(e.binary, true)),
    );
    assert.deepEqual(
      got.ubinary,
      ref.embeddings.map((e) => bytes(e.ubinary, false)),
    );
    assert.deepEqual(got.texts, TEXTS);
    assert.equal(got.input_tokens, ref.usage?.promptTokens);
    assertVectors(sdk.cohere_v2_embed_query, floats(refQuery), "search_query");
  });

  test("cohere Client (v1).embed: classification input type, embeddings_floats", async () => {
    const ref = await shoal.embed({ model: PROMPTED, inputs: TEXTS, options: { inputType: InputType.CLASSIFICATION } });
    assert.equal(sdk.cohere_v1_embed.response_type, "embeddings_floats");
    assertVectors(sdk.cohere_v1_embed.float, floats(ref), "v1 float");
  });

  test("cohere rerank v2 (top_n) and v1 (return_documents): Rerank's order and scores", async () => {
    const ref = await shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS });
    const expected = ref.results.map((r) => ({ index: r.index, score: r.score, text: TEXTS[r.index]! }));
    assert.equal(sdk.cohere_v2_rerank.length, 2);
    for (const [i, r] of sdk.cohere_v2_rerank.entries()) {
      assert.equal(r.index, expected[i]!.index);
      assert.ok(Math.abs(r.score - expected[i]!.score) < 1e-6);
    }
    for (const [i, r] of sdk.cohere_v1_rerank.entries()) {
      assert.deepEqual([r.index, r.text], [expected[i]!.index, expected[i]!.text]);
      assert.ok(Math.abs(r.score - expected[i]!.score) < 1e-6);
    }
  });

  test("cohere errors surface as the SDK's own classes: 404 NotFoundError, 400 BadRequestError (NONE, too long), 401 UnauthorizedError", () => {
    assert.deepEqual([sdk.cohere_errors.unknown_model?.status, sdk.cohere_errors.unknown_model?.type], [404, "NotFoundError"]);
    assert.deepEqual([sdk.cohere_errors.too_long_none?.status, sdk.cohere_errors.too_long_none?.type], [400, "BadRequestError"]);
    assert.match(sdk.cohere_errors.too_long_none?.message ?? "", /tokens/);
    assert.deepEqual([sdk.cohere_errors.bad_key?.status, sdk.cohere_errors.bad_key?.type], [401, "UnauthorizedError"]);
  });

  test("openai (Python): float and the default base64 equal Embed; dimensions=16 on a Matryoshka model; 400 otherwise", async () => {
    const [ref, cut] = await Promise.all([
      shoal.embed({ model: EMBED, inputs: TEXTS }),
      shoal.embed({ model: PROMPTED, inputs: [TEXTS[0]!], options: { dimensions: 16 } }),
    ]);
    assertVectors(sdk.openai_float, floats(ref), "float");
    assertVectors(sdk.openai_default, floats(ref), "base64");
    assertVectors([sdk.openai_mrl_16], floats(cut), "dimensions 16");
    assert.equal(sdk.openai_mrl_16.length, 16);
    assert.deepEqual([sdk.openai_errors.dimensions_not_matryoshka?.status, sdk.openai_errors.dimensions_not_matryoshka?.type], [400, "BadRequestError"]);
  });

  test("openai (npm): dimensions on the Matryoshka model, base64 decoded by the SDK", async () => {
    const openai = new OpenAI({ baseURL: `${cluster.urls[0]}/v1`, apiKey: KEY, maxRetries: 0 });
    const [res, ref] = await Promise.all([
      openai.embeddings.create({ model: PROMPTED, input: TEXTS, dimensions: 16 }),
      shoal.embed({ model: PROMPTED, inputs: TEXTS, options: { dimensions: 16 } }),
    ]);
    assertVectors(
      res.data.map((d) => d.embedding),
      floats(ref),
      "npm dimensions 16",
    );
  });

  test("LangChain: OpenAIEmbeddings (documents, query) equal Embed; CohereRerank's relevance_score equals Rerank's", async () => {
    const [docs, query, ranked] = await Promise.all([
      shoal.embed({ model: EMBED, inputs: TEXTS }),
      shoal.embed({ model: EMBED, inputs: [QUERY] }),
      shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS }),
    ]);
    assertVectors(sdk.langchain_openai_documents, floats(docs), "embed_documents");
    assertVectors([sdk.langchain_openai_query], floats(query), "embed_query");
    assert.deepEqual(
      sdk.langchain_cohere_rerank.map((d) => d.text),
      ranked.results.map((r) => TEXTS[r.index]),
    );
    for (const [i, d] of sdk.langchain_cohere_rerank.entries()) assert.ok(Math.abs(d.score - ranked.results[i]!.score) < 1e-6);
  });

  test("huggingface_hub InferenceClient.feature_extraction on the TEI /embed route equals Embed", async () => {
    const ref = await shoal.embed({ model: EMBED, inputs: [TEXTS[1]!] });
    const got = sdk.hf_feature_extraction;
    const vector = Array.isArray(got[0]) ? (got as number[][])[0]! : (got as number[]);
    assert.ok(maxAbsDiff(vector, ref.embeddings[0]!.values) < 1e-6);
  });
});
