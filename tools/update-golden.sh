#!/usr/bin/env bash
# Rewrites the golden traces (tests/golden/*.jsonl) from the current build, then shows what changed.
# Usage: tools/update-golden.sh [BUILD_DIR]   (default: build). See docs/golden-traces.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target glassbox_cli test_golden
GLASSBOX_UPDATE_GOLDEN=1 ctest --test-dir "$build" -R '^test_golden$' --output-on-failure
git -C "$root" diff --stat -- tests/golden
echo "update-golden: review the changes above (git diff tests/golden) and commit them with their reason"
