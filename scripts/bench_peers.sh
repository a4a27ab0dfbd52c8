#!/usr/bin/env bash
# mha against ONNX Runtime, AOTInductor and CTranslate2 on the same weights
# (scripts/bench_peers.py; docs/benchmarks.md, sections 10 and 13-15). Builds
# bench/peer_rounds and bench/serving_bench (scripts/setup.sh,
# MHA_BUILD_TARGETS), installs the pinned peers of
# scripts/bench_peers_requirements.txt into the venv with torch kept at its
# version (skipped when they are installed), then runs the benchmark.
# Not part of CI: scripts/test.sh never runs it.
# Usage: scripts/bench_peers.sh [--smoke] [more scripts/bench_peers.py arguments]
#   --smoke: every case once (one round of one call, 8 decoded tokens), to check
#   the pipeline (3-5 minutes); a full run takes 15-25 minutes on 2 cores.
# The tables go to stdout and to bench/results/peers-<UTC date>.md, the rows
# with their per-round times to the .json beside it (smoke: $MHA_BUILD_DIR/
# peers-smoke.md and .json); MHA_PEERS_OUT names another .md file.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
TORCH_VERSION=2.13.0
REQUIREMENTS="$MHA_ROOT/scripts/bench_peers_requirements.txt"

MHA_BUILD_TARGETS="peer_rounds serving_bench" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$MHA_ROOT/scripts/setup.sh"

# Installed when any pinned version is missing.
if ! "$MHA_PYTHON" - "$REQUIREMENTS" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
pins = [l.split("#")[0].strip() for l in open(sys.argv[1])]
try:
    sys.exit(any(version(n) != v for n, v in (p.split("==") for p in pins if p)))
except PackageNotFoundError:
    sys.exit(1)
PY
then
  echo "bench_peers: installing $REQUIREMENTS"
  "$MHA_PYTHON" -m pip install -q -c <(echo "torch==$TORCH_VERSION") -r "$REQUIREMENTS"
fi

if [ "${1:-}" = "--smoke" ]; then
  OUT="${MHA_PEERS_OUT:-$MHA_BUILD_DIR/peers-smoke.md}"
else
  OUT="${MHA_PEERS_OUT:-$MHA_ROOT/bench/results/peers-$(date -u +%F).md}"
fi
OUT="$(realpath -m "$OUT")"  # MHA_PEERS_OUT may be relative to the caller
cd "$MHA_ROOT/scripts"
exec "$MHA_PYTHON" bench_peers.py --cpp "$MHA_BUILD_DIR/bench/peer_rounds" --out "$OUT" \
  --json "${OUT%.md}.json" "$@"
