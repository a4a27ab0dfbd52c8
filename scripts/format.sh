#!/usr/bin/env bash
# Formats mha's C++ sources with .clang-format, using Debian's clang-format-19
# (pinned, so that formatting does not drift between machines; installed if
# missing). Usage: scripts/format.sh [--check]   (--check: change nothing, fail
# on any difference; CI runs it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLANG_FORMAT=clang-format-19
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "format: installing $CLANG_FORMAT"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$CLANG_FORMAT" >/dev/null
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = "--check" ]; then
  "$CLANG_FORMAT" --dry-run --Werror "${files[@]}"
  echo "format: ${#files[@]} files formatted as .clang-format says"
else
  "$CLANG_FORMAT" -i "${files[@]}"
fi
