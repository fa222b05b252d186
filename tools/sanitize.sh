#!/usr/bin/env bash
# The whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (clang 14) in its own build
# folder, which also holds the libFuzzer targets (tools/fuzz.sh builds and runs them from the same folder, so
# CI compiles the library once for both). See docs/reliability.md.
# Usage: tools/sanitize.sh [TEST_REGEX]   (default: every test but the page-script ones; build folder:
#        $GLASSBOX_SANITIZE_BUILD_DIR or build-sanitize)
#        tools/sanitize.sh --configure    (only configure the folder: tools/fuzz.sh does this)
# With TEST_REGEX (a ctest -R pattern over test_* names, e.g. 'reliability|fuzz_regressions') only those
# tests and what they run (the CLI, libglassbox, the plugin modules) are built.
# -O1 and line tables only (no variable info): a third less compile time than -O2 -g, and ASan reports
# still name file:line. $CXX_SANITIZE / $CC_SANITIZE pick another compiler (g++ works, without the fuzz targets).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_SANITIZE_BUILD_DIR:-build-sanitize}
cxx=${CXX_SANITIZE:-clang++-14}
cc=${CC_SANITIZE:-clang-14}
command -v "$cxx" >/dev/null || { echo "sanitize.sh: $cxx not found (tools/install-deps.sh with GLASSBOX_DEPS_EXTRA=fuzz)" >&2; exit 1; }
fuzz=OFF; lines=-g1
if "$cxx" --version | grep -q clang; then fuzz=ON; lines=-gline-tables-only; fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 $lines -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 $lines -DNDEBUG" \
  -DGLASSBOX_SANITIZE=ON -DGLASSBOX_FUZZ=$fuzz \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
[ "${1:-}" = --configure ] && exit 0
tests=${1:-}
if [ -z "$tests" ]; then
  cmake --build "$build" -j"$(nproc)"  # the fuzz targets too, when built with clang
else
  # Everything but the test executables and fuzz targets, then the chosen tests.
  targets=$(cd tests && ls test_*.cpp | sed 's/\.cpp$//' | grep -E "$tests" || true)
  [ -n "$targets" ] || { echo "sanitize.sh: no test matches '$tests'" >&2; exit 2; }
  others=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \([a-z_0-9]*\).*/\1/p' | grep -vE '^(test_|fuzz_|all$|clean$|depend$|install|list_install|rebuild_cache|edit_cache|test$|package)' || true)
  cmake --build "$build" -j"$(nproc)" --target $others $targets
fi
# Leaks are findings; a UB report stops the test (-fno-sanitize-recover makes it fatal).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tools/lsan.supp}
# Without a regex, every test but those labelled page-script (JavaScript in Chromium: tests/CMakeLists.txt).
if [ -n "$tests" ]; then
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "^test_($tests)\$"
else
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -LE page-script
fi
