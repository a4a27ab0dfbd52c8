#!/usr/bin/env bash
# Installs what is missing (Debian packages, the venv with torch==2.13.0), then
# configures (CMakePresets.json) and builds mha into $MHA_BUILD_DIR. Idempotent.
# MHA_PRESET: the configure preset (default release); MHA_CMAKE_ARGS: more
# cmake arguments, applied again whenever they change; MHA_EXTRA_APT_PACKAGES:
# more Debian packages (the fuzz build's clang); MHA_BUILD_TARGETS: build only
# these targets.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

TORCH_VERSION=2.13.0
# clang-19: the compile_alone test's compiler (scripts/compile_alone.py) and
# the fuzz build's.
# libpcre2-dev, libutf8proc-dev: the tokenizers' patterns and Unicode classes;
# libsentencepiece-dev: reading SentencePiece .model files (Llama's tokenizer.model);
# the fortunes: the text the tokenizer tests train and compare on
# (scripts/export_tokenizer_reference.py).
APT_PACKAGES=(cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
              libgloo-dev clang-19 libpcre2-dev libutf8proc-dev libsentencepiece-dev libcli11-dev
              fortunes fortunes-de fortunes-ru fortunes-zh fortunes-es fortunes-cs
              ${MHA_EXTRA_APT_PACKAGES:-})
# transformers: the Hugging Face checkpoints' tests write small random models
# with it (scripts/export_hf_reference.py); pip keeps torch at $TORCH_VERSION.
TRANSFORMERS_VERSION=5.23.0
# sentencepiece: the tokenizer tests take SentencePiece's compiled normalization
# rules (a precompiled_charsmap) from a model it trains, and train a Llama
# tokenizer.model, which transformers reads with protobuf.
SENTENCEPIECE_VERSION=0.2.1
PROTOBUF_VERSION=7.36.2
# sentence-transformers: the sentence embedding tests compare with its encode
# on directories it writes (scripts/export_pipeline_reference.py).
SENTENCE_TRANSFORMERS_VERSION=6.3.0
PIP_PACKAGES=("torch==$TORCH_VERSION" numpy safetensors matplotlib "transformers==$TRANSFORMERS_VERSION"
  "sentencepiece==$SENTENCEPIECE_VERSION" "protobuf==$PROTOBUF_VERSION"
  "sentence-transformers==$SENTENCE_TRANSFORMERS_VERSION")

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

if ! "$MHA_PYTHON" -c "import torch, numpy, safetensors, matplotlib, transformers, sentencepiece, sentence_transformers; assert torch.__version__.split('+')[0] == '$TORCH_VERSION'; assert transformers.__version__ == '$TRANSFORMERS_VERSION'; assert sentencepiece.__version__ == '$SENTENCEPIECE_VERSION'; assert sentence_transformers.__version__ == '$SENTENCE_TRANSFORMERS_VERSION'" 2>/dev/null; then
  echo "setup: preparing the venv $MHA_VENV with ${PIP_PACKAGES[*]}"
  [ -x "$MHA_PYTHON" ] || python3 -m venv "$MHA_VENV"
  "$MHA_PYTHON" -m pip install -q "${PIP_PACKAGES[@]}"
fi

# Configure when the build folder is new or the preset or arguments changed.
MHA_TORCH_PREFIX="$("$MHA_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
export MHA_TORCH_PREFIX
PRESET="${MHA_PRESET:-release}"
CONFIGURED="$PRESET ${MHA_CMAKE_ARGS:-} $MHA_TORCH_PREFIX"
STAMP="$MHA_BUILD_DIR/mha-configured-with.txt"
if [ ! -f "$MHA_BUILD_DIR/build.ninja" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$CONFIGURED" ]; then
  # shellcheck disable=SC2086  # MHA_CMAKE_ARGS is a list of arguments
  (cd "$MHA_ROOT" && cmake --preset "$PRESET" -B "$MHA_BUILD_DIR" ${MHA_CMAKE_ARGS:-})
  echo "$CONFIGURED" > "$STAMP"
fi
cmake --build "$MHA_BUILD_DIR" ${MHA_BUILD_TARGETS:+--target $MHA_BUILD_TARGETS}
