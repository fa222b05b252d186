#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang + ASan/UBSan in their own build folder and runs each
# for a bounded time, seeded with the real files (../shared models, GGUF files, tests/golden traces) and
# the kept regression inputs. A finding fails the script; fix it and keep the input in
# tests/fuzz/regressions/TARGET/ (test_fuzz_regressions replays them). See docs/reliability.md.
# Usage: tools/fuzz.sh [SECONDS_PER_TARGET]   (default 20; build folder: $GLASSBOX_FUZZ_BUILD_DIR or build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
build=${GLASSBOX_FUZZ_BUILD_DIR:-build-fuzz}
shared=${GLASSBOX_TEST_DATA:-../shared}
cxx=${CXX_FUZZ:-clang++-14}
cc=${CC_FUZZ:-clang-14}
command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (tools/install-deps.sh with GLASSBOX_DEPS_EXTRA=fuzz)" >&2; exit 1; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DGLASSBOX_FUZZ=ON -DBUILD_TESTING=OFF ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
targets="fuzz_model fuzz_gguf fuzz_tokenizer fuzz_bpe fuzz_trace"
# The targets and the plugin modules the tokenizer targets load (not the CLI: nothing here runs it).
modules=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \(tokenizer_[a-z0-9_]*\|sampler_[a-z0-9_]*\|attention_[a-z0-9_]*\).*/\1/p')
cmake --build "$build" -j"$(nproc)" --target $targets $modules

# Seeds: the kept regression inputs plus the real files each target reads.
seed() {  # seed TARGET REGRESSION_DIR FILES...
  local dir="$build/corpus/$1"; mkdir -p "$dir"
  cp -f tests/fuzz/regressions/"$2"/* "$dir"/ 2>/dev/null || true
  shift 2
  for f in "$@"; do [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 4194304 ] && cp -f "$f" "$dir"/ || true; done
}
seed fuzz_model model "$shared"/models/stories260K.bin "$shared"/gguf/stories260K-q4_0.gguf "$shared"/gguf/stories260K-q8_0.gguf
seed fuzz_gguf gguf "$shared"/gguf/*.gguf
seed fuzz_tokenizer tokenizer "$shared"/models/tok512.bin
seed fuzz_bpe bpe
seed fuzz_trace trace tests/golden/*.jsonl

status=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in $targets; do
  mkdir -p "$build/findings/$t"
  echo "fuzz.sh: $t for ${seconds}s"
  if ! "$build/bin/$t" -max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$build/findings/$t/" -print_final_stats=1 "$build/corpus/$t" >"$build/findings/$t.log" 2>&1; then
    echo "fuzz.sh: $t found a problem: see $build/findings/$t.log and $build/findings/$t/" >&2
    tail -30 "$build/findings/$t.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/findings/$t.log" | tr '\n' ' '; echo
  fi
done
exit $status
