export { buildBertGraph, headLabelCount, INPUT_NAMES, IR_VERSION, LOGITS_OUTPUT_NAME, OPSET_VERSION, OUTPUT_NAME } from "./bert-graph.ts";
export type { BuiltGraph } from "./bert-graph.ts";
export { cachedModelDir, COMPLETE_MARKER, ensureModel, isCompleteModelDir, modelCacheRoot, shoalCacheRoot } from "./ensure-model.ts";
export type { EnsureOptions } from "./ensure-model.ts";
export { estimateMemoryBytes, MANIFEST_FILE, MANIFEST_FORMAT_VERSION, parseManifest } from "./manifest.ts";
export type {
  ClassifyManifest,
  EmbedManifest,
  GeneratedModelSource,
  Pooling,
  ProblemType,
  RerankManifest,
  ScoreActivation,
  ShoalModelManifest,
} from "./manifest.ts";
export { GENERATOR_NAME, GENERATOR_VERSION, getPreset, headInitializerRange, isPresetName, PRESET_NAMES, PRESETS } from "./presets.ts";
export type { BertPreset, PresetHead, PresetName } from "./presets.ts";
export { buildTokenizerConfig, buildTokenizerJson } from "./tokenizer-json.ts";
export { BERT_VOCAB_SIZE, buildVocab, SPECIAL_TOKENS } from "./vocab.ts";
export { buildManifest, MODEL_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, writeModelDir } from "./write-model-dir.ts";
export type { WriteOptions, WriteResult, WrittenFile } from "./write-model-dir.ts";
export { writeHubModelDir } from "./write-hub-model-dir.ts";
export type { CrossEncoderStyle, HubModelDirOptions, HubModelDirResult } from "./write-hub-model-dir.ts";
export {
  ensurePretrained,
  ensurePretrainedEnv,
  findPretrained,
  PRETRAINED_MODEL_ID,
  PRETRAINED_PACKAGE,
  PRETRAINED_REQUIREMENTS,
  PRETRAINED_SOURCE_DIR,
  pretrainedModelDir,
  pretrainedPackageVersion,
  writeReferenceEmbeddings,
} from "./pretrained.ts";
export type { PretrainedOptions } from "./pretrained.ts";
export { ensurePythonEnv, PythonCommandError, pythonEnvDir, requirementLines, runLogged } from "./python-env.ts";
export type { PythonEnv, PythonEnvOptions } from "./python-env.ts";
export { mulberry32 } from "./prng.ts";
export {
  BGE_QUERY_INSTRUCTION,
  coordinates,
  ensureMavenModel,
  findMavenModel,
  getMavenEmbedder,
  MAVEN_EMBEDDERS,
  MAVEN_RECIPE_VERSION,
  mavenManifest,
  mavenModelDir,
} from "./maven-models.ts";
export type { MavenEmbedder, MavenModelOptions } from "./maven-models.ts";
