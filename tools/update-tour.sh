#!/usr/bin/env bash
# Rewrites the recorded outputs in docs/tour.md (and docs/images/pipeline.svg, the default chain) from what the built glassbox prints.
# Usage: tools/update-tour.sh [BUILD_DIR]   (default: build). Needs ../shared for section 7.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target glassbox_cli test_readme default_model
GLASSBOX_UPDATE_DOCS=1 "$build/bin/test_readme" --run_test=tour_commands_run_and_print_what_it_shows --log_level=message
"$build/bin/glassbox" plugins --graph -o "$root/docs/images/pipeline.svg"
git -C "$root" diff --stat -- docs/tour.md docs/images/pipeline.svg
