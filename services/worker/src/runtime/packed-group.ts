/**
 * One sub-batch as the model takes it: ids padded to the longest sequence plus the attention
 * mask (and token types, for pairs), as int64 row-major buffers that transfer to a worker thread
 * without copying.
 */

/** A padded [batch, seqLen] group. */
export interface PackedGroup {
  readonly batch: number;
  readonly seqLen: number;
  /** batch × seqLen ids, 0 after each sequence's end ([PAD] in BERT vocabularies; the mask hides it anyway). */
  readonly inputIds: BigInt64Array;
  /** batch × seqLen, 1 for real tokens and 0 for padding. */
  readonly attentionMask: BigInt64Array;
  /**
   * batch × seqLen token types, 0 in padding; absent when the group was packed without them
   * (single texts), which the inference thread runs with all-zero types.
   */
  readonly tokenTypeIds?: BigInt64Array;
}

/**
 * Pads sequences into one group.
 * @param typeIds token types per sequence, parallel to `sequences` (same count, same lengths);
 *   omit for single texts
 * @throws RangeError for an empty group, an empty sequence, an id or type id that is not a
 *   non-negative integer, or type ids that do not match the sequences
 */
export function packGroup(sequences: readonly ArrayLike<number>[], typeIds?: readonly ArrayLike<number>[]): PackedGroup {
  const batch = sequences.length;
  if (batch === 0) throw new RangeError("a group needs at least one sequence");
  if (typeIds !== undefined && typeIds.length !== batch) {
    throw new RangeError(`a group of ${batch} sequences has type ids for ${typeIds.length}`);
  }
  let seqLen = 0;
  for (const [i, seq] of sequences.entries()) {
    if (seq.length === 0) throw new RangeError(`sequence ${i} is empty (it needs at least its special tokens)`);
    if (seq.length > seqLen) seqLen = seq.length;
    const types = typeIds?.[i];
    if (types !== undefined && types.length !== seq.length) {
      throw new RangeError(`sequence ${i} has ${seq.length} ids but ${types.length} type ids`);
    }
  }
  const inputIds = new BigInt64Array(batch * seqLen);
  const attentionMask = new BigInt64Array(batch * seqLen);
  for (let b = 0; b < batch; b++) {
    const seq = sequences[b]!;
    const row = b * seqLen;
    for (let s = 0; s < seq.length; s++) {
      const id = seq[s]!;
      if (!(Number.isSafeInteger(id) && id >= 0)) throw new RangeError(`sequence ${b} has an invalid id at ${s}: ${id}`);
      inputIds[row + s] = BigInt(id);
      attentionMask[row + s] = 1n;
    }
  }
  if (typeIds === undefined) return { batch, seqLen, inputIds, attentionMask };
  const tokenTypeIds = new BigInt64Array(batch * seqLen);
  for (let b = 0; b < batch; b++) {
    const types = typeIds[b]!;
    const row = b * seqLen;
    for (let s = 0; s < types.length; s++) {
      const t = types[s]!;
      if (!(Number.isSafeInteger(t) && t >= 0)) throw new RangeError(`sequence ${b} has an invalid type id at ${s}: ${t}`);
      tokenTypeIds[row + s] = BigInt(t);
    }
  }
  return { batch, seqLen, inputIds, attentionMask, tokenTypeIds };
}
