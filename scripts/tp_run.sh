#!/usr/bin/env bash
# Starts N ranks of PROGRAM on this machine, as torchrun would: MASTER_ADDR=127.0.0.1,
# MASTER_PORT (a free port; rank 0 hosts the TCPStore there), RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, and OMP_NUM_THREADS=1 unless set.
# Usage: scripts/tp_run.sh N PROGRAM [ARGS...]
#   TP_RUN_TIMEOUT: seconds before a run that has not finished fails (default 120).
# Exits 0 when every rank exits 0. Otherwise (a rank failed, crashed or the run
# timed out) it names the rank and why, stops the other ranks, prints every rank's
# output prefixed with [rank R] and exits 1; no rank is left running.
set -uo pipefail
if [ $# -lt 2 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N PROGRAM [ARGS...]" >&2
  exit 2
fi
N=$1
shift
TIMEOUT="${TP_RUN_TIMEOUT:-120}"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
LOGS="$(mktemp -d)"
PIDS=()

stop_all() {  # each rank is the leader of its own process group (setsid)
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  wait 2>/dev/null
}
print_logs() {
  local r
  for ((r = 0; r < N; r++)); do sed "s/^/[rank $r] /" "$LOGS/rank$r.log"; done
}
trap 'stop_all; rm -rf "$LOGS"; exit 1' INT TERM

for ((r = 0; r < N; r++)); do
  MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" RANK=$r WORLD_SIZE="$N" LOCAL_RANK=$r \
    LOCAL_WORLD_SIZE="$N" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    setsid "$@" >"$LOGS/rank$r.log" 2>&1 &
  PIDS+=($!)
done

failure=""
deadline=$((SECONDS + TIMEOUT))
remaining=$N
declare -A done_rank=()
while [ "$remaining" -gt 0 ] && [ -z "$failure" ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    hung=""
    for ((r = 0; r < N; r++)); do [ -z "${done_rank[$r]:-}" ] && hung+=" $r"; done
    failure="timed out after ${TIMEOUT}s; still running: rank(s)$hung"
    break
  fi
  for ((r = 0; r < N; r++)); do
    [ -n "${done_rank[$r]:-}" ] && continue
    kill -0 "${PIDS[$r]}" 2>/dev/null && continue
    wait "${PIDS[$r]}"
    rc=$?
    done_rank[$r]=1
    remaining=$((remaining - 1))
    if [ "$rc" -ne 0 ]; then
      why="exited with status $rc"
      [ "$rc" -gt 128 ] && why="was killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
      failure="rank $r $why"
      break
    fi
  done
  sleep 0.1
done

if [ -n "$failure" ]; then
  stop_all
  print_logs
  echo "tp_run: FAILED: $failure ($N ranks of $*)" >&2
  rm -rf "$LOGS"
  exit 1
fi
print_logs
rm -rf "$LOGS"
echo "tp_run: all $N ranks passed"
