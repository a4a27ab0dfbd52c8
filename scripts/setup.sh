#!/usr/bin/env bash
# Installs what is missing (Debian packages, the venv with torch==2.13.0), then
# configures and builds mha (Release, Ninja) into $MHA_BUILD_DIR. Idempotent.
# MHA_EXTRA_APT_PACKAGES: more Debian packages (the fuzz build's clang);
# MHA_BUILD_TARGETS: build only these targets.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

TORCH_VERSION=2.13.0
APT_PACKAGES=(cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
              ${MHA_EXTRA_APT_PACKAGES:-})
PIP_PACKAGES=("torch==$TORCH_VERSION" numpy safetensors matplotlib)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$MHA_PYTHON" -c "import torch, numpy, safetensors, matplotlib; assert torch.__version__.split('+')[0] == '$TORCH_VERSION'" 2>/dev/null; then
  echo "setup: preparing the venv $MHA_VENV with ${PIP_PACKAGES[*]}"
  [ -x "$MHA_PYTHON" ] || python3 -m venv "$MHA_VENV"
  "$MHA_PYTHON" -m pip install -q "${PIP_PACKAGES[@]}"
fi

TORCH_PREFIX="$("$MHA_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
if [ ! -f "$MHA_BUILD_DIR/build.ninja" ]; then
  cmake -S "$MHA_ROOT" -B "$MHA_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DMHA_PYTHON="$MHA_PYTHON" ${MHA_CMAKE_ARGS:-}
fi
cmake --build "$MHA_BUILD_DIR" ${MHA_BUILD_TARGETS:+--target $MHA_BUILD_TARGETS}
