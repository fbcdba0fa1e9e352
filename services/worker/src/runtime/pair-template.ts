/**
 * How a tokenizer frames a (query, document) pair, read from tokenizer.json's `post_processor`
 * as the Rust `tokenizers` library applies it, plus its `longest_first` truncation. Kept apart
 * from text-tokenizer.ts because @huggingface/tokenizers (JS) differs from the Rust reference on
 * pairs (it gives RoBERTa's second segment type 1; Rust gives every RoBERTa token type 0).
 */

import { isJsonObject, type JsonObject } from "@shoal/common/json";

/** One piece of a pair template: fixed special-token ids, or segment A (query) / B (document). */
export type PairTemplatePiece =
  | { readonly kind: "special"; readonly ids: readonly number[]; readonly typeId: number }
  | { readonly kind: "segment"; readonly segment: "A" | "B"; readonly typeId: number };

/** A tokenizer's pair template, in order. */
export interface PairTemplate {
  readonly pieces: readonly PairTemplatePiece[];
  /** Special tokens the template adds around the two segments (BERT: 3, RoBERTa: 4). */
  readonly specialCount: number;
}

type Json = JsonObject;

function isTypeId(v: unknown): v is number {
  // Stored per token in a Uint8Array; real vocabularies have 1 or 2 types.
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 255;
}

function isTokenId(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function template(pieces: PairTemplatePiece[]): PairTemplate {
  const specialCount = pieces.reduce((n, p) => n + (p.kind === "special" ? p.ids.length : 0), 0);
  return { pieces, specialCount };
}

/** `["[SEP]", 102]` → 102. */
function tupleId(v: unknown): number | undefined {
  return Array.isArray(v) && isTokenId(v[1]) ? v[1] : undefined;
}

/** `BertProcessing` / `RobertaProcessing`: `sep` and `cls` as `[token, id]` tuples. */
function fixedProcessing(p: Json, roberta: boolean): PairTemplate | string {
  const cls = tupleId(p.cls);
  const sep = tupleId(p.sep);
  if (cls === undefined || sep === undefined) return `${String(p.type)} needs "cls" and "sep" as [token, id]`;
  const special = (id: number, typeId: number): PairTemplatePiece => ({ kind: "special", ids: [id], typeId });
  const segment = (s: "A" | "B", typeId: number): PairTemplatePiece => ({ kind: "segment", segment: s, typeId });
  return roberta
    ? template([special(cls, 0), segment("A", 0), special(sep, 0), special(sep, 0), segment("B", 0), special(sep, 0)])
    : template([special(cls, 0), segment("A", 0), special(sep, 0), segment("B", 1), special(sep, 1)]);
}

/** `TemplateProcessing`: its `pair` list, special tokens resolved through `special_tokens`. */
function templateProcessing(p: Json): PairTemplate | string {
  if (!Array.isArray(p.pair)) return 'TemplateProcessing has no "pair" template';
  const specials = isJsonObject(p.special_tokens) ? p.special_tokens : {};
  const pieces: PairTemplatePiece[] = [];
  const seen = new Set<string>();
  for (const [i, item] of (p.pair as unknown[]).entries()) {
    const where = `TemplateProcessing pair[${i}]`;
    if (isJsonObject(item) && isJsonObject(item.SpecialToken)) {
      const { id, type_id: typeId } = item.SpecialToken;
      const entry = typeof id === "string" ? specials[id] : undefined;
      const ids = isJsonObject(entry) ? entry.ids : undefined;
      if (!Array.isArray(ids) || ids.length === 0 || !ids.every(isTokenId)) return `${where}: special token ${JSON.stringify(id)} has no ids in special_tokens`;
      if (!isTypeId(typeId)) return `${where}: type_id must be an integer 0..255`;
      pieces.push({ kind: "special", ids: ids as number[], typeId });
    } else if (isJsonObject(item) && isJsonObject(item.Sequence)) {
      const { id, type_id: typeId } = item.Sequence;
      if (id !== "A" && id !== "B") return `${where}: sequence id must be "A" or "B" (got ${JSON.stringify(id)})`;
      if (!isTypeId(typeId)) return `${where}: type_id must be an integer 0..255`;
      if (seen.has(id)) return `${where}: sequence ${id} appears twice`;
      seen.add(id);
      pieces.push({ kind: "segment", segment: id, typeId });
    } else {
      return `${where}: expected a SpecialToken or a Sequence`;
    }
  }
  if (!seen.has("A") || !seen.has("B")) return "TemplateProcessing pair template must place both sequences A and B";
  return template(pieces);
}

/**
 * Reads the pair template from a tokenizer.json `post_processor`.
 * - `TemplateProcessing`: its `pair` list;
 * - `BertProcessing`: `[CLS] A [SEP] B [SEP]`, types 0 0 0 1 1;
 * - `RobertaProcessing`: `<s> A </s> </s> B </s>`, every type 0 (as in Rust);
 * - `Sequence`: the one of the above among its processors (`ByteLevel` only touches offsets);
 * - `null` (no post-processor): `A B` without special tokens, types 0 then 1 (as in Rust).
 * @returns the template, or why it cannot be read
 */
export function readPairTemplate(postProcessor: unknown): PairTemplate | string {
  if (postProcessor === null || postProcessor === undefined) {
    return template([
      { kind: "segment", segment: "A", typeId: 0 },
      { kind: "segment", segment: "B", typeId: 1 },
    ]);
  }
  if (!isJsonObject(postProcessor)) return "post_processor must be an object or null";
  switch (postProcessor.type) {
    case "TemplateProcessing":
      return templateProcessing(postProcessor);
    case "BertProcessing":
      return fixedProcessing(postProcessor, false);
    case "RobertaProcessing":
      return fixedProcessing(postProcessor, true);
    case "Sequence": {
      const framing = (Array.isArray(postProcessor.processors) ? postProcessor.processors : []).filter(
        (p: unknown) => !(isJsonObject(p) && p.type === "ByteLevel"),
      );
      if (framing.length > 1) return `Sequence post_processor has ${framing.length} processors that add tokens; only one is supported`;
      return readPairTemplate(framing[0] ?? null);
    }
    default:
      return `post_processor type ${JSON.stringify(postProcessor.type)} is not supported for pairs`;
  }
}

/**
 * Segment lengths after Hugging Face `longest_first` truncation (Rust `truncate_encodings`, the
 * fast tokenizers behind sentence-transformers' CrossEncoder), cutting from the end of each.
 * When the shorter segment fits in half the budget it is kept whole and the longer gets the
 * rest; otherwise the shorter gets ⌊budget/2⌋ and the longer ⌈budget/2⌉ (on equal lengths the
 * first segment gets the floor). Equals "cut one token from the longer until it fits", up to
 * which segment keeps the odd token.
 * @param budget tokens left for the two segments once the template's special tokens are counted
 */
export function longestFirstLengths(queryLength: number, documentLength: number, budget: number): [number, number] {
  if (queryLength + documentLength <= budget) return [queryLength, documentLength];
  const swap = queryLength > documentLength;
  const shorter = swap ? documentLength : queryLength;
  let n1 = shorter;
  let n2 = shorter > budget ? shorter : Math.max(shorter, budget - shorter);
  if (n1 + n2 > budget) {
    n1 = Math.floor(budget / 2);
    n2 = n1 + (budget % 2);
  }
  return swap ? [n2, n1] : [n1, n2];
}
