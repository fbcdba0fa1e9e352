/**
 * Hugging Face `tokenizers` JSON (tokenizer.json) for a BERT uncased WordPiece tokenizer, plus the
 * companion tokenizer_config.json. Field names and layout follow what `transformers` saves for
 * bert-base-uncased / all-MiniLM-L6-v2, so the Rust library, Python and @huggingface/tokenizers
 * all load it.
 */
import { CONTINUATION_PREFIX, SPECIAL_TOKENS } from "./vocab.ts";

interface AddedTokenJson {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

function specialToken(id: number, content: string): AddedTokenJson {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

export function buildTokenizerJson(vocab: readonly string[]): Record<string, unknown> {
  const specials = [SPECIAL_TOKENS.pad, SPECIAL_TOKENS.unk, SPECIAL_TOKENS.cls, SPECIAL_TOKENS.sep, SPECIAL_TOKENS.mask];
  for (const s of specials) {
    if (vocab[s.id] !== s.token) throw new Error(`vocabulary id ${s.id} is not ${s.token}`);
  }
  const vocabObject: Record<string, number> = {};
  vocab.forEach((token, id) => {
    vocabObject[token] = id;
  });
  const cls = SPECIAL_TOKENS.cls;
  const sep = SPECIAL_TOKENS.sep;
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: specials.map((s) => specialToken(s.id, s.token)),
    normalizer: {
      type: "BertNormalizer",
      clean_text: true,
      handle_chinese_chars: true,
      strip_accents: null, // null = follow `lowercase` (BERT uncased): accents are stripped
      lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: cls.token, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: sep.token, type_id: 0 } }],
      pair: [
        { SpecialToken: { id: cls.token, type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: sep.token, type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
        { SpecialToken: { id: sep.token, type_id: 1 } },
      ],
      special_tokens: {
        [cls.token]: { id: cls.token, ids: [cls.id], tokens: [cls.token] },
        [sep.token]: { id: sep.token, ids: [sep.id], tokens: [sep.token] },
      },
    },
    decoder: { type: "WordPiece", prefix: CONTINUATION_PREFIX, cleanup: true },
    model: {
      type: "WordPiece",
      unk_token: SPECIAL_TOKENS.unk.token,
      continuing_subword_prefix: CONTINUATION_PREFIX,
      max_input_chars_per_word: 100,
      vocab: vocabObject,
    },
  };
}

/** tokenizer_config.json as `transformers` writes it for a BERT uncased tokenizer. */
export function buildTokenizerConfig(modelMaxLength: number): Record<string, unknown> {
  return {
    tokenizer_class: "BertTokenizer",
    do_lower_case: true,
    tokenize_chinese_chars: true,
    strip_accents: null,
    clean_up_tokenization_spaces: true,
    model_max_length: modelMaxLength,
    pad_token: SPECIAL_TOKENS.pad.token,
    unk_token: SPECIAL_TOKENS.unk.token,
    cls_token: SPECIAL_TOKENS.cls.token,
    sep_token: SPECIAL_TOKENS.sep.token,
    mask_token: SPECIAL_TOKENS.mask.token,
  };
}
