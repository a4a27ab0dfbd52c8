#!/usr/bin/env bash
# Builds mha (installing what is missing) and runs the whole test suite.
# Usage: scripts/test.sh [--sanitize | --tsan | --fuzz] [ctest arguments]
#   --sanitize: the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   (preset asan) in its own build tree, build-asan, without the examples (the
#   plain suite builds and runs them), with the fuzz targets replaying their
#   committed corpus (tests/fuzz); suppressions for reports
#   inside LibTorch (not instrumented) are in tests/sanitizers/.
#   --tsan: the concurrency tests built with ThreadSanitizer (preset tsan) in
#   build-tsan, run with tests/sanitizers/env.sh; not in CI (it builds the
#   library and the concurrency tests again: minutes on a small machine).
#   --fuzz: the libFuzzer targets (preset fuzz: clang-19, ASan+UBSan) in
#   build-fuzz, each run for 30 s (MHA_FUZZ_SECONDS) from its seed corpus in
#   tests/fuzz/corpus.
# MHA_CMAKE_ARGS adds cmake arguments (CI: -DMHA_WERROR=ON).
# Two tests run at a time (MHA_TEST_JOBS, default 2: the cores of a small
# machine; the multi-rank tests run alone). With two processes on two cores,
# OpenMP threads that spin while waiting slow both down many times, so the
# tests' OpenMP threads sleep instead (OMP_WAIT_POLICY=PASSIVE, unless set):
# it changes no result, only how idle threads wait.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
JOBS=(-j "${MHA_TEST_JOBS:-2}")
if [ "${1:-}" = "--sanitize" ]; then
  shift
  export MHA_PRESET=asan
  export MHA_BUILD_DIR="${MHA_ASAN_BUILD_DIR:-$MHA_ROOT/build-asan}"
  # FuzzedDataProvider.h for the fuzz targets' corpus replay (tests/fuzz).
  export MHA_EXTRA_APT_PACKAGES="libclang-rt-19-dev"
  source "$MHA_ROOT/tests/sanitizers/env.sh"
  # The packaging tests build an uninstrumented consumer, and the snippet and
  # compile-alone tests only compile: none is about memory. The preset builds
  # without tensor parallelism (docs/tensor_parallel.md, "Sanitizers").
  set -- -E '^(package_|doc_snippets_compile$|compile_alone$)' "$@"
elif [ "${1:-}" = "--tsan" ]; then
  shift
  export MHA_PRESET=tsan
  export MHA_BUILD_DIR="${MHA_TSAN_BUILD_DIR:-$MHA_ROOT/build-tsan}"
  export MHA_BUILD_TARGETS="mha_concurrency_tests"
  source "$MHA_ROOT/tests/sanitizers/env.sh"
  set -- -R '^Concurrency\.' "$@"
elif [ "${1:-}" = "--fuzz" ]; then
  shift
  export MHA_PRESET=fuzz
  export MHA_BUILD_DIR="${MHA_FUZZ_BUILD_DIR:-$MHA_ROOT/build-fuzz}"
  export MHA_EXTRA_APT_PACKAGES="libfuzzer-19-dev libclang-rt-19-dev"
  export MHA_BUILD_TARGETS="mha_fuzz_forward mha_fuzz_torch_save mha_fuzz_safetensors mha_fuzz_torchscript"
  # Two fuzzers at a time: one per core of a small machine.
  set -- -L fuzz "$@"
fi
"$MHA_ROOT/scripts/setup.sh"
ctest --test-dir "$MHA_BUILD_DIR" --output-on-failure "${JOBS[@]}" "$@"
