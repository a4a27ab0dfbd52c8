#!/usr/bin/env bash
# CTest smoke of one libFuzzer target: 60 seconds from the committed seed corpus,
# with the sanitizer options and suppressions of tests/sanitizers/env.sh.
# Usage: run_smoke.sh FUZZER NEW_CORPUS_DIR SEED_CORPUS_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../sanitizers/env.sh"
fuzzer="$1" found="$2" seeds="$3"
mkdir -p "$found"
exec "$fuzzer" -max_total_time="${MHA_FUZZ_SECONDS:-60}" -rss_limit_mb=4096 -timeout=30 \
  -print_final_stats=1 "$found" "$seeds"
