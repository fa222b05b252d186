#!/usr/bin/env bash
# Rewrites the toy model's measured figures in the docs from what the built glassbox prints:
# docs/toy-world.md (test_toy) and the recall table of docs/attention.md (test_recall).
# Usage: tools/update-toy-figures.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target glassbox_cli test_toy test_recall default_model
GLASSBOX_UPDATE_DOCS=1 ctest --test-dir "$build" -R '^test_(toy|recall)$' --output-on-failure
git -C "$root" diff --stat -- docs/toy-world.md docs/attention.md
