"""Reference embeddings from an ONNX file, without torch: Python onnxruntime + the Rust tokenizers.

    python reference_onnx.py --jobs jobs.json --sentences sentences.json --out reference.json

jobs.json is a list of {"id", "model", "tokenizer", "pooling" ("mean" | "cls"), "maxLength",
"prompt"}: for each job, every sentence of sentences.json is prefixed with "prompt", tokenized
by the Rust tokenizers library (truncated to maxLength, no padding), run alone through
onnxruntime (CPU, input_ids / attention_mask / token_type_ids of zeros, output
last_hidden_state), pooled (masked mean or the first token) and L2-normalised, as the upstream
model cards describe. Writes {"versions", "models": {id: {"inputIds", "embeddings"}}}.
Used by infra/pretrained/maven-parity.test.ts to check Shoal's vectors for the same file.
"""

import argparse
import json
from importlib import metadata
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def embed(job: dict, sentences: list[str]) -> dict:
    tokenizer = Tokenizer.from_file(job["tokenizer"])
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=job["maxLength"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(job["model"], options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    input_ids, embeddings = [], []
    for text in sentences:
        ids = np.array([tokenizer.encode(job["prompt"] + text).ids], dtype=np.int64)
        mask = np.ones_like(ids)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(["last_hidden_state"], feed)[0][0].astype(np.float64)
        pooled = hidden[0] if job["pooling"] == "cls" else hidden.mean(axis=0)
        input_ids.append(ids[0].tolist())
        embeddings.append((pooled / np.linalg.norm(pooled)).astype(np.float32).tolist())
    return {"inputIds": input_ids, "embeddings": embeddings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", required=True, type=Path)
    parser.add_argument("--sentences", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    sentences = json.loads(args.sentences.read_text(encoding="utf-8"))["sentences"]
    models = {}
    for job in json.loads(args.jobs.read_text(encoding="utf-8")):
        models[job["id"]] = embed(job, sentences)
        print(f"  {job['id']}: {len(sentences)} reference embeddings", flush=True)
    versions = {name: metadata.version(name) for name in ("onnxruntime", "tokenizers", "numpy")}
    args.out.write_text(json.dumps({"versions": versions, "models": models}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
