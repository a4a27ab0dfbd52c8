#!/usr/bin/env bash
# CTest smoke of one libFuzzer target: 30 seconds (MHA_FUZZ_SECONDS) from the
# committed seed corpus, with the sanitizer options and suppressions of
# tests/sanitizers/env.sh. The long runs (docs/hardening.md) are the same script with
# MHA_FUZZ_SECONDS=1800.
# Usage: run_smoke.sh FUZZER NEW_CORPUS_DIR SEED_CORPUS_DIR [LIBFUZZER_FLAGS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../sanitizers/env.sh"
fuzzer="$1" found="$2" seeds="$3"
shift 3
# MHA_FUZZ_NO_LEAK_CHECK=1: no LeakSanitizer at exit either (see CMakeLists.txt).
if [ "${MHA_FUZZ_NO_LEAK_CHECK:-0}" = 1 ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
mkdir -p "$found"
exec "$fuzzer" -max_total_time="${MHA_FUZZ_SECONDS:-30}" -rss_limit_mb=4096 -timeout=30 \
  -print_final_stats=1 "$@" "$found" "$seeds"
