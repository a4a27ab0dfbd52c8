# Sourced by the scripts: where the venv and the build live.
# MHA_VENV: the Python virtual environment holding torch==2.13.0 (LibTorch comes from it).
# MHA_BUILD_DIR: the CMake build tree.
MHA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MHA_VENV="${MHA_VENV:-$HOME/.cache/mha/venv}"
MHA_BUILD_DIR="${MHA_BUILD_DIR:-$MHA_ROOT/build}"
MHA_PYTHON="$MHA_VENV/bin/python"
export MHA_ROOT MHA_VENV MHA_BUILD_DIR MHA_PYTHON
# OMP_WAIT_POLICY: PASSIVE unless set. libgomp (in the torch wheel) reads it once, when it
# loads; its default spins waiting threads, and on a shared machine a 2-thread call then
# waits for a descheduled partner (docs/semantics.md, "Prepacked weights and threads").
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
