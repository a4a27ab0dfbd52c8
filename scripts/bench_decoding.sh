#!/usr/bin/env bash
# Incremental decoding benchmark: bench/decode_bench (forward_cached, the floor,
# recomputing forward) and scripts/bench_decoding_python.py (the fairseq-style
# Python loop), one right after the other, then the table for
# docs/benchmarks.md ("Incremental decoding") and docs/decoding_bench.png.
#
# Usage: scripts/bench_decoding.sh [--smoke]   (about 3 minutes on 2 cores)
# Environment: MHA_BUILD_DIR (default build/), MHA_DECODE_RAW (directory for the
# raw JSON files, default a temporary one).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

CPP_ARGS=(--benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true)
PY_ARGS=()
if [ "${1:-}" = "--smoke" ]; then
  CPP_ARGS=(--decode_smoke)
  PY_ARGS=(--smoke)
fi
RAW="${MHA_DECODE_RAW:-$(mktemp -d)}"
mkdir -p "$RAW"
cmake --build "$MHA_BUILD_DIR" -j2 --target decode_bench
"$MHA_BUILD_DIR/bench/decode_bench" "${CPP_ARGS[@]}" \
  --benchmark_out="$RAW/cpp.json" --benchmark_out_format=json
"$MHA_PYTHON" "$MHA_ROOT/scripts/bench_decoding_python.py" --out "$RAW/python.json" "${PY_ARGS[@]}"
"$MHA_PYTHON" "$MHA_ROOT/scripts/bench_decoding_report.py" "$RAW/cpp.json" "$RAW/python.json" \
  --plot "$MHA_ROOT/docs/decoding_bench.png"
