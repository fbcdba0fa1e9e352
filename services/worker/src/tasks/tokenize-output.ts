import type { MessageInitShape } from "@bufbuild/protobuf";
import type { TokenizedInputSchema } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { alignTokens } from "../runtime/token-offsets.ts";
import type { ExplainedText } from "../runtime/text-tokenizer.ts";
import type { JobOutput } from "./task-job.ts";

/**
 * A Tokenize job's output: per input its ids and token strings, and each token's offsets in the
 * input as sent. Special tokens and the prompt's tokens are marked `special` with empty offsets.
 */
export function tokenizeOutput(inputs: readonly string[], explained: readonly ExplainedText[], maxSequenceLength: number): JobOutput {
  const tokenized: MessageInitShape<typeof TokenizedInputSchema>[] = explained.map((e, index) => {
    const all = e.allTokens.length;
    const textFrom = e.specialPrefix + e.promptTokens;
    const textTo = all - e.specialSuffix;
    // Align the whole text's tokens (a START cut keeps the last ones), then pick the kept ones.
    const spans = alignTokens(inputs[index] ?? "", e.allTokens.slice(textFrom, textTo));
    const starts: number[] = [];
    const ends: number[] = [];
    const special: boolean[] = [];
    for (const p of e.positions) {
      const span = p >= textFrom && p < textTo ? spans[p - textFrom] : undefined;
      starts.push(span?.start ?? 0);
      ends.push(span?.end ?? 0);
      special.push(span === undefined);
    }
    return { index, ids: Array.from(e.ids), tokens: [...e.tokens], starts, ends, special, truncated: e.truncated };
  });
  return { case: "tokens", value: { inputs: tokenized, maxSequenceLength } };
}
