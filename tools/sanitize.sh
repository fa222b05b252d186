#!/usr/bin/env bash
# The test suite built with AddressSanitizer + UndefinedBehaviorSanitizer in its own build folder.
# Usage: tools/sanitize.sh [TEST_REGEX]   (default: every test; build folder: $GLASSBOX_SANITIZE_BUILD_DIR or build-sanitize)
# With TEST_REGEX (a ctest -R pattern over test_* names, e.g. 'reliability|fuzz_regressions') only those
# tests and what they run (the CLI, libglassbox, the plugin modules) are built: CI's faster subset.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_SANITIZE_BUILD_DIR:-build-sanitize}
tests=${1:-}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASSBOX_SANITIZE=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
if [ -z "$tests" ]; then
  cmake --build "$build" -j"$(nproc)"
else
  # Everything but the test executables, then the chosen ones.
  targets=$(cd tests && ls test_*.cpp | sed 's/\.cpp$//' | grep -E "$tests" || true)
  [ -n "$targets" ] || { echo "sanitize.sh: no test matches '$tests'" >&2; exit 2; }
  others=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \([a-z_0-9]*\).*/\1/p' | grep -vE '^(test_|all$|clean$|depend$|install|list_install|rebuild_cache|edit_cache|test$|package)' || true)
  cmake --build "$build" -j"$(nproc)" --target $others $targets
fi
# Leaks are findings; a UB report stops the test (-fno-sanitize-recover makes it fatal).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/lsan.supp}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" ${tests:+-R "^test_($tests)\$"}
