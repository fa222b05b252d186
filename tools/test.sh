#!/usr/bin/env bash
# The whole test suite from scratch: install dependencies, configure, build, run ctest.
# Usage: tools/test.sh [extra ctest arguments]     (build folder: $GLASSBOX_BUILD_DIR or ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_BUILD_DIR:-build}
# The browser group brings Debian's chromium for the HTML viewer's headless test.
GLASSBOX_DEPS_EXTRA="${GLASSBOX_DEPS_EXTRA:-browser}" tools/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
