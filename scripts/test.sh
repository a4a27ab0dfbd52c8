#!/usr/bin/env bash
# Builds mha (installing what is missing) and runs the whole test suite.
# Usage: scripts/test.sh [--sanitize] [ctest arguments]
#   --sanitize: the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   (MHA_SANITIZE=asan) in its own build tree, build-asan; suppressions for reports
#   inside LibTorch (not instrumented) are in tests/sanitizers/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ "${1:-}" = "--sanitize" ]; then
  shift
  export MHA_BUILD_DIR="${MHA_ASAN_BUILD_DIR:-$MHA_ROOT/build-asan}"
  export MHA_CMAKE_ARGS="-DMHA_SANITIZE=asan -DMHA_BUILD_BENCHMARKS=OFF -DMHA_INSTALL=OFF ${MHA_CMAKE_ARGS:-}"
  source "$MHA_ROOT/tests/sanitizers/env.sh"
  # The packaging test builds an uninstrumented copy of mha: packaging, not memory.
  set -- -E '^package_' "$@"
fi
"$MHA_ROOT/scripts/setup.sh"
ctest --test-dir "$MHA_BUILD_DIR" --output-on-failure "$@"
