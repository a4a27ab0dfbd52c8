# Sourced by scripts/test.sh --sanitize (and by hand before running a sanitized
# build's tests or fuzzers): sanitizer run-time options and the suppression
# files beside this one. Each suppression is for a report inside LibTorch,
# which is a prebuilt, uninstrumented library; see the comment on each.
MHA_SANITIZER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Leaks are checked at exit; a UBSan report fails the test like an ASan one.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_init_order=1:check_initialization_order=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$MHA_SANITIZER_DIR/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$MHA_SANITIZER_DIR/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$MHA_SANITIZER_DIR/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
