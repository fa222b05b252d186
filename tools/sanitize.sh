#!/usr/bin/env bash
# The whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer in its own build folder.
# Usage: tools/sanitize.sh [extra ctest arguments]   (build folder: $GLASSBOX_SANITIZE_BUILD_DIR or build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_SANITIZE_BUILD_DIR:-build-sanitize}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASSBOX_SANITIZE=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$build" -j"$(nproc)"
# Leaks are findings; a UB report stops the test (-fno-sanitize-recover makes it fatal).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/lsan.supp}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
