#!/usr/bin/env bash
# The full benchmark sweep: mha_bench (ours, LibTorch's MultiheadAttention, the
# composite floor, the GEMM peak) and scripts/bench_python.py (Python's
# nn.MultiheadAttention), then bench/results/<date>.json, bench/results/<date>.md
# (every configuration), docs/benchmarks.md (the summary between its GENERATED
# markers) and docs/benchmarks.png.
#
# The machine is shared and noisy, so the sweep runs in small groups, one
# (shape, threads) pair at a time: the C++ binary (its benchmarks and
# repetitions in random order, with its own GEMM peak) and right after it the
# Python script on the same group. Ratios are taken within a group.
#
# Usage: scripts/bench.sh [--smoke]   (about 15 minutes on 2 idle cores; --smoke: a minute)
# Environment: MHA_BUILD_DIR (default build/), MHA_VENV, MHA_BENCH_THREADS (default "1 2"),
# MHA_BENCH_MAX_BUSY and MHA_BENCH_QUIET_WAIT (see wait_quiet), MHA_BENCH_RAW and
# MHA_BENCH_GROUPS (keep the raw files; re-run some groups).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

SMOKE=()
PY_SMOKE=()
if [ "${1:-}" = "--smoke" ]; then
  SMOKE=(--mha_smoke)
  PY_SMOKE=(--smoke)
fi
THREADS="${MHA_BENCH_THREADS:-1 2}"
# The shapes, as NxL words, from bench/grid.json (the grid's one description).
grid_shapes() {
  "$MHA_PYTHON" -c "import json,sys; print(' '.join(f'{n}x{l}' for n, l in json.load(open(sys.argv[1]))[sys.argv[2]]))" \
    "$MHA_ROOT/bench/grid.json" "$1"
}
INFER_SHAPES="$(grid_shapes infer_shapes)"
TRAIN_SHAPES="$(grid_shapes train_shapes)"

MHA_BUILD_TARGETS=mha_bench "$MHA_ROOT/scripts/setup.sh"
BENCH="$MHA_BUILD_DIR/bench/mha_bench"

# MHA_BENCH_RAW=DIR keeps the raw group files there; with MHA_BENCH_GROUPS="6 12"
# only those groups run again (e.g. ones a busy machine spoiled), the others'
# files in DIR are reused, and the report is rebuilt from all of them.
if [ -n "${MHA_BENCH_RAW:-}" ]; then
  RAW="$MHA_BENCH_RAW"
  mkdir -p "$RAW"
else
  RAW="$(mktemp -d)"
  trap 'rm -rf "$RAW"' EXIT
fi
start=$(date +%s)
group=0

# busy_percent: CPU time the whole machine spent busy over one second, in %
# (of all cores); called between groups, so it is the others' load.
busy_percent() {
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  local total=0 idle i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  idle=$(( b[4] - a[4] + b[5] - a[5] ))
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

# wait_quiet: two threads are meaningless while other processes hold the
# cores (each OpenMP barrier waits for a descheduled thread), so each group
# waits until the machine is at most MHA_BENCH_MAX_BUSY % busy (default 20),
# for up to MHA_BENCH_QUIET_WAIT seconds (default 600), and records the busy %.
# The Python half of a group waits likewise.
wait_quiet() {
  local waited=0 busy
  busy=$(busy_percent)
  while [ "$busy" -gt "${MHA_BENCH_MAX_BUSY:-20}" ] && [ "$waited" -lt "${MHA_BENCH_QUIET_WAIT:-600}" ]; do
    sleep 4
    waited=$(( waited + 5 ))
    busy=$(busy_percent)
  done
  echo "$busy"
}

# run_group FAMILIES SHAPES THREADS PYTHON_FAMILIES: one C++ run, then Python.
run_group() {
  local families="$1" shapes="$2" threads="$3" py_families="$4"
  group=$((group + 1))
  local tag busy
  tag="$(printf '%02d' "$group")"
  if [ -n "${MHA_BENCH_GROUPS:-}" ] && [[ " $MHA_BENCH_GROUPS " != *" $group "* ]]; then
    return 0
  fi
  busy=$( [ ${#SMOKE[@]} -gt 0 ] && echo 0 || wait_quiet )
  echo "{\"group\": $group, \"busy_percent_before\": $busy}" >"$RAW/load_$tag.json"
  echo "== group $tag: $families shapes=$shapes threads=$threads, others' load ${busy}% ($(( $(date +%s) - start )) s)"
  "$BENCH" "${SMOKE[@]}" --mha_families="$families" --mha_shapes="$shapes" \
    --mha_threads="$threads" --benchmark_enable_random_interleaving=true \
    --benchmark_display_aggregates_only=true \
    --benchmark_out="$RAW/cpp_$tag.json" --benchmark_out_format=json >"$RAW/cpp_$tag.log" 2>&1
  if [ -n "$py_families" ]; then
    busy=$( [ ${#SMOKE[@]} -gt 0 ] && echo 0 || wait_quiet )
    echo "   others' load before Python ${busy}%"
    "$MHA_PYTHON" "$MHA_ROOT/scripts/bench_python.py" "${PY_SMOKE[@]}" \
      --families "$py_families" --shapes "$shapes" --threads "$threads" \
      --out "$RAW/py_$tag.json" >"$RAW/py_$tag.log"
  fi
}

for shape in $INFER_SHAPES; do
  for t in $THREADS; do
    run_group infer,gemm "$shape" "$t" infer
  done
done
for t in $THREADS; do
  run_group train,gemm "$(echo "$TRAIN_SHAPES" | tr ' ' ',')" "$t" train
done
run_group crossover "" "$(echo "$THREADS" | tr ' ' ',')" ""
echo "== sweep done in $(( $(date +%s) - start )) s"

mkdir -p "$MHA_ROOT/bench/results"
OUT_JSON="$MHA_ROOT/bench/results/$(date +%Y-%m-%d).json"
if [ ${#SMOKE[@]} -gt 0 ]; then
  OUT_JSON="$RAW/smoke.json"
fi
"$MHA_PYTHON" "$MHA_ROOT/scripts/bench_report.py" --raw "$RAW" --json "$OUT_JSON" \
  $( [ ${#SMOKE[@]} -gt 0 ] && echo "--no-docs" ) \
  --markdown "$MHA_ROOT/docs/benchmarks.md" --plot "$MHA_ROOT/docs/benchmarks.png"
echo "wrote $OUT_JSON"
