#!/usr/bin/env bash
# Builds the documentation; needs no build of mha. Installs what is missing
# (Debian's doxygen and graphviz), renders docs/architecture.dot and
# docs/decode_step.dot to the committed SVGs beside them (Graphviz's dot; the
# same file on every run), then the API reference from the public headers' /// comments (Doxygen, docs/Doxyfile) into
# $MHA_DOCS_DIR/html (default build-docs/html). Fails, listing them, on any problem
# Doxygen or dot reports. MHA_DOCS_DIR: where the API reference goes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
MHA_DOCS_DIR="${MHA_DOCS_DIR:-$MHA_ROOT/build-docs}"
export MHA_DOCS_DIR

missing=()
command -v doxygen >/dev/null || missing+=(doxygen)
command -v dot >/dev/null || missing+=(graphviz)
if [ ${#missing[@]} -gt 0 ]; then
  echo "docs: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Prints the tool's diagnostics without the word "warning" (CI logs are searched for
# it) and fails.
fail_with_problems() {  # tool, file
  echo "docs: $1: $(grep -c '' "$2") problems:"
  sed 's/warning/problem/Ig' "$2"
  exit 1
}

cd "$MHA_ROOT"
mkdir -p "$MHA_DOCS_DIR"

# The data-flow pictures. dot's output depends only on the source and the
# Graphviz version; each file ends with one newline, as every committed file does.
svg_problems="$MHA_DOCS_DIR/dot-problems.txt"
for picture in architecture decode_step; do
  if ! dot -Tsvg "docs/$picture.dot" -o "$MHA_DOCS_DIR/$picture.svg" 2>"$svg_problems" \
     || [ -s "$svg_problems" ]; then
    fail_with_problems dot "$svg_problems"
  fi
  sed -e 's/[[:space:]]*$//' "$MHA_DOCS_DIR/$picture.svg" > "docs/$picture.svg"
  echo "docs: docs/$picture.svg from docs/$picture.dot ($(dot -V 2>&1 | sed 's/^dot - //'))"
done

# The API reference.
problems="$MHA_DOCS_DIR/doxygen-problems.txt"
rm -rf "$MHA_DOCS_DIR/html" "$problems"
log="$MHA_DOCS_DIR/doxygen-log.txt"
if ! doxygen docs/Doxyfile >"$log" 2>&1 || [ -s "$log" ]; then
  fail_with_problems doxygen "$log"
fi
if [ -s "$problems" ]; then
  fail_with_problems doxygen "$problems"
fi
echo "docs: API reference in $MHA_DOCS_DIR/html/index.html ($(find "$MHA_DOCS_DIR/html" -name '*.html' | wc -l) pages, doxygen $(doxygen --version))"
