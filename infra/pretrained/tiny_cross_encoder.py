"""A tiny random BERT cross-encoder (BertForSequenceClassification, 1 label) for the sidecar's
rerank test: saves it as a Hugging Face folder and writes its own logits for the given pairs.

    python tiny_cross_encoder.py --vocab N --pairs pairs.json --out DIR

pairs.json: {"ids": [[...], ...], "types": [[...], ...]}. DIR gets the model folder and
reference.json ({"logits": [...]}: each pair run alone, in float32).
"""

import argparse
import json
from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification

parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, required=True)
parser.add_argument("--pairs", type=Path, required=True)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

torch.manual_seed(7)
config = BertConfig(vocab_size=args.vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=128, type_vocab_size=2, num_labels=1)
model = BertForSequenceClassification(config).eval()
with torch.no_grad():
    # BERT's init (std 0.02) leaves token types and the head nearly inert in a random model; make
    # both matter, so a lost token type or a wrong logit shows.
    model.bert.embeddings.token_type_embeddings.weight.normal_(0, 1.0)
    model.classifier.weight.normal_(0, 1.0)
model.save_pretrained(str(args.out))
pairs = json.loads(args.pairs.read_text())
logits = []
with torch.inference_mode():
    for ids, types in zip(pairs["ids"], pairs["types"]):
        out = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        logits.append(float(out.logits[0, 0]))
(args.out / "reference.json").write_text(json.dumps({"logits": logits}))
