#!/usr/bin/env bash
# Gives onnxruntime-node its CUDA execution provider on a GPU host with registry access, then
# checks that a session opens on CUDA (infra/gpu/README.md).
#
#   infra/gpu/onnxruntime-cuda.sh
#
# The repo's .npmrc skips onnxruntime-node's own download (`onnxruntime-node-install=skip`): CPU
# hosts need nothing beyond the npm package. On a GPU host this runs the package's installer with
# `ONNXRUNTIME_NODE_INSTALL=cuda12`, which fetches the provider libraries of the same onnxruntime
# version (1.30.0: libonnxruntime_providers_cuda.so and _shared.so, from the NuGet package
# Microsoft.ML.OnnxRuntime.Gpu.Linux 1.30.0) next to the binding. They need the CUDA 12 runtime,
# cuBLAS 12 and cuDNN 9 on the library path; a CUDA 13-only host (such as the device check's) cannot
# load them, and the worker then falls back to CPU with one warning — use the PyTorch sidecar there.
set -euo pipefail
cd "$(dirname "$0")/../.."
pkg=$(node -p 'require.resolve("onnxruntime-node/package.json", { paths: ["services/worker"] })')
dir=$(dirname "$pkg")
echo "onnxruntime-node $(node -p "require('$pkg').version") at $dir"
(cd "$dir" && ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js)
ls -l "$dir"/bin/napi-v*/linux/x64/
node --import tsx infra/gpu/ort-cuda-check.ts
