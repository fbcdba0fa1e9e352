#!/usr/bin/env bash
# `npm run gpu:pack`. Writes .gpu-pack/all-minilm-l6-v2 (44 MiB, git-ignored) for infra/gpu/device-check.sh, from the
# infra/pretrained Python environment (built on first use: see infra/pretrained/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=$(node --import tsx infra/gpu/pretrained-python.ts)
"$PY" -B infra/gpu/pack.py --out .gpu-pack/all-minilm-l6-v2
