#!/usr/bin/env bash
# The main job: C++ mha::MultiheadAttention against Python's nn.MultiheadAttention.
#
#   scripts/run.sh                 a default nn.MultiheadAttention(512, 8) is made in
#                                  Python, exported with inputs (L=128, N=4) and its
#                                  outputs and median forward time, then mha-parity
#                                  runs the C++ module on it and prints the report
#   scripts/run.sh ARGS...         mha-parity ARGS... (see scripts/run.sh --help), e.g.
#                                  scripts/run.sh --weights layer.pt --prefix self_attn \
#                                    --inputs io.safetensors --num-heads 8
#
# Runs scripts/setup.sh first when the venv or the mha-parity binary is missing
# (set-up is idempotent); otherwise only brings mha-parity up to date.
# Exit status: mha-parity's (0 parity, 1 no parity, 2 bad input).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PARITY="$MHA_BUILD_DIR/tools/mha_parity/mha-parity"
if [ ! -x "$MHA_PYTHON" ] || [ ! -x "$PARITY" ] || [ ! -f "$MHA_BUILD_DIR/build.ninja" ]; then
  echo "run: setting up (scripts/setup.sh)" >&2
  "$MHA_ROOT/scripts/setup.sh" >&2
else
  cmake --build "$MHA_BUILD_DIR" --target mha-parity >/dev/null
fi

if [ $# -gt 0 ]; then
  exec "$PARITY" "$@"
fi

BUNDLE_DIR="$MHA_BUILD_DIR/run"
mkdir -p "$BUNDLE_DIR"
BUNDLE="$BUNDLE_DIR/mha_512x8_L128_N4.pt"
"$MHA_PYTHON" "$MHA_ROOT/scripts/export_reference.py" --bundle "$BUNDLE" \
  --embed-dim 512 --num-heads 8 --seq-len 128 --batch 4
exec "$PARITY" "$BUNDLE"
