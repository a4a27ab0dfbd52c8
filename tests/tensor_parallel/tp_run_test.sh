#!/usr/bin/env bash
# scripts/tp_run.sh's contract: the environment of each rank, a crashed rank and
# a hung run named in a failing run, and no rank left running afterwards.
# Usage: tp_run_test.sh PATH/TO/tp_run.sh
set -uo pipefail
RUN=$1
MARK="tp_run_test_$$"
fail() { echo "FAIL: $*"; exit 1; }

out="$("$RUN" 3 bash -c 'echo "env $RANK/$WORLD_SIZE $MASTER_ADDR:$MASTER_PORT"' 2>&1)" || fail "a passing run failed: $out"
for r in 0 1 2; do
  grep -q "^\[rank $r\] env $r/3 127.0.0.1:[0-9]" <<<"$out" || fail "rank $r's environment: $out"
done

out="$("$RUN" 2 bash -c "if [ \$RANK = 1 ]; then kill -SEGV \$\$; fi; exec -a $MARK sleep 30" 2>&1)" &&
  fail "a run with a crashed rank passed"
grep -q "FAILED: rank 1 was killed by signal 11" <<<"$out" || fail "crash not named: $out"

out="$(TP_RUN_TIMEOUT=2 "$RUN" 2 bash -c "echo started; exec -a $MARK sleep 30" 2>&1)" &&
  fail "a hung run passed"
grep -q "FAILED: timed out after 2s; still running: rank(s) 0 1" <<<"$out" || fail "hang not named: $out"
grep -q "^\[rank 1\] started" <<<"$out" || fail "the hung ranks' output is missing: $out"

sleep 1
pgrep -f "$MARK" >/dev/null && fail "ranks were left running: $(pgrep -af "$MARK")"
echo "PASS"
