#!/usr/bin/env bash
# One-shot GPU device check (issue #21; infra/gpu/README.md). Runs on a bare GPU host that has
# Python with PyTorch (CUDA), transformers, tokenizers and numpy, and nothing else: no Node.js,
# no Java, no network. It needs only what the repo carries plus the packed model:
#
#   npm run gpu:pack                     # here: writes .gpu-pack/ (44 MiB, git-ignored)
#   infra/gpu/device-check.sh [OUT_DIR]  # there: carry .gpu-pack
#
# It prints the machine, then the PyTorch sidecar's throughput as the worker drives it (bench mode:
# services/sidecar-pytorch/bench.py stands in for the worker with an in-process queue), in float16
# over the full grid (batch 32–1024 × sequence 16–256, GPU utilisation, p50/p99 per batch, the
# fitted a + b·B·L + c·B·L² profile), then with cuDNN attention on (mixed lengths only), then float32 on a smaller grid for
# comparison. About 3 minutes on an H200.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-.gpu-out}}
MODEL=${SHOAL_GPU_MODEL:-.gpu-pack/all-minilm-l6-v2}
PY=${SHOAL_PYTHON:-python3}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

[ -f "$MODEL/torch/model.safetensors" ] || { echo "device-check: $MODEL is missing: run infra/gpu/pack.sh and carry .gpu-pack" >&2; exit 2; }
echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || echo "(no nvidia-smi)"
nproc
"$PY" -c 'import torch, transformers, tokenizers, numpy, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "numpy", numpy.__version__)'

echo "== float16, full grid (cuDNN attention off, lengths padded to a multiple of 16: the sidecar's defaults)"
"$PY" -B services/sidecar-pytorch/bench.py --model "$MODEL" --device cuda --dtype fp16 --profile --out "$OUT_DIR/fp16"
echo "== float16 with cuDNN attention on (PyTorch's default), mixed lengths only"
"$PY" -B services/sidecar-pytorch/bench.py --model "$MODEL" --device cuda --dtype fp16 --cudnn-attention on --batches 512 --seqs 64 --out "$OUT_DIR/cudnn"
echo "== float32, smaller grid"
"$PY" -B services/sidecar-pytorch/bench.py --model "$MODEL" --device cuda --dtype fp32 --batches 128,1024 --seqs 32,128 --mixed 8192 --out "$OUT_DIR/fp32"
echo "== done"
