#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs and the GPU machine lacks into
# .gpu-deps/ (git-ignored): GoogleTest's sources and nlohmann_json's headers
# and CMake package, both from this machine's Debian packages (libgtest-dev,
# nlohmann-json3-dev). Carry .gpu-deps with the device call. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEPS=.gpu-deps
for p in libgtest-dev nlohmann-json3-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || { echo "gpu_check_deps: $p is not installed (scripts/setup.sh installs it)"; exit 1; }
done
rm -rf "$DEPS"
mkdir -p "$DEPS/usr/include" "$DEPS/usr/share/cmake"
cp -r /usr/src/googletest "$DEPS/googletest"
cp -r /usr/include/nlohmann "$DEPS/usr/include/"
cp -r /usr/share/cmake/nlohmann_json "$DEPS/usr/share/cmake/"
du -sh "$DEPS"
