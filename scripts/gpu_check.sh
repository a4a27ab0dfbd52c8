#!/usr/bin/env bash
# The CUDA check. On a machine with an NVIDIA GPU: builds the tests against that
# machine's Python torch (its cmake_prefix_path, any LibTorch 2.5+), then runs
# the CUDA unit tests and the whole parity matrix on CUDA. A missing GPU fails;
# nothing is skipped.
#   --compile-only: for a machine without a GPU but with a CUDA build of torch
#   (and nvcc, which that build's CMake package looks for): the same build, then
#   the CPU part only (the unit tests, whose CUDA cases skip, and CPU parity).
#   It shows that the CUDA-enabled headers and the gpu preset compile.
# GoogleTest and nlohmann_json come from .gpu-deps/ when it exists
# (scripts/gpu_check_deps.sh packs them; the GPU machine has neither), else from
# the system. With $OUT set (the device machine), the log is written there too.
# Usage: scripts/gpu_check.sh [--compile-only] [python]   (default: python3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
COMPILE_ONLY=0
if [ "${1:-}" = "--compile-only" ]; then COMPILE_ONLY=1; shift; fi
PY="${1:-python3}"
BUILD=build-gpu  # the gpu preset's binaryDir (CMakePresets.json)
if [ -n "${OUT:-}" ]; then exec > >(tee "$OUT/gpu_check.log") 2>&1; fi

"$PY" -c 'import torch; print("gpu_check: torch", torch.__version__, "cuda", torch.version.cuda,
  "available", torch.cuda.is_available())'
if [ "$COMPILE_ONLY" = 0 ]; then
  "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || { echo "gpu_check: FAILED: torch.cuda.is_available() is false"; exit 1; }
  export MHA_REQUIRE_CUDA=1
fi
MHA_TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
MHA_PYTHON="$(command -v "$PY")"
export MHA_TORCH_PREFIX MHA_PYTHON

DEPS_ARGS=()
if [ -d .gpu-deps ]; then
  DEPS_ARGS=("-DCMAKE_PREFIX_PATH=$MHA_TORCH_PREFIX;$PWD/.gpu-deps/usr"
             "-DMHA_GTEST_SOURCE_DIR=$PWD/.gpu-deps/googletest")
fi
# A pip CUDA torch keeps libnvrtc in its nvidia/ wheels, where Torch's CMake
# package (Caffe2/public/cuda.cmake) does not look when the CUDA toolkit has none.
NVRTC="$("$PY" -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
found = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libnvrtc.so*"), recursive=True))
print(next((f for f in found if ".alt." not in f), ""))')"
if [ -n "$NVRTC" ]; then DEPS_ARGS+=("-DCUDA_nvrtc_LIBRARY=$NVRTC"); fi
# Torch's CMake package finds the toolkit from the folder of the first nvcc on
# PATH, which may be a wrapper script elsewhere: the standard location first.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake --preset gpu "${DEPS_ARGS[@]}"
cmake --build "$BUILD" --parallel --target mha_tests mha_parity_tests
"$PY" scripts/export_reference.py --out "$BUILD/tests/reference"
if [ "$COMPILE_ONLY" = 1 ]; then
  "$BUILD/tests/mha_tests"                           # CUDA cases skip without a GPU
  "$BUILD/tests/mha_parity_tests"                    # CPU parity with this torch
  echo "gpu_check: compile-only check passed (no CUDA test ran)"
  exit 0
fi
"$BUILD/tests/mha_tests" --gtest_filter='*Cuda*'
"$BUILD/tests/mha_parity_tests"                      # CPU parity with this torch
MHA_PARITY_DEVICE=cuda "$BUILD/tests/mha_parity_tests"  # the same cases on CUDA
echo "gpu_check: passed"
