#!/usr/bin/env bash
# Rewrites the option table in docs/options.md from the run option table (cli/run_options.cpp).
# Usage: tools/update-options.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target test_options
GLASSBOX_UPDATE_DOCS=1 "$build/bin/test_options" --run_test=help_and_docs/docs_options_md_lists_the_table --log_level=message
git -C "$root" diff --stat -- docs/options.md
