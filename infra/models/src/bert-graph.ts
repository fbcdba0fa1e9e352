/**
 * A BERT encoder as an ONNX graph (opset 17), with deterministic pseudo-random weights.
 *
 * Signature (same as an `optimum` export of a BERT model with task feature-extraction):
 *   inputs  input_ids, attention_mask, token_type_ids: int64 [batch_size, sequence_length]
 *   output  last_hidden_state: float32 [batch_size, sequence_length, hidden]
 * With a task head (rerank, classify), as an `optimum` export of BertForSequenceClassification:
 *   output  logits: float32 [batch_size, num_labels]
 *
 * The node patterns follow the PyTorch BERT export so onnxruntime's optimizer can fuse them:
 * LayerNormalization, erf-form GELU, MatMul + bias Add, residual Add + LayerNormalization
 * (SkipLayerNormalization) and the Q/K/V attention block with the classic
 * Unsqueeze -> Unsqueeze -> Cast -> Sub(1, m) -> Mul(-10000) additive mask (Attention).
 */
import { DataType, GraphBuilder } from "./onnx-builder.ts";
import { fillNormal, tensorSeed } from "./prng.ts";
import type { BertPreset, PresetHead } from "./presets.ts";
import { GENERATOR_NAME, GENERATOR_VERSION, headInitializerRange } from "./presets.ts";

export const IR_VERSION = 8;
export const OPSET_VERSION = 17;
export const INPUT_NAMES = { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: "token_type_ids" } as const;
export const OUTPUT_NAME = "last_hidden_state";
/** Output of graphs with a task head. */
export const LOGITS_OUTPUT_NAME = "logits";

/** Logits per input of a head: 1 for a reranker, one per label for a classifier. */
export function headLabelCount(head: PresetHead): number {
  return head.task === "rerank" ? 1 : head.labels.length;
}

export interface BuiltGraph {
  bytes: Uint8Array;
  /** Bytes of all initializers (weights + constants). */
  weightBytes: number;
  parameterCount: number;
  nodeCount: number;
}

class Weights {
  parameterCount = 0;
  constructor(
    private readonly g: GraphBuilder,
    private readonly preset: BertPreset,
  ) {}

  normal(name: string, dims: readonly number[], std: number = this.preset.initializerRange): string {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    fillNormal(data, std, tensorSeed(this.preset.seed, name));
    return this.add(name, dims, data);
  }

  constant(name: string, dims: readonly number[], value: number): string {
    return this.add(name, dims, new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(value));
  }

  add(name: string, dims: readonly number[], data: Float32Array): string {
    this.parameterCount += data.length;
    return this.g.floatTensor(name, dims, data);
  }
}

/** `x @ W + b` with W [in, out] (MatMul then Add, the pattern onnxruntime fuses). */
function linear(g: GraphBuilder, w: Weights, x: string, prefix: string, inDim: number, outDim: number, opts: { std?: number; output?: string } = {}): string {
  const weight = w.normal(`${prefix}.weight`, [inDim, outDim], opts.std);
  const bias = w.constant(`${prefix}.bias`, [outDim], 0);
  const mm = g.node("MatMul", [x, weight], `${prefix}/MatMul`);
  return g.node("Add", [mm, bias], `${prefix}/Add`, {}, opts.output);
}

/**
 * BertForSequenceClassification's head: the pooler (dense + tanh on the [CLS] token) and the
 * classifier (dense to the logits), writing LOGITS_OUTPUT_NAME [batch, labels].
 */
function sequenceClassificationHead(g: GraphBuilder, w: Weights, preset: BertPreset, head: PresetHead, hiddenStates: string): void {
  const { hidden } = preset;
  const std = headInitializerRange(preset);
  const labels = headLabelCount(head);
  // hidden_states[:, 0]: a scalar index on the sequence axis drops that axis.
  const cls = g.node("Gather", [hiddenStates, g.constInt64([0], [])], "pooler/Gather_cls", { axis: 1 });
  const dense = linear(g, w, cls, "pooler.dense", hidden, hidden, { std });
  const pooled = g.node("Tanh", [dense], "pooler/Tanh");
  linear(g, w, pooled, "classifier", hidden, labels, { std, output: LOGITS_OUTPUT_NAME });
  g.output(LOGITS_OUTPUT_NAME, DataType.FLOAT, ["batch_size", labels]);
}

function layerNorm(g: GraphBuilder, w: Weights, x: string, prefix: string, hidden: number, epsilon: number, output?: string): string {
  const gamma = w.constant(`${prefix}.weight`, [hidden], 1);
  const beta = w.constant(`${prefix}.bias`, [hidden], 0);
  return g.node("LayerNormalization", [x, gamma, beta], `${prefix}/LayerNormalization`, { axis: -1, epsilon: { float: epsilon } }, output);
}

export function buildBertGraph(preset: BertPreset): BuiltGraph {
  const { hidden, heads, layers, intermediate, layerNormEpsilon: eps } = preset;
  if (hidden % heads !== 0) throw new Error(`hidden ${hidden} is not divisible by heads ${heads}`);
  if (layers < 1) throw new Error("a preset needs at least one layer");
  const headSize = hidden / heads;
  const g = new GraphBuilder(preset.id);
  const w = new Weights(g, preset);
  const dyn = ["batch_size", "sequence_length"] as const;

  const inputIds = g.input(INPUT_NAMES.inputIds, DataType.INT64, dyn);
  const attentionMask = g.input(INPUT_NAMES.attentionMask, DataType.INT64, dyn);
  const tokenTypeIds = g.input(INPUT_NAMES.tokenTypeIds, DataType.INT64, dyn);

  // ---- embeddings: word + position + token type, then LayerNorm
  const wordTable = new Float32Array(preset.vocabSize * hidden);
  fillNormal(wordTable, preset.initializerRange, tensorSeed(preset.seed, "embeddings.word_embeddings.weight"));
  wordTable.fill(0, 0, hidden); // padding_idx 0 is a zero row, as in BERT
  const wordEmb = w.add("embeddings.word_embeddings.weight", [preset.vocabSize, hidden], wordTable);
  const posEmb = w.normal("embeddings.position_embeddings.weight", [preset.maxPositionEmbeddings, hidden]);
  const typeEmb = w.normal("embeddings.token_type_embeddings.weight", [preset.typeVocabSize, hidden]);

  const words = g.node("Gather", [wordEmb, inputIds], "embeddings/word_embeddings/Gather", { axis: 0 });
  // position_ids = expand(unsqueeze(range(0, seq_len, 1), 0), shape(input_ids))
  const idsShape = g.node("Shape", [inputIds], "embeddings/Shape");
  const seqLen = g.node("Gather", [idsShape, g.constInt64([1], [])], "embeddings/Gather_seq_len", { axis: 0 });
  const range = g.node("Range", [g.constInt64([0], []), seqLen, g.constInt64([1], [])], "embeddings/Range");
  const rangeRow = g.node("Unsqueeze", [range, g.constInt64([0])], "embeddings/Unsqueeze_position_ids");
  const positionIds = g.node("Expand", [rangeRow, idsShape], "embeddings/Expand_position_ids");
  const positions = g.node("Gather", [posEmb, positionIds], "embeddings/position_embeddings/Gather", { axis: 0 });
  const types = g.node("Gather", [typeEmb, tokenTypeIds], "embeddings/token_type_embeddings/Gather", { axis: 0 });
  const sum1 = g.node("Add", [words, positions], "embeddings/Add");
  const sum2 = g.node("Add", [sum1, types], "embeddings/Add_1");
  let hiddenStates = layerNorm(g, w, sum2, "embeddings.LayerNorm", hidden, eps);

  // ---- additive attention mask: (1 - mask) * -10000, shape [batch, 1, 1, seq]
  const m1 = g.node("Unsqueeze", [attentionMask, g.constInt64([1])], "extended_attention_mask/Unsqueeze");
  const m2 = g.node("Unsqueeze", [m1, g.constInt64([2])], "extended_attention_mask/Unsqueeze_1");
  const mf = g.node("Cast", [m2], "extended_attention_mask/Cast", { to: DataType.FLOAT });
  const inv = g.node("Sub", [g.constFloat(1), mf], "extended_attention_mask/Sub");
  const additiveMask = g.node("Mul", [inv, g.constFloat(-10000)], "extended_attention_mask/Mul");

  const headShape = g.constInt64([0, 0, heads, headSize]);
  const mergedShape = g.constInt64([0, 0, hidden]);
  const scale = g.constFloat(Math.sqrt(headSize));

  for (let l = 0; l < layers; l++) {
    const p = `encoder.layer.${l}`;
    const x = hiddenStates;
    // self-attention
    const q = linear(g, w, x, `${p}.attention.self.query`, hidden, hidden);
    const k = linear(g, w, x, `${p}.attention.self.key`, hidden, hidden);
    const v = linear(g, w, x, `${p}.attention.self.value`, hidden, hidden);
    const qh = g.node("Transpose", [g.node("Reshape", [q, headShape], `${p}.attention.self/Reshape_q`)], `${p}.attention.self/Transpose_q`, {
      perm: [0, 2, 1, 3],
    });
    const kh = g.node("Transpose", [g.node("Reshape", [k, headShape], `${p}.attention.self/Reshape_k`)], `${p}.attention.self/Transpose_k`, {
      perm: [0, 2, 3, 1],
    });
    const vh = g.node("Transpose", [g.node("Reshape", [v, headShape], `${p}.attention.self/Reshape_v`)], `${p}.attention.self/Transpose_v`, {
      perm: [0, 2, 1, 3],
    });
    const scores = g.node("MatMul", [qh, kh], `${p}.attention.self/MatMul_qk`);
    const scaled = g.node("Div", [scores, scale], `${p}.attention.self/Div`);
    const masked = g.node("Add", [scaled, additiveMask], `${p}.attention.self/Add_mask`);
    const probs = g.node("Softmax", [masked], `${p}.attention.self/Softmax`, { axis: -1 });
    const context = g.node("MatMul", [probs, vh], `${p}.attention.self/MatMul_qkv`);
    const contextT = g.node("Transpose", [context], `${p}.attention.self/Transpose_context`, { perm: [0, 2, 1, 3] });
    const merged = g.node("Reshape", [contextT, mergedShape], `${p}.attention.self/Reshape_context`);
    const attnOut = linear(g, w, merged, `${p}.attention.output.dense`, hidden, hidden);
    const res1 = g.node("Add", [attnOut, x], `${p}.attention.output/Add_residual`);
    const ln1 = layerNorm(g, w, res1, `${p}.attention.output.LayerNorm`, hidden, eps);
    // feed-forward with erf GELU: x * 0.5 * (1 + erf(x / sqrt(2)))
    const ff1 = linear(g, w, ln1, `${p}.intermediate.dense`, hidden, intermediate);
    const d = g.node("Div", [ff1, g.constFloat(Math.SQRT2)], `${p}.intermediate.gelu/Div`);
    const e = g.node("Erf", [d], `${p}.intermediate.gelu/Erf`);
    const a = g.node("Add", [e, g.constFloat(1)], `${p}.intermediate.gelu/Add`);
    const m = g.node("Mul", [ff1, a], `${p}.intermediate.gelu/Mul`);
    const gelu = g.node("Mul", [m, g.constFloat(0.5)], `${p}.intermediate.gelu/Mul_1`);
    const ff2 = linear(g, w, gelu, `${p}.output.dense`, intermediate, hidden);
    const res2 = g.node("Add", [ff2, ln1], `${p}.output/Add_residual`);
    const lastOutput = l === layers - 1 && preset.head === undefined ? OUTPUT_NAME : undefined;
    hiddenStates = layerNorm(g, w, res2, `${p}.output.LayerNorm`, hidden, eps, lastOutput);
  }
  if (preset.head === undefined) {
    g.output(OUTPUT_NAME, DataType.FLOAT, ["batch_size", "sequence_length", hidden]);
  } else {
    sequenceClassificationHead(g, w, preset, preset.head, hiddenStates);
  }

  const what = preset.head === undefined ? "encoder" : `encoder with a ${preset.head.task} head`;
  const bytes = g.encode({
    irVersion: IR_VERSION,
    opsetVersion: OPSET_VERSION,
    producerName: GENERATOR_NAME,
    producerVersion: String(GENERATOR_VERSION),
    docString: `BERT-shaped ${what} with fixed pseudo-random weights (preset ${preset.name}, seed ${preset.seed})`,
    metadata: { preset: preset.name, seed: String(preset.seed), generator_version: String(GENERATOR_VERSION) },
  });
  return { bytes, weightBytes: g.weightBytes, parameterCount: w.parameterCount, nodeCount: g.nodeCount };
}
