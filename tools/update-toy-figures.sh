#!/usr/bin/env bash
# Rewrites the figures table in docs/toy-world.md from what the built glassbox prints.
# Usage: tools/update-toy-figures.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target glassbox_cli test_toy default_model
GLASSBOX_UPDATE_DOCS=1 ctest --test-dir "$build" -R '^test_toy$' --output-on-failure
git -C "$root" diff --stat -- docs/toy-world.md
