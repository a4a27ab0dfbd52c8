#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the tests against that machine's Python
# torch (its cmake_prefix_path, any LibTorch 2.5+), then runs the CUDA unit tests
# and the whole parity matrix on CUDA. A missing GPU fails; nothing is skipped.
# Usage: scripts/gpu_check.sh [python]   (default: python3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${1:-python3}"
BUILD=build-gpu  # the gpu preset's binaryDir (CMakePresets.json)
"$PY" -c 'import torch, sys; print("gpu_check: torch", torch.__version__, "cuda", torch.version.cuda); sys.exit(0 if torch.cuda.is_available() else 1)' \
  || { echo "gpu_check: FAILED: torch.cuda.is_available() is false"; exit 1; }
MHA_TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
MHA_PYTHON="$(command -v "$PY")"
export MHA_TORCH_PREFIX MHA_PYTHON
cmake --preset gpu
cmake --build "$BUILD" --parallel --target mha_tests mha_parity_tests
export MHA_REQUIRE_CUDA=1
"$PY" scripts/export_reference.py --out "$BUILD/tests/reference"
"$BUILD/tests/mha_tests" --gtest_filter='*Cuda*'
"$BUILD/tests/mha_parity_tests"                      # CPU parity with this torch
MHA_PARITY_DEVICE=cuda "$BUILD/tests/mha_parity_tests"  # the same cases on CUDA
echo "gpu_check: passed"
