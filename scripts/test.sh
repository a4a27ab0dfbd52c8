#!/usr/bin/env bash
# Builds mha (installing what is missing) and runs the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$MHA_ROOT/scripts/setup.sh"
ctest --test-dir "$MHA_BUILD_DIR" --output-on-failure "$@"
